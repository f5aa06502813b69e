#!/usr/bin/env bash
# Baton's tokenizer against llama.cpp's own (llama-cpp-python) on the
# vocabulary kinds HF `tokenizers` does not model in scripts/test.sh: a
# synthetic Gemma 4 vocabulary (`tokenizer.ggml.model = gemma4`, written by
# `baton model synth --shape gemma4`), every text of
# tests/reference/tokenizer_common.py's corpus (built-in texts and the
# repository's Markdown files) encoded with and without special tokens, ids
# equal and decoding giving the text back
# (crates/baton-tokenizer/tests/it/llama_reference.rs). Installs the
# reference as scripts/compare-reference.sh does (target/ref-llama-venv,
# minutes on first use); not part of CI.
#
# Usage: scripts/compare-tokenizer.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/compare-reference.sh --install-only >&2
venv=target/ref-llama-venv
cargo build --release -p baton-cli --bin baton >&2
target_dir=$(realpath -m "${CARGO_TARGET_DIR:-target}")
out=target/compare/tokenizer
mkdir -p "$out"
"$target_dir/release/baton" model synth --shape gemma4 --type f32 -o "$out/gemma4.gguf" >&2
"$venv/bin/python" tests/reference/tokenizer_llama_ref.py "$out/gemma4.gguf" "$out/gemma4.json"
BATON_TOKENIZER_LLAMA_REF=$PWD/$out/gemma4.json \
  cargo test --release -p baton-tokenizer --features llama-reference-tests --test it llama_reference -- --nocapture
