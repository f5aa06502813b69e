#!/usr/bin/env python3
"""Independent reference for baton-tokenizer, built on HF `tokenizers`.

Reads a GGUF file's tokenizer metadata with the `gguf` package, builds an HF
`tokenizers` Tokenizer from the vocabulary and merges with the pre-tokenizer
that `tokenizer.ggml.pre` names, encodes a corpus, and writes JSON that
crates/baton-tokenizer/tests/it/reference.rs checks against:

    {"config": {model, pre, tokens, merges, token_types, bos_id, eos_id,
                unk_id, pad_id, add_bos, add_eos},
     "variants": [{"pre": "smollm",
                   "cases": [{"text": ..., "ids": [...], "words": [...]}]},
                  ...]}

The first variant uses the file's own `pre`; the others re-use the same
vocabulary under the other supported byte-level pre-tokenizers (a synthetic
vocabulary of each type), so every splitter is checked against HF's regex
engine (Oniguruma): `ids` from `encode` (special tokens matched first),
`words` from the pre-tokenizer alone (`pre_tokenize_str` on the whole text,
each word as the slice of the text its offsets give).

The corpus: the built-in texts below, all of them joined, a long number, and
real text: the repository's Markdown files (README.md, docs/*.md,
tests/reference/README.md), each file one text.

Usage (python: the one `bash scripts/setup-python.sh` prints):
    target/ref-venv/bin/python tests/reference/tokenizer_ref.py \
        MODEL.gguf OUT.json [--corpus FILE]
FILE holds cases separated by lines of exactly "----"; without it a
built-in corpus is used. Then:
    BATON_TOKENIZER_REF=OUT.json cargo test -p baton-tokenizer \
        --features reference-tests --test it reference
"""

import argparse
import json
import sys

from gguf import GGUFReader
from tokenizer_common import BUILTIN_CORPUS, field, real_texts, tokenizer_config
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
    r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_PATTERN = LLAMA3_PATTERN.replace(r"\p{N}{1,3}", r"\p{N}")
# Qwen 3.5 / 3.6: marks count as letters (llama.cpp's LLAMA_VOCAB_PRE_TYPE_QWEN35).
QWEN35_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}|"
    r" ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# o200k (tiktoken's o200k_base, gpt-oss; llama.cpp's LLAMA_VOCAB_PRE_TYPE_GPT4O).
GPT4O_PATTERN = "|".join([
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    r"\p{N}{1,3}",
    r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
    r"\s*[\r\n]+",
    r"\s+(?!\S)",
    r"\s+",
])
SPLIT_PATTERNS = {
    "llama-bpe": LLAMA3_PATTERN,
    "qwen2": QWEN2_PATTERN,
    "qwen35": QWEN35_PATTERN,
    "gpt-4o": GPT4O_PATTERN,
}

SUPPORTED_PRE = ["smollm", "gpt-2", "llama-bpe", "qwen2", "qwen35", "gpt-4o"]


def split_merge(merge):
    # Split at the first space after the first character.
    k = merge.index(" ", 1)
    return merge[:k], merge[k + 1:]


def build(config, pre):
    vocab = {tok: i for i, tok in enumerate(config["tokens"])}
    merges = [split_merge(m) for m in config["merges"]]
    # llama.cpp ignores merges for the Llama 3 type only.
    model = models.BPE(vocab=vocab, merges=merges, ignore_merges=(pre == "llama-bpe"))
    tok = Tokenizer(model)
    if pre == "smollm":
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ])
    elif pre in ("gpt-2", "default"):
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    elif pre in SPLIT_PATTERNS:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(SPLIT_PATTERNS[pre]), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
    else:
        sys.exit(f"unsupported tokenizer.ggml.pre {pre!r}; supported: {', '.join(SUPPORTED_PRE)}")
    tok.decoder = decoders.ByteLevel()
    types = config["token_types"]
    specials = [AddedToken(t, special=True, normalized=False)
                for t, ty in zip(config["tokens"], types) if ty == 3]
    user = [AddedToken(t, special=False, normalized=False)
            for t, ty in zip(config["tokens"], types) if ty == 4]
    tok.add_special_tokens(specials)
    if user:
        tok.add_tokens(user)
    return tok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gguf")
    ap.add_argument("out")
    ap.add_argument("--corpus", help="cases separated by lines of exactly ----")
    args = ap.parse_args()

    reader = GGUFReader(args.gguf)
    model = field(reader, "tokenizer.ggml.model")
    if model != "gpt2":
        sys.exit(f"only gpt2 (byte-level BPE) GGUF tokenizers are checked here, not {model!r}")
    config = tokenizer_config(reader)

    if args.corpus:
        with open(args.corpus, encoding="utf-8") as f:
            corpus = f.read().split("\n----\n")
    else:
        corpus = BUILTIN_CORPUS
    # Also the whole corpus as one text, a long number, and real text.
    corpus = corpus + ["\n\n".join(corpus), "9" * 200] + real_texts()

    pres = [config["pre"]] + [p for p in SUPPORTED_PRE if p != config["pre"]]
    variants = []
    for pre in pres:
        tok = build(config, pre)
        cases = []
        for text in corpus:
            ids = tok.encode(text, add_special_tokens=False).ids
            words = [text[a:b] for _, (a, b) in tok.pre_tokenizer.pre_tokenize_str(text)]
            if "".join(words) != text:
                sys.exit(f"{pre}: the pre-tokenizer's offsets do not cover {text[:60]!r}")
            cases.append({"text": text, "ids": ids, "words": words})
        variants.append({"pre": pre, "cases": cases})

    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"config": config, "variants": variants}, f, ensure_ascii=False)
    n = sum(len(v["cases"]) for v in variants)
    print(f"wrote {n} cases ({len(corpus)} texts x {len(variants)} pre-tokenizers) to {args.out}")


if __name__ == "__main__":
    main()
