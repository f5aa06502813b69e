#!/usr/bin/env bash
# Baton's logits and greedy tokens against the reference engine's on the
# same files (see scripts/compare-logits.py). Installs the reference engine
# as scripts/compare-reference.sh does (target/ref-llama-venv, minutes on
# first use) and the PyPI `gguf` package beside it; not part of CI.
#
# Usage: scripts/compare-logits.sh [-n POSITIONS] [-g GREEDY] [--json] MODEL.gguf ...
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/compare-reference.sh --install-only >&2
venv=target/ref-llama-venv
"$venv/bin/pip" install --quiet --disable-pip-version-check gguf numpy >&2
cargo build --release -p baton-model --example logits >&2
target_dir=$(realpath -m "${CARGO_TARGET_DIR:-target}")
flags=() models=()
while [ $# -gt 0 ]; do
  case "$1" in
    -n|-g) flags+=("$1" "$2"); shift 2 ;;
    --json) flags+=("$1"); shift ;;
    *) models+=("$1"); shift ;;
  esac
done
for m in "${models[@]}"; do
  "$venv/bin/python" scripts/compare-logits.py --baton "$target_dir/release/examples/logits" "${flags[@]}" "$m"
done
