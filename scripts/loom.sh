#!/usr/bin/env bash
# Model-checks the sync core, the CPU stream queue and the pool's bell with loom (every
# interleaving within the preemption bound of `baton_core::loom::model`). The models are
# the `loom_tests` modules next to the code they check (baton-core's src/sync,
# baton-cpu's src/bell and src/queue), built only under `--cfg loom`.
set -euo pipefail
cd "$(dirname "$0")/.."
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}/loom \
  cargo test -p baton-core -p baton-cpu --lib --release loom_tests "$@"
