#!/usr/bin/env python3
"""Reference for baton-tokenizer from llama.cpp itself (llama-cpp-python).

Loads a GGUF file's vocabulary with llama-cpp-python (`vocab_only`), tokenizes
the corpus of tokenizer_common.py (built-in texts, all of them joined, a long
number, and the repository's Markdown files) twice, and writes JSON that
crates/baton-tokenizer/tests/it/llama_reference.rs checks against:

    {"config": {model, pre, tokens, merges, token_types, bos_id, ...},
     "cases": [{"text": ..., "special": [...], "plain": [...]}]}

`special` is `tokenize(text, add_bos=True, special=True)` (BOS as the file
says or llama.cpp forces, control tokens matched), `plain` is
`tokenize(text, add_bos=False, special=False)`.

This is the oracle for the tokenizers HF `tokenizers` does not model, such
as Gemma 4's (`tokenizer.ggml.model = gemma4`). scripts/compare-tokenizer.sh
writes a synthetic vocabulary of that kind, runs this script and the test.

Usage (python: target/ref-llama-venv/bin/python, made by
scripts/compare-reference.sh):
    tokenizer_llama_ref.py MODEL.gguf OUT.json
"""

import argparse
import json

from gguf import GGUFReader
from llama_cpp import Llama
from tokenizer_common import BUILTIN_CORPUS, real_texts, tokenizer_config


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gguf")
    ap.add_argument("out")
    args = ap.parse_args()

    config = tokenizer_config(GGUFReader(args.gguf))
    llm = Llama(model_path=args.gguf, vocab_only=True, verbose=False)
    corpus = BUILTIN_CORPUS + ["\n\n".join(BUILTIN_CORPUS), "9" * 200] + real_texts()
    cases = []
    for text in corpus:
        data = text.encode("utf-8")
        cases.append({
            "text": text,
            "special": llm.tokenize(data, add_bos=True, special=True),
            "plain": llm.tokenize(data, add_bos=False, special=False),
        })
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"config": config, "cases": cases}, f, ensure_ascii=False)
    print(f"wrote {len(cases)} texts ({config['model']} vocabulary of {len(config['tokens'])} tokens) to {args.out}")


if __name__ == "__main__":
    main()
