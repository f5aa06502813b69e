//! Streaming decode never emits half a character.

use baton_tokenizer::EncodeOptions;
use baton_tokenizer::{synthetic_bpe, Tokenizer, TokenizerConfig};

fn collect(t: &Tokenizer, ids: &[u32]) -> (Vec<Option<String>>, String) {
    let mut stream = t.stream_decoder(false);
    let parts: Vec<Option<String>> = ids.iter().map(|&id| stream.push(id).unwrap()).collect();
    let mut text: String = parts.iter().flatten().cloned().collect();
    text.extend(stream.finish());
    (parts, text)
}

#[test]
fn multi_byte_characters_split_across_byte_level_tokens_wait_until_whole() {
    let t = Tokenizer::from_config(&synthetic_bpe(512)).unwrap();
    for text in ["🙂", "中文字", "a👨‍👩‍👧b", "Привет 🙂 世界"] {
        let ids = t.encode(text, EncodeOptions::default()).unwrap();
        let (parts, joined) = collect(&t, &ids);
        assert_eq!(joined, text);
        for part in parts.iter().flatten() {
            assert!(!part.contains('\u{FFFD}'), "half a character emitted: {part:?}");
        }
    }
    // The emoji is four byte tokens: nothing comes out until the fourth.
    let ids = t.encode("🙂", EncodeOptions::default()).unwrap();
    assert_eq!(ids.len(), 4);
    let (parts, _) = collect(&t, &ids);
    assert_eq!(parts, [None, None, None, Some("🙂".to_owned())]);
}

#[test]
fn spm_byte_tokens_are_reassembled_and_the_first_space_is_dropped() {
    let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into()];
    let mut types = vec![2, 3];
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(6);
    }
    tokens.extend(["▁a", "▁"].map(String::from));
    types.extend([1, 1]);
    let t = Tokenizer::from_config(&TokenizerConfig {
        model: "llama".into(),
        tokens,
        token_types: Some(types),
        bos_id: Some(1),
        ..TokenizerConfig::default()
    })
    .unwrap();
    let ids = t.encode("a 中", EncodeOptions { add_special: true, parse_special: false }).unwrap();
    assert_eq!(ids.len(), 1 + 1 + 1 + 3, "bos, ▁a, ▁, three byte tokens");
    let (parts, text) = collect(&t, &ids);
    assert_eq!(text, "a 中");
    assert_eq!(parts, [None, Some("a".into()), Some(" ".into()), None, None, Some("中".into())]);
}

#[test]
fn unfinished_characters_are_flushed_as_replacement_on_finish() {
    let t = Tokenizer::from_config(&synthetic_bpe(512)).unwrap();
    let ids = t.encode("🙂", EncodeOptions::default()).unwrap();
    let mut stream = t.stream_decoder(false);
    assert_eq!(stream.push(ids[0]).unwrap(), None);
    assert!(stream.has_pending());
    assert_eq!(stream.finish().as_deref(), Some("\u{FFFD}"));
    assert!(!stream.has_pending());
    // A broken sequence followed by text: the text is not held back.
    assert_eq!(stream.push(ids[0]).unwrap(), None);
    let a = t.encode("a", EncodeOptions::default()).unwrap()[0];
    assert_eq!(stream.push(a).unwrap().as_deref(), Some("\u{FFFD}a"));
}

#[test]
fn out_of_range_ids_are_errors_not_panics() {
    let t = Tokenizer::from_config(&synthetic_bpe(512)).unwrap();
    assert!(t.decode(&[512]).is_err());
    assert!(t.stream_decoder(false).push(u32::MAX).is_err());
    assert!(t.token_text(9999).is_err());
}
