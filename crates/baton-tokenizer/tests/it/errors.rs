//! Bad metadata is a clear error, never a panic.

use baton_tokenizer::EncodeOptions;
use baton_tokenizer::{synthetic_bpe, Tokenizer, TokenizerConfig, TokenizerError};

fn err(config: &TokenizerConfig) -> TokenizerError {
    Tokenizer::from_config(config).expect_err("config must be rejected")
}

#[test]
fn unknown_model_and_pre_list_the_supported_values() {
    let mut c = synthetic_bpe(300);
    c.model = "bert".into();
    let e = err(&c);
    assert!(matches!(e, TokenizerError::UnknownModel { .. }) && e.to_string().contains("gpt2"), "{e}");
    let mut c = synthetic_bpe(300);
    c.pre = Some("deepseek-llm".into());
    let e = err(&c);
    assert!(e.to_string().contains("deepseek-llm") && e.to_string().contains("llama-bpe"), "{e}");
}

#[test]
fn merges_naming_absent_tokens_report_their_index() {
    let mut c = synthetic_bpe(300);
    let merges = c.merges.as_mut().unwrap();
    merges[5] = "zzz yyy".into();
    match err(&c) {
        TokenizerError::MergeTokenMissing { index, token, .. } => {
            assert_eq!((index, token.as_str()), (5, "zzz"));
        }
        other => panic!("expected MergeTokenMissing, got {other}"),
    }
    let mut c = synthetic_bpe(300);
    c.merges.as_mut().unwrap()[2] = "nospace".into();
    assert!(matches!(err(&c), TokenizerError::MalformedMerge { index: 2, .. }));
    let mut c = synthetic_bpe(300);
    c.merges = None;
    assert!(matches!(err(&c), TokenizerError::MissingMerges { .. }));
}

#[test]
fn lengths_types_and_ids_are_checked() {
    let mut c = synthetic_bpe(300);
    c.scores = Some(vec![0.0; 7]);
    assert!(matches!(err(&c), TokenizerError::LengthMismatch { found: 7, expected: 300, .. }));
    let mut c = synthetic_bpe(300);
    c.token_types.as_mut().unwrap()[9] = 42;
    assert!(matches!(err(&c), TokenizerError::InvalidTokenType { index: 9, value: 42 }));
    let mut c = synthetic_bpe(300);
    c.eos_id = Some(300);
    assert!(matches!(err(&c), TokenizerError::SpecialIdOutOfRange { id: 300, .. }));
    let c = TokenizerConfig { model: "gpt2".into(), ..TokenizerConfig::default() };
    assert!(matches!(err(&c), TokenizerError::EmptyVocab));
}

#[test]
fn bytes_without_tokens_are_unk_or_an_error() {
    let mut c = synthetic_bpe(300);
    // Drop the byte token of 'q' (id 3 + b'q'); nothing merges into it.
    let q = 3 + usize::from(b'q');
    c.tokens[q] = "<|unused_q|>".into();
    c.merges.as_mut().unwrap().retain(|m| !m.split(' ').any(|side| side.contains('q')));
    let t = Tokenizer::from_config(&c).unwrap();
    assert!(matches!(t.encode("q", EncodeOptions::default()), Err(TokenizerError::Unencodable { .. })));
    c.unk_id = Some(0);
    let t = Tokenizer::from_config(&c).unwrap();
    assert_eq!(t.encode("q", EncodeOptions::default()).unwrap(), [0]);
}
