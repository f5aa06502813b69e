//! Byte-level BPE (`gpt2`) on hand-made vocabularies and the synthetic one.

use baton_tokenizer::EncodeOptions;
use baton_tokenizer::{synthetic_bpe, TokenType, Tokenizer, TokenizerConfig, SUPPORTED_PRE};

/// GPT-2's printable character for a byte (same rule as the crate's map).
fn byte_char(b: u8) -> char {
    let keeps = matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    if keeps {
        char::from(b)
    } else {
        let shifted = (0..b).filter(|&x| !matches!(x, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF)).count();
        char::from_u32(0x100 + shifted as u32).expect("valid")
    }
}

/// `<|endoftext|>` (control), the 256 byte tokens, then one token per merge.
fn bpe(merges: &[&str], pre: &str) -> Tokenizer {
    let mut tokens = vec!["<|endoftext|>".to_owned()];
    let mut types = vec![3];
    for b in 0..=255u8 {
        tokens.push(byte_char(b).to_string());
        types.push(1);
    }
    for merge in merges {
        let merged = merge.replacen(' ', "", 1);
        if !tokens.contains(&merged) {
            tokens.push(merged);
            types.push(1);
        }
    }
    Tokenizer::from_config(&TokenizerConfig {
        model: "gpt2".into(),
        pre: Some(pre.into()),
        tokens,
        token_types: Some(types),
        merges: Some(merges.iter().map(|m| (*m).to_owned()).collect()),
        bos_id: Some(0),
        eos_id: Some(0),
        ..TokenizerConfig::default()
    })
    .expect("valid config")
}

fn texts(t: &Tokenizer, ids: &[u32]) -> Vec<String> {
    ids.iter().map(|&id| t.token_text(id).expect("id in range").to_owned()).collect()
}

const MERGES: [&str; 7] = ["h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or"];

#[test]
fn merges_apply_by_rank_within_words() {
    let t = bpe(&MERGES, "gpt-2");
    assert_eq!(texts(&t, &t.encode("hello world", EncodeOptions::default()).unwrap()), ["hello", "Ġwor", "l", "d"]);
    let t = bpe(&["a b", "b c"], "gpt-2");
    assert_eq!(texts(&t, &t.encode("abc", EncodeOptions::default()).unwrap()), ["ab", "c"]);
    let t = bpe(&["b c", "a b"], "gpt-2");
    assert_eq!(texts(&t, &t.encode("abc", EncodeOptions::default()).unwrap()), ["a", "bc"]);
}

#[test]
fn repeated_pairs_merge_leftmost_first() {
    let t = bpe(&["a a"], "gpt-2");
    assert_eq!(texts(&t, &t.encode("aaaaa", EncodeOptions::default()).unwrap()), ["aa", "aa", "a"]);
}

#[test]
fn merges_never_cross_pre_tokenizer_words() {
    let t = bpe(&["o Ġ", "oĠ w"], "gpt-2");
    assert_eq!(texts(&t, &t.encode("o w", EncodeOptions::default()).unwrap()), ["o", "Ġ", "w"]);
}

#[test]
fn control_tokens_are_parsed_only_on_request() {
    let t = bpe(&MERGES, "gpt-2");
    let ids = t.encode("hello<|endoftext|>", EncodeOptions { add_special: false, parse_special: true }).unwrap();
    assert_eq!(texts(&t, &ids), ["hello", "<|endoftext|>"]);
    assert_eq!(t.decode(&ids).unwrap(), "hello");
    assert_eq!(t.decode_with(&ids, true).unwrap(), "hello<|endoftext|>");
    let ids = t.encode("<|endoftext|>", EncodeOptions::default()).unwrap();
    assert!(ids.len() > 1 && !ids.contains(&0), "{ids:?}");
    assert_eq!(t.decode(&ids).unwrap(), "<|endoftext|>");
}

#[test]
fn gpt2_does_not_add_bos_unless_the_metadata_says_so() {
    let t = bpe(&MERGES, "gpt-2");
    assert_eq!(t.encode("hello", EncodeOptions { add_special: true, parse_special: false }).unwrap().len(), 1);
    assert!(!t.adds_bos());
}

#[test]
fn unicode_becomes_byte_tokens_and_decodes_back() {
    let t = bpe(&MERGES, "smollm");
    for text in ["中", "🙂", "é", "Привет"] {
        let ids = t.encode(text, EncodeOptions::default()).unwrap();
        assert_eq!(ids.len(), text.len(), "one token per byte for {text:?}");
        assert_eq!(t.decode(&ids).unwrap(), text);
    }
}

