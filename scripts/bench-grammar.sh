#!/usr/bin/env bash
# What structured output costs per token (issue 48), on SmolLM2:
# 1. `baton bench constraint`: the constraint alone, replayed with the
#    model's vocabulary (llguidance: a JSON Schema, a tool call whose
#    arguments are that schema, GBNF; 1 and 8 sequences; paired rounds).
# 2. `baton serve` under 1 and 8 clients (`baton bench serve --url`):
#    free text, json_schema and GBNF requests in turn on one server, for
#    ROUNDS rounds, so each round gives paired ratios on a busy machine.
# Not a CI test: it prints figures, it asserts none.
# Usage: scripts/bench-grammar.sh
# Env: BATON_SMOLLM2 (the model file), ROUNDS=3, MAX_TOKENS=96, PORT=18481.
set -euo pipefail
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
cd "$(dirname "$0")/.."
cargo build --release -p baton-cli --bin baton >&2
baton=$CARGO_TARGET_DIR/release/baton
model=${BATON_SMOLLM2:-$HOME/.cache/baton/models/SmolLM2-135M-Instruct.Q4_1.gguf}
rounds=${ROUNDS:-3}
max_tokens=${MAX_TOKENS:-96}
port=${PORT:-18481}
work=$(mktemp -d)
server=
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

echo "## The constraint alone"
"$baton" bench constraint -m "$model" --sequences 1,8 --tokens 1000 --rounds 5
echo "Every draw refused (a mask each token, the worst case):"
"$baton" bench constraint -m "$model" --sequences 1,8 --tokens 1000 --rounds 3 --fit 0

cat >"$work/schema.json" <<'JSON'
{"type": "object", "properties": {"lines": {"type": "array", "items": {"type": "object",
  "properties": {"item": {"type": "string", "maxLength": 24}, "count": {"type": "integer", "minimum": 0},
                 "urgent": {"type": "boolean"}, "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
  "required": ["item", "count", "urgent", "note"]}}}, "required": ["lines"]}
JSON
cat >"$work/grammar.gbnf" <<'GBNF'
root ::= line+
line ::= [A-Za-z ,.']+ "\n"
GBNF

"$baton" serve -m "$model" --host 127.0.0.1 --port "$port" --parallel 8 -c 8192 >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 120); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
  sleep 1
done
echo
echo "## baton serve, $rounds rounds of free / json_schema / GBNF, $max_tokens tokens per request (ignore_eos)"
for round in $(seq "$rounds"); do
  for format in free schema gbnf; do
    case $format in
      free) extra=() ;;
      schema) extra=(--json-schema "$work/schema.json") ;;
      gbnf) extra=(--grammar "$work/grammar.gbnf") ;;
    esac
    "$baton" bench serve --url "http://127.0.0.1:$port" --clients 1,8 --requests-per-client 2 \
      --max-tokens "$max_tokens" --ignore-eos --stall-streams 0 --json "${extra[@]}" >"$work/$format-$round.json"
  done
done
python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
# tokens/s counts what was generated (a grammar may end an answer early,
# which changes the batch); the ITL p50 is the time of a step while the
# answers run, the fairer per-token figure.
figures = {}
for fmt in ("free", "schema", "gbnf"):
    for r in range(1, rounds + 1):
        for p in json.load(open(f"{work}/{fmt}-{r}.json"))["phases"]:
            figures.setdefault((fmt, p["clients"]), []).append((p["tokens_per_s"], p["itl_p50_ms"], p["tokens"]))
print("| clients | format | tokens | t/s | ITL p50 ms | t/s / free | ITL p50 free / this |")
print("|---|---|---|---|---|---|---|")
for clients in sorted({c for _, c in figures}):
    free = figures[("free", clients)]
    for fmt in ("free", "schema", "gbnf"):
        rows = figures[(fmt, clients)]
        tps = statistics.median(x[0] / f[0] for x, f in zip(rows, free))
        itl = statistics.median(f[1] / x[1] for x, f in zip(rows, free))
        print(f"| {clients} | {fmt} | {statistics.median(x[2] for x in rows)} | {statistics.median(x[0] for x in rows):.1f} | "
              f"{statistics.median(x[1] for x in rows):.2f} | {tps:.3f} | {itl:.3f} |")
print("(medians over rounds; ratios per round against the same round's free text)")
PY
