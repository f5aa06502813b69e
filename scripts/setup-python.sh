#!/usr/bin/env bash
# Creates the Python environment for Baton's independent reference checks
# (PyPI gguf, numpy, tokenizers, jinja2) and prints its python path on the last line.
# Safe to run concurrently: a lock serialises creation.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${BATON_PY_VENV:-$repo/target/ref-venv}
mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import gguf, numpy, tokenizers, jinja2' 2>/dev/null; then
  echo "setting up $venv (gguf, numpy, tokenizers, jinja2)..." >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    "numpy>=1.26" "gguf>=0.10" "tokenizers>=0.19" "jinja2>=3.1" >&2
fi
echo "$venv/bin/python"
