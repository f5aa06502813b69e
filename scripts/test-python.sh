#!/usr/bin/env bash
# The Python package (crates/baton-python): its wheel built and installed
# by scripts/setup-python-package.sh, then its pytest suite
# (crates/baton-python/tests) against SmolLM2 (BATON_SMOLLM2, else the
# cached file) and the baton binary (BATON_BIN, else target/release/baton)
# for the side-by-side checks; the frameworks' tests but llama-index's
# (scripts/test-python-frameworks.sh). A suite that hangs is ended after 10
# minutes. Extra arguments go to pytest.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
# langchain-community, for test_langchain.py (its LlamaCpp, ChatLlamaCpp
# and LlamaCppEmbeddings on the `llama_cpp` shim): about 50 s of install,
# once per venv. llama-index's test (tests/frameworks) costs more and runs
# in scripts/test-python-frameworks.sh, outside CI.
python=$(bash scripts/setup-python-package.sh "langchain-community>=0.4,<0.5" | tail -n 1)
# Absolute: the tests run from their own folder.
BATON_BIN=$(realpath -m "${BATON_BIN:-$repo/target/release/baton}")
export BATON_BIN
[ -x "$BATON_BIN" ] || cargo build --release -p baton-cli >&2
# From the tests' folder, so `import baton` is the installed wheel.
cd crates/baton-python/tests
timeout 600 "$python" -m pytest -q -p no:cacheprovider --ignore=frameworks "$@" .
