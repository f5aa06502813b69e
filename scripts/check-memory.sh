#!/usr/bin/env bash
# Peak RSS of a loaded model against its budget: `baton model memory
# --check` fails when the peak after loading, the first step and a prompt
# is above what the process held before loading + 1.1 x the GGUF file + the
# KV cache + io + scratch (issue 27). CI runs it on SmolLM2 (the real file);
# `--large` adds the 1B, 3B and 8B synthetic shapes (written to
# target/large-models once; minutes and gigabytes), and Gemma 3 270M is
# checked where it is cached. Usage: scripts/check-memory.sh [--large]
set -euo pipefail
cd "$(dirname "$0")/.."
baton=${BATON_BIN:-target/release/baton}
[ -x "$baton" ] || cargo build --release -p baton-cli >&2

check() {
  local model=$1; shift
  echo "-- $model $*" >&2
  "$baton" model memory -m "$model" -t 2 "$@" --check
}

smollm2=${BATON_SMOLLM2:-$(bash scripts/fetch-smollm2.sh | tail -n 1)}
check "$smollm2" -c 512 -p 64
check "$smollm2" -c 4096 -p 256

gemma="${BATON_CACHE_DIR:-$HOME/.cache/baton}/models/gemma-3-270m-q4_k_m.gguf"
if [ -f "$gemma" ]; then
  check "$gemma" -c 512 -p 64
fi

if [ "${1:-}" = "--large" ]; then
  mkdir -p target/large-models
  for shape in llama1B llama3B llama8B; do
    file=target/large-models/$shape-q4_k_m.gguf
    [ -f "$file" ] || "$baton" model synth --shape "$shape" --type q4_k_m -o "$file"
    check "$file" -c 4096 -p 512
  done
fi
