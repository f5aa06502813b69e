//! SentencePiece-style BPE (`gemma4`) on hand-made and synthetic vocabularies.

use baton_tokenizer::{
    synthetic_gemma4, EncodeOptions, TokenType, Tokenizer, TokenizerConfig, TokenizerError, SYNTHETIC_GEMMA4_MARKERS,
    SYNTHETIC_GEMMA4_TOOL_MARKERS,
};

use crate::bpe::CORPUS;

const PLAIN: EncodeOptions = EncodeOptions { add_special: false, parse_special: false };
const SPECIAL: EncodeOptions = EncodeOptions { add_special: false, parse_special: true };

/// `<pad>`, `<eos>`, `<bos>`, `<turn|>`, the 256 byte tokens, then `normal`
/// tokens and the merges over them.
fn config(normal: &[&str], merges: &[&str]) -> TokenizerConfig {
    let mut tokens: Vec<String> = ["<pad>", "<eos>", "<bos>", "<turn|>"].map(String::from).to_vec();
    let mut types = vec![3; 4];
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(6);
    }
    for text in normal {
        tokens.push((*text).to_owned());
        types.push(1);
    }
    TokenizerConfig {
        model: "gemma4".into(),
        tokens,
        token_types: Some(types),
        merges: Some(merges.iter().map(|m| (*m).to_owned()).collect()),
        bos_id: Some(2),
        eos_id: Some(1),
        add_bos: Some(true),
        ..TokenizerConfig::default()
    }
}

fn build(normal: &[&str], merges: &[&str]) -> Tokenizer {
    Tokenizer::from_config(&config(normal, merges)).expect("valid config")
}

fn texts(t: &Tokenizer, ids: &[u32]) -> Vec<String> {
    ids.iter().map(|&id| t.token_text(id).expect("id in range").to_owned()).collect()
}

const CHARS: [&str; 8] = ["a", "b", "c", "▁", "h", "i", "\n", "\n\n"];

#[test]
fn merges_apply_by_rank_over_whole_characters_leftmost_on_ties() {
    let mut normal = CHARS.to_vec();
    normal.extend(["bc", "ab", "abc", "▁a"]);
    // "b c" ranks first, so "abc" is a + bc, which no rule joins.
    let t = build(&normal, &["b c", "a b", "ab c", "▁ a"]);
    assert_eq!(texts(&t, &t.encode("abc", PLAIN).unwrap()), ["a", "bc"]);
    let t = build(&normal, &["a b", "b c", "ab c"]);
    assert_eq!(texts(&t, &t.encode("abc", PLAIN).unwrap()), ["abc"]);
    // Equal pairs: the leftmost merges first.
    normal.push("aa");
    let t = build(&normal, &["a a"]);
    assert_eq!(texts(&t, &t.encode("aaa", PLAIN).unwrap()), ["aa", "a"]);
    let t = build(&normal, &["▁ a"]);
    assert_eq!(texts(&t, &t.encode("a a", PLAIN).unwrap()), ["a", "▁a"], "spaces are ▁, no space prefix");
}

#[test]
fn newline_runs_are_words_of_their_own_and_whole_tokens_where_they_are_one() {
    let t = build(&CHARS, &[]);
    let ids = t.encode("a\n\nb\n\n\nc", PLAIN).unwrap();
    assert_eq!(texts(&t, &ids), ["a", "\n\n", "b", "\n", "\n", "\n", "c"]);
    assert_eq!(t.decode(&ids).unwrap(), "a\n\nb\n\n\nc");
}

#[test]
fn characters_outside_the_vocabulary_fall_back_to_byte_tokens_and_decode_back() {
    let t = build(&CHARS, &[]);
    let ids = t.encode("a🙂é", PLAIN).unwrap();
    assert_eq!(texts(&t, &ids), ["a", "<0xF0>", "<0x9F>", "<0x99>", "<0x82>", "<0xC3>", "<0xA9>"],);
    assert_eq!(t.decode(&ids).unwrap(), "a🙂é");
    assert_eq!(t.token_type(ids[1]).unwrap(), TokenType::Byte);
}

#[test]
fn bos_is_always_added_and_specials_split_the_text() {
    let mut c = config(&CHARS, &[]);
    c.add_bos = Some(false);
    let t = Tokenizer::from_config(&c).unwrap();
    assert!(t.adds_bos(), "llama.cpp forces BOS for gemma4");
    let ids = t.encode("hi<turn|> a", EncodeOptions { add_special: true, parse_special: true }).unwrap();
    assert_eq!(texts(&t, &ids), ["<bos>", "h", "i", "<turn|>", "▁", "a"]);
    assert_eq!(t.decode(&ids).unwrap(), "hi a", "control tokens render as nothing, no space is stripped");
    assert_eq!(t.decode_with(&ids, true).unwrap(), "<bos>hi<turn|> a");
    let ids = t.encode("hi<turn|>", PLAIN).unwrap();
    assert_eq!(ids.len(), 2 + "<turn|>".len(), "control text stays text without parse_special");
}

