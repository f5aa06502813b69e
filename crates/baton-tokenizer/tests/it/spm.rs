//! SentencePiece-style (`llama`) encoding and decoding on hand-made vocabularies.

use baton_tokenizer::EncodeOptions;
use baton_tokenizer::{Tokenizer, TokenizerConfig, TokenizerError};

/// `<unk>`, `<s>`, `</s>`, optionally the 256 byte tokens, then `normal`
/// tokens with their scores.
fn spm(normal: &[(&str, f32)], byte_tokens: bool, space_prefix: bool) -> Tokenizer {
    let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    let mut types = vec![2, 3, 3];
    let mut scores = vec![0.0, 0.0, 0.0];
    if byte_tokens {
        for b in 0..=255u8 {
            tokens.push(format!("<0x{b:02X}>"));
            types.push(6);
            scores.push(0.0);
        }
    }
    for (text, score) in normal {
        tokens.push((*text).to_owned());
        types.push(1);
        scores.push(*score);
    }
    Tokenizer::from_config(&TokenizerConfig {
        model: "llama".into(),
        tokens,
        scores: Some(scores),
        token_types: Some(types),
        bos_id: Some(1),
        eos_id: Some(2),
        unk_id: Some(0),
        add_space_prefix: Some(space_prefix),
        ..TokenizerConfig::default()
    })
    .expect("valid config")
}

fn texts(t: &Tokenizer, ids: &[u32]) -> Vec<String> {
    ids.iter().map(|&id| t.token_text(id).expect("id in range").to_owned()).collect()
}

const LETTERS: [(&str, f32); 8] =
    [("a", -5.0), ("b", -5.0), ("c", -5.0), ("▁", -5.0), ("h", -5.0), ("i", -5.0), ("x", -5.0), ("!", -5.0)];

#[test]
fn merges_take_the_best_scoring_pair_first() {
    let mut vocab = LETTERS.to_vec();
    vocab.extend([("ab", -2.0), ("bc", -1.0)]);
    let t = spm(&vocab, true, false);
    assert_eq!(texts(&t, &t.encode("abc", EncodeOptions::default()).unwrap()), ["a", "bc"]);

    let mut vocab = LETTERS.to_vec();
    vocab.extend([("ab", -1.0), ("bc", -2.0), ("abc", -3.0)]);
    let t = spm(&vocab, true, false);
    // ab wins, then ab+c forms abc even though abc scores lower.
    assert_eq!(texts(&t, &t.encode("abc", EncodeOptions::default()).unwrap()), ["abc"]);
}

#[test]
fn equal_scores_merge_leftmost_first() {
    let mut vocab = LETTERS.to_vec();
    vocab.push(("aa", -1.0));
    let t = spm(&vocab, true, false);
    assert_eq!(texts(&t, &t.encode("aaa", EncodeOptions::default()).unwrap()), ["aa", "a"]);
}

#[test]
fn space_prefix_and_bos_are_added_and_stripped_again() {
    let mut vocab = LETTERS.to_vec();
    vocab.extend([("▁h", -1.0), ("▁hi", -0.5), ("▁x", -1.0)]);
    let t = spm(&vocab, true, true);
    let ids = t.encode("hi x!", EncodeOptions { add_special: true, parse_special: false }).unwrap();
    assert_eq!(texts(&t, &ids), ["<s>", "▁hi", "▁x", "!"]);
    assert_eq!(t.decode(&ids).unwrap(), "hi x!");
    assert_eq!(t.decode_with(&ids, true).unwrap(), "<s>hi x!");
    // Without the prefix flag nothing is added.
    let t = spm(&vocab, true, false);
    assert_eq!(texts(&t, &t.encode("hi", EncodeOptions::default()).unwrap()), ["h", "i"]);
}

#[test]
fn unknown_characters_fall_back_to_byte_tokens() {
    let t = spm(&LETTERS, true, false);
    let ids = t.encode("a€", EncodeOptions::default()).unwrap();
    assert_eq!(texts(&t, &ids), ["a", "<0xE2>", "<0x82>", "<0xAC>"]);
    assert_eq!(t.decode(&ids).unwrap(), "a€");
}

#[test]
fn without_byte_tokens_each_unknown_character_is_unk() {
    let t = spm(&LETTERS, false, false);
    assert_eq!(texts(&t, &t.encode("a€🙂b", EncodeOptions::default()).unwrap()), ["a", "<unk>", "<unk>", "b"]);
}

#[test]
fn text_never_merges_into_byte_or_control_tokens() {
    let mut vocab = LETTERS.to_vec();
    vocab.extend([("<", -1.0), ("s", -1.0), (">", -1.0)]);
    let t = spm(&vocab, true, false);
    let ids = t.encode("<s>", EncodeOptions::default()).unwrap();
    assert_eq!(texts(&t, &ids), ["<", "s", ">"]);
    // With special parsing on, the control token is matched verbatim.
    assert_eq!(t.encode("<s>", EncodeOptions { add_special: false, parse_special: true }).unwrap(), [1]);
}

#[test]
fn special_tokens_split_text_and_restart_the_space_prefix() {
    let mut vocab = LETTERS.to_vec();
    vocab.extend([("▁a", -1.0), ("▁b", -1.0)]);
    let t = spm(&vocab, true, true);
    let text = "a</s>b";
    let ids = t.encode(text, EncodeOptions { add_special: false, parse_special: true }).unwrap();
    assert_eq!(texts(&t, &ids), ["▁a", "</s>", "▁b"]);
    assert_eq!(t.decode_with(&ids, true).unwrap(), text);
}

#[test]
fn round_trips_unicode_whitespace_and_newlines() {
    let mut vocab = LETTERS.to_vec();
    vocab.extend([("▁▁", -1.0), ("▁a", -1.0), ("ab", -2.0)]);
    let t = spm(&vocab, true, true);
    for text in ["abc", " a  b\tc\n\nx ", "naïve 中文 🙂 Привет", "", "  ", "\n"] {
        let ids = t.encode(text, EncodeOptions::default()).unwrap();
        assert_eq!(t.decode(&ids).unwrap(), text, "ids {ids:?}");
    }
}

#[test]
fn add_bos_defaults_on_for_llama_and_needs_a_bos_id() {
    let config = TokenizerConfig { model: "llama".into(), tokens: vec!["a".into()], ..TokenizerConfig::default() };
    let err = Tokenizer::from_config(&config).unwrap_err();
    assert!(matches!(err, TokenizerError::MissingSpecialToken { .. }), "{err}");
}
