#!/usr/bin/env bash
# The one release build the whole test suite uses (sourced by scripts/test.sh,
# test-mpi.sh, test-serve.sh and load-test-serve.sh): the cargo features of
# the test build, and a function that builds the binaries and examples with
# exactly those features, so that after `cargo nextest run` (which built them
# already) it compiles nothing, and no script makes a second build of the
# workspace in another profile or with other features.
#
# The features: the reference and model tests (which need the Python venv
# and SmolLM2 that scripts/test.sh prepares), the server's fault injection
# (its panic tests), and MPI (Open MPI from scripts/setup-mpi.sh): the `baton`
# binary with MPI behaves as without it unless started by `mpirun`.

BATON_TEST_FEATURES=baton-gguf/reference-tests,baton-gguf/model-tests,baton-tokenizer/reference-tests
BATON_TEST_FEATURES+=,baton-model/reference-tests,baton-gen/reference-tests,baton-serve/fault-injection,baton-serve/reference-tests,baton-mpi/mpi,baton-cli/mpi
export BATON_TEST_FEATURES

# Builds the release binaries and examples with the test features (MPI
# installed first) and prints the target directory.
build_release_binaries() {
  bash "$(dirname "${BASH_SOURCE[0]}")/setup-mpi.sh" >/dev/null
  cargo build --release --workspace --features "$BATON_TEST_FEATURES" --bins --examples >&2
  realpath -m "${CARGO_TARGET_DIR:-target}"
}
