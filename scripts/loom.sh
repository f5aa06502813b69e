#!/usr/bin/env bash
# Model-checks the sync core, the CPU stream queue and the pool's bell with loom (every
# interleaving within the preemption bound set in each model file).
set -euo pipefail
cd "$(dirname "$0")/.."
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
  cargo test -p baton-core --test loom_sync --release "$@"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
  cargo test -p baton-cpu --test loom_queue --test loom_bell --release "$@"
