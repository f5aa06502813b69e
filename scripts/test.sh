#!/usr/bin/env bash
# Baton's test suite: the workspace's unit, contract, op and property tests,
# plus the checks against independent references (NumPy llama forward pass,
# the PyPI gguf and tokenizers packages), which this script prepares:
# a Python environment (scripts/setup-python.sh) and the SmolLM2 model
# (scripts/fetch-smollm2.sh), and the Vulkan backend's conformance suite on
# Mesa's lavapipe (scripts/setup-vulkan.sh installs it), and the MPI tests
# (scripts/test-mpi.sh, which installs Open MPI), and the server with the
# official `openai` client (scripts/test-serve.sh), and the Python package
# (scripts/test-python.sh). Extra arguments go to
# cargo nextest.
set -euo pipefail
cd "$(dirname "$0")/.."
test_start=$(date +%s)
part() { echo "-- test.sh: $1 ($(( $(date +%s) - test_start )) s)" >&2; }

if ! command -v cargo-nextest >/dev/null 2>&1; then
  echo "installing cargo-nextest..." >&2
  cargo install --locked cargo-nextest >&2
fi

BATON_PYTHON=$(bash scripts/setup-python.sh | tail -n 1)
BATON_SMOLLM2=$(bash scripts/fetch-smollm2.sh | tail -n 1)
export BATON_PYTHON BATON_SMOLLM2

# The tokenizer reference: HF tokenizers built from the GGUF's vocabulary.
mkdir -p target/reference
BATON_TOKENIZER_REF=target/reference/tokenizer-smollm2.json
if [ ! -s "$BATON_TOKENIZER_REF" ] || [ tests/reference/tokenizer_ref.py -nt "$BATON_TOKENIZER_REF" ] \
   || [ tests/reference/tokenizer_common.py -nt "$BATON_TOKENIZER_REF" ]; then
  "$BATON_PYTHON" tests/reference/tokenizer_ref.py "$BATON_SMOLLM2" "$BATON_TOKENIZER_REF" >&2
fi
export BATON_TOKENIZER_REF=$PWD/$BATON_TOKENIZER_REF

# The Vulkan backend's driver: Mesa's lavapipe, with the validation layer
# (synchronization checks included) as an oracle: any error it reports fails
# the test that caused it. A missing driver fails the run, never skips it.
VK_ICD_FILENAMES=$(bash scripts/setup-vulkan.sh | tail -n 1)
export VK_ICD_FILENAMES BATON_VK_VALIDATION=1 BATON_REQUIRE_VULKAN=1

# One release build for everything below (scripts/test-build.sh): the MPI
# layer's features included, so Open MPI is installed first.
source scripts/test-build.sh
bash scripts/setup-mpi.sh >/dev/null
part "cargo nextest (build and run)"
cargo nextest run --workspace --release --features "$BATON_TEST_FEATURES" --no-fail-fast "$@"
# Peak RSS of SmolLM2 (and Gemma 3 where cached) against its budget: the
# weights held once (scripts/check-memory.sh; --large adds 1B to 8B).
part "memory (scripts/check-memory.sh)"
BATON_BIN=target/release/baton bash scripts/check-memory.sh
# The MPI layer under 2 and 3 ranks on loopback (its unit tests ran above).
part "MPI (scripts/test-mpi.sh)"
BATON_MPI_UNIT_TESTS_RAN=1 bash scripts/test-mpi.sh
# The server (`baton serve`) with the official `openai` Python client.
part "openai client (scripts/test-serve.sh)"
bash scripts/test-serve.sh
# Its bounded load test: 16 clients, 200 requests with disconnects and bad
# input, on a synthetic model.
part "load test (scripts/load-test-serve.sh)"
bash scripts/load-test-serve.sh
# The Python package: its wheel built with maturin, then its pytest suite.
part "Python package (scripts/test-python.sh)"
BATON_BIN=target/release/baton bash scripts/test-python.sh
# Doc tests (nextest does not run them): API examples and the compile-fail
# check that a borrowed buffer cannot be lent to write_async.
part "doc tests"
cargo test --workspace --release --doc --features "$BATON_TEST_FEATURES"
part "done"
