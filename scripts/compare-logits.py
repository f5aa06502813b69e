#!/usr/bin/env python3
"""Baton's logits against the reference engine's (llama.cpp through its
PyPI bindings, llama-cpp-python, as scripts/compare-reference.sh builds it)
on the same GGUF file and token ids: per position the top-1 agreement and
the KL divergence KL(reference || Baton) of the next-token distributions,
and the greedy continuations of both.

Not part of CI (the reference engine compiles itself for minutes); run by
scripts/compare-logits.sh, which builds what it needs:
  scripts/compare-logits.sh MODEL.gguf [-n POSITIONS] [-g GREEDY] [--json]

Both engines get the same ids (a deterministic pseudo-random sequence over
the vocabulary, first id the file's BOS when it has one). The reference
runs with every position's logits (logits_all), a 512-token batch, an f32
KV cache on the CPU; Baton with the `logits` example of baton-model, also
with an f32 cache.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np


def token_ids(n_vocab, n, seed=7):
    state = seed
    ids = []
    for _ in range(n):
        state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        ids.append((state >> 33) % n_vocab)
    return ids


def reference(model, ids, greedy):
    from llama_cpp import Llama, GGML_TYPE_F32

    llm = Llama(model_path=model, n_ctx=len(ids) + greedy + 8, n_batch=512, n_ubatch=512, logits_all=True,
                type_k=GGML_TYPE_F32, type_v=GGML_TYPE_F32, n_threads=os.cpu_count(), verbose=False)
    llm.eval(ids)
    logits = np.array(llm.scores[: len(ids)], dtype=np.float64)
    picks = []
    for _ in range(greedy):
        nxt = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        picks.append(nxt)
        llm.eval([nxt])
    return logits, picks


def baton(binary, model, ids, greedy, n_vocab):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "logits.f32")
        run = subprocess.run([binary, model, ",".join(map(str, ids)), out, str(greedy)],
                             check=True, capture_output=True, text=True)
        logits = np.fromfile(out, dtype="<f4").astype(np.float64).reshape(len(ids), n_vocab)
    line = run.stdout.strip()
    return logits, [int(x) for x in line.split(",")] if line else []


def log_softmax(x):
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("--baton", required=True, help="the logits example binary")
    p.add_argument("-n", type=int, default=256, help="positions")
    p.add_argument("-g", type=int, default=32, help="greedy tokens")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    import gguf

    reader = gguf.GGUFReader(a.model)
    n_vocab = len(reader.fields["tokenizer.ggml.tokens"].contents())
    bos = reader.fields.get("tokenizer.ggml.bos_token_id")
    ids = token_ids(n_vocab, a.n)
    if bos is not None:
        ids[0] = int(bos.contents())
    ref, ref_greedy = reference(a.model, ids, a.g)
    ours, our_greedy = baton(a.baton, a.model, ids, a.g, n_vocab)
    lp, lq = log_softmax(ref), log_softmax(ours)
    kl = (np.exp(lp) * (lp - lq)).sum(axis=-1)
    top1 = (ref.argmax(axis=-1) == ours.argmax(axis=-1))
    same_greedy = next((i for i, (x, y) in enumerate(zip(ref_greedy, our_greedy)) if x != y), len(ref_greedy))
    result = {
        "model": os.path.basename(a.model),
        "positions": a.n,
        "top1_agree": int(top1.sum()),
        "kl_mean": float(kl.mean()),
        "kl_max": float(kl.max()),
        "kl_p99": float(np.quantile(kl, 0.99)),
        "greedy_tokens": a.g,
        "greedy_same_prefix": same_greedy,
        "nmse": float(((ours - ref) ** 2).sum() / (ref ** 2).sum()),
    }
    if a.json:
        print(json.dumps(result))
    else:
        print(f"{result['model']}: top-1 agrees at {result['top1_agree']}/{a.n} positions; "
              f"KL(ref||baton) mean {result['kl_mean']:.3e}, p99 {result['kl_p99']:.3e}, max {result['kl_max']:.3e}; "
              f"logits NMSE {result['nmse']:.3e}; greedy: the first {same_greedy} of {a.g} tokens the same")
    return 0


if __name__ == "__main__":
    sys.exit(main())
