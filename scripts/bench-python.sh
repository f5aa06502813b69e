#!/usr/bin/env bash
# Greedy decode through the Python package (`baton.Llama`) against
# `baton run` and the reference engine's `llama_cpp.Llama` on the same file
# and threads, alternating rounds (scripts/bench_python.py). Not part of
# CI: the reference is installed by scripts/compare-reference.sh
# --install-only (it compiles itself: minutes). Arguments go to
# bench_python.py (-n, -r, -t, --ctx, --prompt); MODEL names the GGUF
# (default: the cached SmolLM2-135M-Instruct Q4_1).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
model=${MODEL:-${BATON_SMOLLM2:-$HOME/.cache/baton/models/SmolLM2-135M-Instruct.Q4_1.gguf}}
python=$(bash scripts/setup-python-package.sh | tail -n 1)
cargo build --release -p baton-cli >&2
bash scripts/compare-reference.sh --install-only >&2
reference=target/ref-llama-venv/bin/python
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
exec "$python" scripts/bench_python.py --baton target/release/baton --baton-python "$python" \
  --reference-python "$reference" --model "$model" "$@"
