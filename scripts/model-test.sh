#!/usr/bin/env bash
# The model-based test of the async contract (crates/baton-composite/tests/
# model_based), run long: many cases of longer sequences, under each wait
# policy, one seed per round. CI runs 512 cases with one fixed seed (about 11 s).
# Usage: scripts/model-test.sh ; CASES=5000 OPS=40 ROUNDS=3 by default.
# SEED=n starts from that seed (the default is the date); SETUP=cpu, chaos
# or composite runs only cases on those devices (default: all).
set -euo pipefail
CASES=${CASES:-5000}
OPS=${OPS:-40}
ROUNDS=${ROUNDS:-3}
SEED=${SEED:-$(date +%s)}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
cargo build -p baton-composite --test model_based
for round in $(seq 0 $((ROUNDS - 1))); do
  for policy in block spin poll; do
    seed=$((SEED + round))
    echo "== round $round, policy $policy, seed $seed"
    BATON_WAIT_POLICY=$policy BATON_MODEL_CASES=$CASES BATON_MODEL_OPS=$OPS BATON_MODEL_SEED=$seed \
      BATON_MODEL_SETUP=${SETUP:-} \
      cargo test -p baton-composite --test model_based random_sequences -- --nocapture
  done
done
