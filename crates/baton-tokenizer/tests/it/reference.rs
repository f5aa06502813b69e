//! Reference check against HF `tokenizers` (feature `reference-tests`).
//!
//! Off by default because it needs a JSON file written by
//! `tests/reference/tokenizer_ref.py` from a real GGUF model:
//!
//! ```text
//! py=$(bash scripts/setup-python.sh)
//! $py tests/reference/tokenizer_ref.py \
//!     ~/.cache/baton/models/SmolLM2-135M-Instruct.Q4_1.gguf target/tokenizer-ref.json
//! BATON_TOKENIZER_REF=target/tokenizer-ref.json \
//!     cargo test -p baton-tokenizer --features reference-tests --test it reference
//! ```
//!
//! For every pre-tokenizer variant and every corpus text (built-in texts and
//! the repository's Markdown files), the words must equal HF's pre-tokenizer
//! output, the ids must equal HF's, and decoding them must give back the
//! text.
#![cfg(feature = "reference-tests")]

use baton_tokenizer::EncodeOptions;
use baton_tokenizer::{PreTokenizer, Tokenizer, TokenizerConfig};
use serde_json::Value;

use crate::reference_json::{config_from_json, first_difference, ids, load_json, strings};

fn load() -> Value {
    load_json("BATON_TOKENIZER_REF", "tests/reference/tokenizer_ref.py")
}

fn config(json: &Value, pre: &str) -> TokenizerConfig {
    TokenizerConfig { pre: Some(pre.to_owned()), ..config_from_json(json) }
}

#[test]
fn ids_and_round_trips_match_hf_tokenizers() {
    let json = load();
    let mut checked = 0;
    for variant in json["variants"].as_array().expect("variants") {
        let pre = variant["pre"].as_str().expect("pre");
        let tokenizer = Tokenizer::from_config(&config(&json["config"], pre))
            .unwrap_or_else(|e| panic!("building the {pre} tokenizer: {e}"));
        for case in variant["cases"].as_array().expect("cases") {
            let text = case["text"].as_str().expect("text");
            let expected = ids(&case["ids"]);
            let actual =
                tokenizer.encode(text, EncodeOptions { add_special: false, parse_special: true }).expect("encode");
            if actual != expected {
                let (at, expected, actual) = first_difference(&tokenizer, &expected, &actual);
                panic!(
                    "pre {pre}: ids differ at index {at} for text {text:?}\n expected: {}\n   actual: {}",
                    expected, actual
                );
            }
            let decoded = tokenizer.decode_with(&actual, true).expect("decode");
            assert_eq!(decoded, text, "pre {pre}: decode(encode(text)) != text");
            checked += 1;
        }
    }
    assert!(checked > 0, "the reference file holds no cases");
    println!("{checked} reference cases equal");
}

#[test]
fn words_match_hf_pre_tokenizers() {
    let json = load();
    let (mut texts, mut compared, mut mismatches) = (0, 0, Vec::new());
    for variant in json["variants"].as_array().expect("variants") {
        let pre = variant["pre"].as_str().expect("pre");
        let splitter = PreTokenizer::from_gguf_name(Some(pre)).unwrap_or_else(|e| panic!("{e}"));
        for case in variant["cases"].as_array().expect("cases") {
            let text = case["text"].as_str().expect("text");
            let expected = strings(&case["words"]);
            let mut actual = Vec::new();
            splitter.split(text, &mut actual);
            texts += 1;
            compared += expected.len();
            if actual != expected {
                let at = actual.iter().zip(&expected).take_while(|(a, e)| a == e).count();
                let from = at.saturating_sub(2);
                mismatches.push(format!(
                    "pre {pre}: words differ at word {at} of {:?}...\n expected: {:?}\n   actual: {:?}",
                    text.chars().take(40).collect::<String>(),
                    &expected[from..(from + 6).min(expected.len())],
                    &actual[from..(from + 6).min(actual.len())],
                ));
            }
        }
    }
    assert!(texts > 0, "the reference file holds no cases");
    assert!(
        mismatches.is_empty(),
        "{} of {texts} texts split differently from HF:\n{}",
        mismatches.len(),
        mismatches.iter().take(5).cloned().collect::<Vec<_>>().join("\n")
    );
    println!("{texts} texts, {compared} words equal to HF's pre-tokenizers");
}
