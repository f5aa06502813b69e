#!/usr/bin/env bash
# Perplexity of one GGUF model three ways on the same text, same context,
# same chunks, BOS as the file asks: `baton perplexity`, the reference
# engine (llama-cpp-python, scripts/reference-perplexity.py) and the NumPy
# float64 reference (tests/reference/llama_ref.py) on the reference
# engine's token ids. Not part of CI (the reference engine compiles itself
# on first use; the NumPy pass over a 262k vocabulary takes minutes).
#
# Usage: scripts/gemma-perplexity.sh [-m MODEL] [-f TEXT] [-c CTX] [--chunks N]
# Default: the real Gemma 3 270M Q4_K_M, GPL-3's text, -c 256, 8 chunks.
set -euo pipefail
cd "$(dirname "$0")/.."
model=gemma3-270m text=/usr/share/common-licenses/GPL-3 ctx=256 chunks=8
while [ $# -gt 0 ]; do
  case "$1" in
    -m) model=$2; shift 2 ;;
    -f) text=$2; shift 2 ;;
    -c) ctx=$2; shift 2 ;;
    --chunks) chunks=$2; shift 2 ;;
    -h|--help) sed -n 2,10p "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
bash scripts/compare-reference.sh --install-only
python_ref=$(bash scripts/setup-python.sh | tail -n 1)
cargo build --release -q -p baton-cli
baton=$PWD/target/release/baton
if [ ! -f "$model" ]; then
  model=$("$baton" model fetch "$model" | tail -n 1)
fi
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); model $model; text $text; ctx $ctx; $chunks chunks"
ids=$(mktemp --suffix .json)
trap 'rm -f "$ids"' EXIT
echo "== baton perplexity"
"$baton" perplexity -m "$model" -f "$text" -c "$ctx" -b "$ctx" --chunks "$chunks" 2>&1 | grep -E "^perplexity|tokens" || true
echo "== reference engine (llama-cpp-python)"
target/ref-llama-venv/bin/python scripts/reference-perplexity.py "$model" -f "$text" -c "$ctx" --chunks "$chunks" --ids-out "$ids"
echo "== NumPy float64 reference, on the reference engine's token ids"
"$python_ref" tests/reference/llama_ref.py perplexity "$model" --tokens-file "$ids" --ctx "$ctx" --chunks "$chunks"