#[test]
fn bad_vocabularies_are_typed_errors() {
    let mut c = config(&CHARS, &[]);
    c.tokens[4 + 0x41] = "A".into();
    let e = Tokenizer::from_config(&c).unwrap_err();
    assert!(matches!(e, TokenizerError::MissingByteTokens { missing: 1, first: 0x41, .. }), "{e}");
    assert!(e.to_string().contains("<0x41>"), "{e}");

    let e = Tokenizer::from_config(&config(&CHARS, &["a z"])).unwrap_err();
    assert!(matches!(&e, TokenizerError::MergeTokenMissing { token, .. } if token == "z"), "{e}");
    let e = Tokenizer::from_config(&config(&CHARS, &["a b"])).unwrap_err();
    assert!(matches!(&e, TokenizerError::MergeTokenMissing { token, .. } if token == "ab"), "{e}");
    let e = Tokenizer::from_config(&config(&CHARS, &["ab"])).unwrap_err();
    assert!(matches!(e, TokenizerError::MalformedMerge { index: 0, .. }), "{e}");

    let mut c = config(&CHARS, &[]);
    c.merges = None;
    assert!(matches!(Tokenizer::from_config(&c).unwrap_err(), TokenizerError::MissingMerges { .. }));
    let mut c = config(&CHARS, &[]);
    c.bos_id = None;
    assert!(matches!(Tokenizer::from_config(&c).unwrap_err(), TokenizerError::MissingSpecialToken { .. }));
}

#[test]
fn synthetic_gemma4_vocab_round_trips_the_corpus_and_compresses_english() {
    for vocab_size in [512, 4096] {
        let config = synthetic_gemma4(vocab_size);
        assert_eq!(config.tokens.len(), vocab_size);
        let t = Tokenizer::from_config(&config).unwrap();
        for text in CORPUS {
            let ids = t.encode(text, SPECIAL).unwrap();
            assert_eq!(t.decode_with(&ids, true).unwrap(), *text, "{vocab_size}");
            let mut stream = t.stream_decoder(true);
            let mut streamed = String::new();
            for &id in &ids {
                streamed.extend(stream.push(id).unwrap());
            }
            streamed.extend(stream.finish());
            assert_eq!(streamed, *text, "streamed, {vocab_size}");
        }
    }
    let t = Tokenizer::from_config(&synthetic_gemma4(512)).unwrap();
    let text = "The robot and the gardener walked along the fence.";
    let ids = t.encode(text, PLAIN).unwrap();
    assert!(ids.len() * 2 < text.len(), "{} tokens for {} bytes", ids.len(), text.len());
    assert_eq!((t.bos_id(), t.eos_id(), t.unk_id()), (Some(2), Some(1), Some(3)));
    for marker in SYNTHETIC_GEMMA4_MARKERS {
        let id = t.token_id(marker).expect("marker in the vocabulary");
        let kind = if marker.contains("channel") { TokenType::UserDefined } else { TokenType::Control };
        assert_eq!(t.token_type(id).unwrap(), kind, "{marker}");
        assert_eq!(t.encode(marker, SPECIAL).unwrap(), [id]);
    }
    for marker in SYNTHETIC_GEMMA4_TOOL_MARKERS {
        let id = t.token_id(marker).expect("tool marker in the vocabulary");
        match marker {
            "<|tool_response>" => {
                // The file types it user-defined, as Gemma 4's files do;
                // loaded, it is a control token, as llama.cpp loads it.
                let file_type = synthetic_gemma4(512).token_types.expect("types")[id as usize];
                assert_eq!(file_type, 4, "user-defined in the file");
                assert_eq!(t.token_type(id).unwrap(), TokenType::Control, "{marker}");
                assert_eq!(t.encode(marker, SPECIAL).unwrap(), [id]);
                assert_ne!(t.encode(marker, PLAIN).unwrap(), [id], "a control token is not read from plain text");
                assert_eq!(t.decode_with(&[id], false).unwrap(), "", "nor rendered unless asked");
                assert_eq!(t.decode_with(&[id], true).unwrap(), marker);
            }
            _ => {
                assert_eq!(t.token_type(id).unwrap(), TokenType::UserDefined, "{marker}");
                assert_eq!(t.encode(marker, PLAIN).unwrap(), [id], "{marker}: one token, even in plain text");
            }
        }
    }
    assert_eq!(t.encode("\n\n\n\n", PLAIN).unwrap().len(), 1, "newline runs are tokens");
    assert_eq!(synthetic_gemma4(512), synthetic_gemma4(512), "deterministic");
}
