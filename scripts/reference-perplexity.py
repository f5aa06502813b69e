#!/usr/bin/env python3
"""Perplexity of a GGUF model in the reference engine (llama-cpp-python),
by llama.cpp's method, the one `baton perplexity` follows: the text is
tokenized once (BOS only if the file asks for it), cut into whole chunks of
CTX tokens, each evaluated from an empty cache with its first token replaced
by BOS (when the file adds BOS), and the negative log-likelihood averaged
over the second half of every chunk.

Also writes the token ids it scored (--ids-out), so the NumPy reference
(tests/reference/llama_ref.py perplexity --tokens-file) can score the same.

Run with the reference engine's interpreter (target/ref-llama-venv, made by
scripts/compare-reference.sh --install-only). Prints one JSON object.
"""

import argparse
import json
import math
import sys

import numpy as np
from llama_cpp import Llama


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("-f", "--file", required=True)
    ap.add_argument("-c", "--ctx", type=int, default=256)
    ap.add_argument("--chunks", type=int, default=None)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--ids-out", default=None)
    args = ap.parse_args()

    llm = Llama(model_path=args.model, n_ctx=args.ctx, n_batch=args.ctx, n_ubatch=args.ctx,
                n_threads=args.threads, logits_all=True, verbose=False)
    add_bos = llm.metadata.get("tokenizer.ggml.add_bos_token", "true") == "true"
    text = open(args.file, encoding="utf-8").read()
    tokens = llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=False)
    n_chunks = len(tokens) // args.ctx
    if args.chunks is not None:
        n_chunks = min(n_chunks, args.chunks)
    if n_chunks == 0:
        sys.exit(f"{len(tokens)} tokens: fewer than one chunk of {args.ctx}")
    if args.ids_out:
        with open(args.ids_out, "w") as f:
            json.dump(tokens, f)
    bos = llm.token_bos() if add_bos else None
    first = args.ctx // 2
    nll_sum, count = 0.0, 0
    for c in range(n_chunks):
        chunk = list(tokens[c * args.ctx:(c + 1) * args.ctx])
        if bos is not None:
            chunk[0] = bos
        llm.reset()
        llm.eval(chunk)
        logits = np.asarray(llm.scores[:args.ctx], dtype=np.float64)
        for i in range(first, args.ctx - 1):
            row = logits[i]
            m = row.max()
            lse = m + math.log(np.exp(row - m).sum())
            nll_sum += lse - row[chunk[i + 1]]
            count += 1
        print(f"[{c + 1}] {math.exp(nll_sum / count):.4f}", file=sys.stderr)
    nll = nll_sum / count
    print(json.dumps({"ppl": math.exp(nll), "nll_mean": nll, "chunks": n_chunks, "tokens_scored": count,
                      "text_tokens": len(tokens), "add_bos": add_bos}))


if __name__ == "__main__":
    main()
