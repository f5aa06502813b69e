//! Reference check against llama.cpp's own tokenizer, through
//! llama-cpp-python (feature `llama-reference-tests`).
//!
//! Off by default, and outside CI's features, because llama-cpp-python is
//! built from source (scripts/compare-reference.sh makes its venv, minutes
//! on two cores). `scripts/compare-tokenizer.sh` writes a synthetic Gemma 4
//! vocabulary (`baton model synth --shape gemma4`), runs
//! `tests/reference/tokenizer_llama_ref.py` on it and this test:
//!
//! ```text
//! bash scripts/compare-tokenizer.sh
//! ```
//!
//! For every corpus text (built-in texts and the repository's Markdown
//! files) the ids must equal llama.cpp's, with special tokens (BOS added,
//! control tokens matched) and without, and decoding must give back the text
//! (in a SentencePiece-style vocabulary, with its `▁` characters as spaces).
#![cfg(feature = "llama-reference-tests")]

use baton_tokenizer::{EncodeOptions, Tokenizer};

use crate::reference_json::{config_from_json, first_difference, ids, load_json};

#[test]
fn ids_and_round_trips_match_llama_cpp() {
    let json = load_json("BATON_TOKENIZER_LLAMA_REF", "tests/reference/tokenizer_llama_ref.py");
    let config = config_from_json(&json["config"]);
    let model = config.model.clone();
    let tokenizer = Tokenizer::from_config(&config).unwrap_or_else(|e| panic!("building the {model} tokenizer: {e}"));
    let (mut texts, mut tokens, mut mismatches) = (0, 0, Vec::new());
    for case in json["cases"].as_array().expect("cases") {
        let text = case["text"].as_str().expect("text");
        // SentencePiece-style vocabularies write spaces as `▁`, so a `▁` in
        // the text comes back as a space.
        let round_trip = if model == "gpt2" { text.to_owned() } else { text.replace('\u{2581}', " ") };
        for (key, options) in
            [("special", EncodeOptions { add_special: true, parse_special: true }), ("plain", EncodeOptions::default())]
        {
            let expected = ids(&case[key]);
            let actual = tokenizer.encode(text, options).expect("encode");
            tokens += expected.len();
            if actual != expected {
                let (at, expected, actual) = first_difference(&tokenizer, &expected, &actual);
                mismatches.push(format!(
                    "{model} {key}: ids differ at index {at} of {:?}...\n expected: {}\n   actual: {}",
                    text.chars().take(40).collect::<String>(),
                    expected,
                    actual
                ));
            }
            let skip = usize::from(options.add_special && tokenizer.adds_bos());
            let decoded = tokenizer.decode_with(&actual[skip.min(actual.len())..], true).expect("decode");
            if decoded != round_trip {
                let at = decoded.chars().zip(text.chars()).take_while(|(a, b)| a == b).count();
                let around = |s: &str| s.chars().skip(at.saturating_sub(20)).take(40).collect::<String>();
                panic!(
                    "{model} {key}: decode(encode(text)) != text at char {at}\n expected: {:?}\n   actual: {:?}",
                    around(&round_trip),
                    around(&decoded)
                );
            }
        }
        texts += 1;
    }
    assert!(texts > 0, "the reference file holds no cases");
    assert!(
        mismatches.is_empty(),
        "{} of {} encodings differ from llama.cpp:\n{}",
        mismatches.len(),
        2 * texts,
        mismatches.iter().take(5).cloned().collect::<Vec<_>>().join("\n")
    );
    println!("{model}: {texts} texts, {tokens} tokens equal to llama.cpp's, twice each (special and plain)");
}
