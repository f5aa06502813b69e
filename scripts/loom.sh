#!/usr/bin/env bash
# Model-checks the sync core with loom (every interleaving within the
# preemption bound set in crates/baton-core/tests/loom_sync.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
  cargo test -p baton-core --test loom_sync --release "$@"
