"""What the tokenizer references share: the corpus (built-in texts and the
repository's Markdown files) and a GGUF file's tokenizer metadata as the
JSON `config` that crates/baton-tokenizer/tests/it reads.

Used by tokenizer_ref.py (HF `tokenizers`) and tokenizer_llama_ref.py
(llama-cpp-python); needs only the `gguf` package.
"""

from pathlib import Path

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


def field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


def real_texts():
    """The repository's Markdown files, each one text, in a fixed order."""
    root = Path(__file__).resolve().parents[2]
    paths = [root / "README.md", *sorted((root / "docs").glob("*.md")), root / "tests" / "reference" / "README.md"]
    return [p.read_text(encoding="utf-8") for p in paths if p.is_file()]


def tokenizer_config(reader):
    """The tokenizer.ggml.* keys the Rust tests build a tokenizer from."""
    config = {
        "model": field(reader, "tokenizer.ggml.model"),
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
    return config
