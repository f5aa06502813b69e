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
from pathlib import Path

from gguf import GGUFReader
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

BUILTIN_CORPUS = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    " leading space, and trailing spaces   ",
    "I'm sure you're right; we'll see what they've done. It's John's car, isn't it? I'D SAY I'VE SEEN IT'S",
    "Numbers: 0 7 42 123 1234 12345 3.14159 1,000,000 2024-01-15 +49 (0)30 123456789012345678901234567890",
    "Whitespace runs:  two   three    four     five\ttab\t\ttabs \t mixed",
    "Line one\nLine two\n\nafter blank\r\nwindows line\n\n\n   indented\n\t\ttabbed",
    "Punctuation!!! ... ??? --- (parens) [brackets] {braces} <angle> \"quotes\" 'single' `code` @#$%^&*_+=|\\/~",
    "Accents: café naïve résumé Zürich façade Ångström coöperate",
    "Cyrillic: Привет, как дела? Съешь же ещё этих мягких французских булок.",
    "CJK: 你好，世界！日本語のテキストです。한국어 텍스트입니다.",
    "Emoji: 🙂 😀👍🏽 👨‍👩‍👧‍👦 🇩🇪 ❤️ ✨",
    "Mixed scripts: abcабв123٣٤٥①②³ ½ Ⅻ x²+y²",
    "Combining marks: e\u0301 a\u0308 \u0345 n\u0303",
    "Unicode spaces:\u00a0nbsp\u2003em\u3000ideographic\u200bzero-width",
    "Greek: Καλημέρα κόσμε. Arabic: مرحبا بالعالم. Hebrew: שלום עולם. Thai: สวัสดีครับ. Hindi: नमस्ते दुनिया",
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "Special tokens glued:<|endoftext|>next<|im_end|><|im_start|> spaced <|endoftext|> end",
    "Almost special: <|im_start <|im_end| |im_start|> <|endoftext",
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n\nprint([fib(i) for i in range(10)])  # 0 1 1 2 3 5 8",
    "    four leading spaces, then\n    code-like\tcontent\n",
    "a",
    " ",
    "\n",
    "   ",
    "'s 's 'S 'll 'LL 're 'Re x's x'ſ",
    "URLs: https://example.com/path?query=1&b=2#frag and emails like someone@example.org",
    "The year 1999 ended; 2000 began. Prices: $9.99, €12,50, £7 and ¥1000.",
    "Long word: Pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism supercalifragilisticexpialidocious",
    "Repeated: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa !!!!!!!!!!!!!!!!!!!! ............ ------------------",
    "Tabs\tbetween\twords\tand\t\t\tmany\t \t \tmixed",
    "End with newline\n",
    "Control chars: \x01\x02\x07 bell and \x7f delete",
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the sunshine. "
    "One day, she saw a big, red ball in the park. \"Can I play with it?\" she asked her mom. "
    "Her mom smiled and said, \"Yes, but be careful!\"\n\nLily ran to the ball and kicked it very high.",
    "Case changes: camelCase PascalCase HTMLParser iPhone eBay McDONALD XMLHttpRequest getURLForID ǅemal ʰa",
    "Contractions in any case: I'm don't WE'LL It'S you'Re THEY'VE she'D rock'n'roll 'Tis it'ſ",
    "Digits: 1 12 123 1234 12345 123456 1234567 x12 $5 ٣٤٥٦ ①②③④ 3.14159",
    "Marks: cafe\u0301 E\u0301COLE na\u0308ive \u0928\u092e\u0938\u094d\u0924\u0947 !\u0301a \u0301 \u20dd",
    "Line breaks:\r\n\r\nwindows  \r\n  runs\n\n\n  x  \r\n/path//to\n/next ;\r\n/\r\ny",
    "Trailing spaces   ",
    "Trailing tabs and spaces \t \t",
]

SUPPORTED_PRE = ["smollm", "gpt-2", "llama-bpe", "qwen2", "qwen35", "gpt-4o"]


def field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


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


def real_texts():
    """The repository's Markdown files, each one text, in a fixed order."""
    root = Path(__file__).resolve().parents[2]
    paths = [root / "README.md", *sorted((root / "docs").glob("*.md")), root / "tests" / "reference" / "README.md"]
    return [p.read_text(encoding="utf-8") for p in paths if p.is_file()]


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
    config = {
        "model": model,
        "pre": field(reader, "tokenizer.ggml.pre", "default"),
        "tokens": list(field(reader, "tokenizer.ggml.tokens")),
        "merges": list(field(reader, "tokenizer.ggml.merges")),
        "token_types": [int(t) for t in field(reader, "tokenizer.ggml.token_type")],
        "bos_id": field(reader, "tokenizer.ggml.bos_token_id"),
        "eos_id": field(reader, "tokenizer.ggml.eos_token_id"),
        "unk_id": field(reader, "tokenizer.ggml.unknown_token_id"),
        "pad_id": field(reader, "tokenizer.ggml.padding_token_id"),
        "add_bos": field(reader, "tokenizer.ggml.add_bos_token"),
        "add_eos": field(reader, "tokenizer.ggml.add_eos_token"),
    }
    for key in ("bos_id", "eos_id", "unk_id", "pad_id"):
        if config[key] is not None:
            config[key] = int(config[key])
    for key in ("add_bos", "add_eos"):
        if config[key] is not None:
            config[key] = bool(config[key])

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