#[test]
fn whitespace_runs_keep_the_last_space_for_the_next_word() {
    let t = bpe(&["Ġ Ġ", "ĠĠ Ġ"], "gpt-2");
    assert_eq!(texts(&t, &t.encode("a    b", EncodeOptions::default()).unwrap()), ["a", "ĠĠĠ", "Ġ", "b"]);
    assert_eq!(texts(&t, &t.encode("a   ", EncodeOptions::default()).unwrap()), ["a", "ĠĠĠ"]);
}

#[test]
fn digits_split_by_pre_tokenizer() {
    let merges = ["1 2", "12 3", "Ġ 1"];
    let t = bpe(&merges, "gpt-2");
    assert_eq!(texts(&t, &t.encode(" 123", EncodeOptions::default()).unwrap()), ["Ġ", "123"]);
    let t = bpe(&merges, "smollm");
    assert_eq!(texts(&t, &t.encode(" 123", EncodeOptions::default()).unwrap()), ["Ġ", "1", "2", "3"]);
    let t = bpe(&merges, "llama-bpe");
    assert_eq!(texts(&t, &t.encode("1231", EncodeOptions::default()).unwrap()), ["123", "1"]);
    let t = bpe(&merges, "qwen2");
    assert_eq!(texts(&t, &t.encode("1231", EncodeOptions::default()).unwrap()), ["1", "2", "3", "1"]);
    let t = bpe(&merges, "qwen35");
    assert_eq!(texts(&t, &t.encode("1231", EncodeOptions::default()).unwrap()), ["1", "2", "3", "1"]);
    let t = bpe(&merges, "gpt-4o");
    assert_eq!(texts(&t, &t.encode("1231", EncodeOptions::default()).unwrap()), ["123", "1"]);
}

/// Texts every synthetic vocabulary must round-trip (also `spm_bpe.rs`).
pub(crate) const CORPUS: &[&str] = &[
    "Hello, world! It's 2024 and we're testing 1234567890.",
    "  leading and trailing  ",
    "tabs\tand\t\tnewlines\n\n\r\nmixed \t \n end",
    "naïve café, Zürich; Привет мир; 你好世界; 🙂👍🏽👨‍👩‍👧",
    "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    "e\u{301} \u{a0}\u{3000}x ١٢٣ ①",
    "camelCase HTMLParser I'M it's \r\n\r\n  a//b\n/c   ",
    "",
];

#[test]
fn synthetic_vocab_round_trips_the_corpus_under_every_pre_tokenizer() {
    for vocab_size in [512, 32000] {
        for pre in SUPPORTED_PRE.split(", ") {
            let mut config = synthetic_bpe(vocab_size);
            config.pre = Some(pre.into());
            let t = Tokenizer::from_config(&config).unwrap();
            for text in CORPUS {
                let ids = t.encode(text, EncodeOptions { add_special: false, parse_special: true }).unwrap();
                assert_eq!(t.decode_with(&ids, true).unwrap(), *text, "{pre} {vocab_size}");
            }
        }
    }
}

#[test]
fn synthetic_vocab_has_the_requested_size_specials_and_fillers() {
    let config = synthetic_bpe(32000);
    assert_eq!(config.tokens.len(), 32000);
    let t = Tokenizer::from_config(&config).unwrap();
    assert_eq!(t.vocab_size(), 32000);
    assert_eq!(t.token_type(31999).unwrap(), TokenType::Unused);
    for (id, name) in ["<|endoftext|>", "<|im_start|>", "<|im_end|>"].iter().enumerate() {
        assert_eq!(t.token_id(name), Some(id as u32));
        assert_eq!(t.token_type(id as u32).unwrap(), TokenType::Control);
    }
    assert_eq!((t.bos_id(), t.eos_id()), (Some(0), Some(0)));
    // Learned merges shorten English text well below one token per byte.
    let small = Tokenizer::from_config(&synthetic_bpe(512)).unwrap();
    assert_eq!(small.vocab_size(), 512);
    let text = "The robot and the gardener walked along the fence.";
    let ids = small.encode(text, EncodeOptions::default()).unwrap();
    assert!(ids.len() * 2 < text.len(), "{} tokens for {} bytes", ids.len(), text.len());
    // Tiny sizes are raised to the 3 specials + 256 bytes.
    assert_eq!(synthetic_bpe(10).tokens.len(), 259);
    assert_eq!(synthetic_bpe(512), synthetic_bpe(512), "deterministic");
}
