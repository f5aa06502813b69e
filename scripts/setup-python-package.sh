#!/usr/bin/env bash
# Builds the `baton` Python package's wheel (crates/baton-python) with
# maturin and installs it into a venv of its own, target/py-venv (maturin,
# pytest and numpy from PyPI, and the pip specs given as arguments). Prints the wheel's build time and size on
# stderr and the venv's python on the last line of stdout.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
venv=target/py-venv
mkdir -p target
exec 9>"$repo/target/py-venv.lock"
flock 9
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" >&2
fi
"$venv/bin/python" -c 'import pytest, numpy' 2>/dev/null && [ -x "$venv/bin/maturin" ] ||
  "$venv/bin/pip" install --quiet --disable-pip-version-check "maturin>=1.9,<2" "pytest>=7" numpy >&2
# Extra requirements the caller's tests need (pip specs; one written
# `nodeps:SPEC` is installed without its dependencies), where missing.
for spec in "$@"; do
  case $spec in
    nodeps:*) "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps "${spec#nodeps:}" >&2 ;;
    *) "$venv/bin/pip" install --quiet --disable-pip-version-check "$spec" >&2 ;;
  esac
done
start=$(date +%s)
rm -rf target/wheels
"$venv/bin/maturin" build --release --quiet -m crates/baton-python/Cargo.toml -o target/wheels >&2
wheel=$(ls target/wheels/baton-*.whl)
echo "setup-python-package: built $(basename "$wheel") ($(( $(stat -c %s "$wheel") / 1024 )) KiB) in $(( $(date +%s) - start )) s" >&2
"$venv/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheel" >&2
echo "$repo/$venv/bin/python"
