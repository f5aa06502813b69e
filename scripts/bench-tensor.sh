#!/usr/bin/env bash
# Tensor parallelism figures, side by side in one run: tg of
# --split-mode tensor against layer and against one `cpu` device with -t 2,
# poll gates against block gates, and the gates' share of token time
# (--sync-profile), on SmolLM2 (or $MODEL) and the tiny synthetic shape.
# Usage: scripts/bench-tensor.sh [path/to/baton] ; ROUNDS=2 N=64 by default.
set -euo pipefail
BATON=${1:-target/release/baton}
MODEL=${MODEL:-$HOME/.cache/baton/models/SmolLM2-135M-Instruct.Q4_1.gguf}
TINY=${TINY:-/tmp/baton-bench-tiny.gguf}
N=${N:-64}
ROUNDS=${ROUNDS:-2}
[ -f "$TINY" ] || "$BATON" model synth --shape tiny --type q4_1 -o "$TINY" >/dev/null
tg() { # model, args... -> t/s
  local m=$1; shift
  "$BATON" bench -m "$m" "$@" -p 0 -n "$N" -r 3 --json 2>/dev/null | sed -n 's/.*"avg_ts":\([0-9.]*\).*/\1/p'
}
for model in "$MODEL" "$TINY"; do
  echo "== $(basename "$model"), tg$N, $ROUNDS interleaved rounds (load: $(cut -d' ' -f1-3 /proc/loadavg))"
  for round in $(seq "$ROUNDS"); do
    layer=$(tg "$model" --devices cpu:0,cpu:1 -sm layer)
    one=$(tg "$model" --devices cpu -t 2)
    block=$(tg "$model" --devices cpu:0,cpu:1 -sm tensor --gate-policy block)
    poll=$(tg "$model" --devices cpu:0,cpu:1 -sm tensor --gate-policy poll)
    awk -v r="$round" -v l="$layer" -v o="$one" -v b="$block" -v p="$poll" 'BEGIN {
      best = (p > b) ? p : b
      printf "round %d: layer %.2f | cpu -t 2 %.2f | tensor block %.2f | tensor poll %.2f t/s\n", r, l, o, b, p
      printf "         tensor/layer %.2fx, tensor/cpu-t2 %.2fx, poll/block %.2fx\n", best / l, best / o, p / b }'
  done
  for policy in block poll; do
    echo "-- gates' share of token time, $policy gates (--sync-profile):"
    "$BATON" bench -m "$model" --devices cpu:0,cpu:1 -sm tensor --gate-policy $policy -p 0 -n "$N" -r 2 --sync-profile 2>&1 |
      grep -E "^  cpu:" || true
  done
done
