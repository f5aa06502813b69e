#!/usr/bin/env bash
# The bounded load test of `baton serve` (issue 17): 16 concurrent clients,
# 200 requests mixing streaming and whole completions, clients that leave
# mid-stream and malformed requests, against a synthetic tiny model (or
# SmolLM2 with MODEL=smollm2: BATON_SMOLLM2 or the model cache). Checks that
# no answer is lost, mixed with another's or truncated (each equals the same
# request served alone), that bad input gets a 4xx JSON error, and that the
# server's RSS does not grow by more than a margin in a load after a
# warm-up load (up to three loads are measured: a leak grows every one).
# See scripts/load_test_serve.py for the checks.
# Usage: scripts/load-test-serve.sh [more baton serve arguments]
# Env: MODEL=synth|smollm2, CLIENTS=16, REQUESTS=200, PARALLEL=8, PROFILE=release,
#      LOAD_TEST_LOG=file (the server's output).
set -euo pipefail
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
target=$(cd "$(dirname "$0")/.." && mkdir -p "$CARGO_TARGET_DIR" && cd "$CARGO_TARGET_DIR" && pwd)
profile=${PROFILE:-release}
if [ "$profile" = release ]; then
  # The test suite's release build (scripts/test-build.sh).
  source "$(dirname "$0")/test-build.sh"
  build_release_binaries >/dev/null
else
  cargo build -p baton-cli
fi
baton=$target/$profile/baton
case ${MODEL:-synth} in
  synth)
    model=$target/load-test-tiny.gguf
    "$baton" model synth --shape tiny --type q4_1 -o "$model" >/dev/null
    context=256
    ;;
  smollm2)
    model=${BATON_SMOLLM2:-$HOME/.cache/baton/models/SmolLM2-135M-Instruct.Q4_1.gguf}
    context=512
    ;;
  *) echo "MODEL must be synth or smollm2" >&2; exit 2 ;;
esac
start=$(date +%s)
python3 "$(dirname "$0")/load_test_serve.py" --baton "$baton" --model "$model" \
  --clients "${CLIENTS:-16}" --requests "${REQUESTS:-200}" --parallel "${PARALLEL:-8}" \
  --context "$context" -- "$@"
echo "load test took $(( $(date +%s) - start )) s"
