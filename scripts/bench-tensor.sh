#!/usr/bin/env bash
# Tensor parallelism figures, side by side in one run: tg of
# --split-mode tensor against layer and against one `cpu` device with -t 2,
# poll (and spin-then-block) gates against block gates, each round's and
# the medians over the rounds, and the gates' share of token time
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
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
for model in "$MODEL" "$TINY"; do
  echo "== $(basename "$model"), tg$N, $ROUNDS interleaved rounds (load: $(cut -d' ' -f1-3 /proc/loadavg))"
  rows=$(mktemp)
  for round in $(seq "$ROUNDS"); do
    layer=$(tg "$model" --devices cpu:0,cpu:1 -sm layer)
    one=$(tg "$model" --devices cpu -t 2)
    block=$(tg "$model" --devices cpu:0,cpu:1 -sm tensor --gate-policy block)
    spin=$(tg "$model" --devices cpu:0,cpu:1 -sm tensor --gate-policy spin)
    poll=$(tg "$model" --devices cpu:0,cpu:1 -sm tensor --gate-policy poll)
    echo "$layer $one $block $spin $poll" >>"$rows"
    awk -v r="$round" -v l="$layer" -v o="$one" -v b="$block" -v s="$spin" -v p="$poll" 'BEGIN {
      best = (p > b) ? p : b; best = (s > best) ? s : best
      printf "round %d: layer %.2f | cpu -t 2 %.2f | tensor block %.2f | spin %.2f | poll %.2f t/s\n", r, l, o, b, s, p
      printf "         tensor (best gates)/layer %.2fx, /cpu-t2 %.2fx, poll/block %.2fx\n", best / l, best / o, p / b }'
  done
  # Medians over the rounds, and the ratios of the medians.
  m() { cut -d' ' -f"$1" "$rows" | median; }
  awk -v l="$(m 1)" -v o="$(m 2)" -v b="$(m 3)" -v s="$(m 4)" -v p="$(m 5)" 'BEGIN {
    best = (p > b) ? p : b; best = (s > best) ? s : best
    printf "medians: layer %.2f | cpu -t 2 %.2f | tensor block %.2f | spin %.2f | poll %.2f t/s\n", l, o, b, s, p
    printf "         tensor (best gates)/layer %.2fx, /cpu-t2 %.2fx, poll/block %.2fx\n", best / l, best / o, p / b }'
  rm -f "$rows"
  for policy in block spin poll; do
    echo "-- gates' share of token time, $policy gates (--sync-profile):"
    "$BATON" bench -m "$model" --devices cpu:0,cpu:1 -sm tensor --gate-policy $policy -p 0 -n "$N" -r 2 --sync-profile 2>&1 |
      grep -E "^  cpu:" || true
  done
done
