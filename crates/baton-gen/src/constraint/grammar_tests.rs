//! The grammar engine over a synthetic vocabulary: texts drawn at random
//! among the tokens it allows are texts the grammar accepts, every token
//! the mask refuses is refused by the one-token check too (and the other
//! way round), and the schema defaults hold (bounded integers, no
//! undeclared keys, patterns, minimums, date-times, unions).

use std::sync::Arc;

use baton_testkit::schemas::{pydantic_record, pydantic_record_check};
use baton_tokenizer::{synthetic_bpe, EncodeOptions, Tokenizer};
use serde_json::{json, Value};

use super::*;

pub(super) fn vocabulary() -> (Tokenizer, Arc<GrammarVocabulary>) {
    let tokenizer = Tokenizer::from_config(&synthetic_bpe(512)).expect("tokenizer");
    let vocabulary = Arc::new(GrammarVocabulary::new(&tokenizer).expect("vocabulary"));
    (tokenizer, vocabulary)
}

/// A small deterministic generator (xorshift64).
pub(super) fn draws(seed: u64) -> impl FnMut() -> u64 {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

/// Draws up to `steps` tokens at random among those the constraint
/// allows, checking at each step that the one-token check and the mask
/// agree on every token; returns the text, and whether it is whole (an
/// end token drawn, or the grammar complete).
pub(super) fn draw_text(grammar: &Grammar, tokenizer: &Tokenizer, seed: u64, steps: usize) -> (String, bool) {
    let mut constraint = Constraint::grammar(grammar);
    let mut next = draws(seed);
    let mut text = Vec::new();
    for _ in 0..steps {
        if constraint.is_complete() {
            return (String::from_utf8(text).expect("utf-8"), true);
        }
        let mut logits: Vec<f32> = (0..tokenizer.vocab_size()).map(|_| (next() % 1000) as f32).collect();
        let allowed = constraint.mask(&mut logits, tokenizer);
        assert!(allowed > 0, "some token continues {:?}", String::from_utf8_lossy(&text));
        for (id, logit) in logits.iter().enumerate() {
            assert_eq!(
                constraint.allows(id as u32, tokenizer),
                logit.is_finite(),
                "token {id} {:?} after {:?}",
                tokenizer.token_text(id as u32),
                String::from_utf8_lossy(&text)
            );
        }
        let token = (0..logits.len()).max_by(|&a, &b| logits[a].total_cmp(&logits[b])).expect("a token") as u32;
        assert!(constraint.accept(token, tokenizer));
        if tokenizer.token_type(token).is_ok_and(|t| t == baton_tokenizer::TokenType::Control) {
            assert!(constraint.is_complete(), "an end token ends the text");
            return (String::from_utf8(text).expect("utf-8"), true);
        }
        text.extend_from_slice(tokenizer.token_bytes(token, false).expect("token"));
    }
    (String::from_utf8_lossy(&text).into_owned(), constraint.is_complete())
}

/// Feeds `text` (tokenized) to `constraint`; whether it took every token.
pub(super) fn feed(constraint: &mut Constraint, tokenizer: &Tokenizer, text: &str) -> bool {
    let ids = tokenizer.encode(text, EncodeOptions::default()).expect("encode");
    ids.iter().all(|&id| constraint.accept(id, tokenizer))
}

/// Asserts that the mask (of random logits drawn from `seed`) lets some
/// token through and agrees with the one-token check on every token,
/// after the text `what`.
pub(super) fn assert_mask_agrees(constraint: &mut Constraint, tokenizer: &Tokenizer, seed: u64, what: &str) {
    let mut next = draws(seed);
    let mut logits: Vec<f32> = (0..tokenizer.vocab_size()).map(|_| (next() % 1000) as f32).collect();
    assert!(constraint.mask(&mut logits, tokenizer) > 0, "no token after {what:?}");
    for (id, logit) in logits.iter().enumerate() {
        let allows = constraint.allows(id as u32, tokenizer);
        assert_eq!(allows, logit.is_finite(), "token {id} {:?} after {what:?}", tokenizer.token_text(id as u32));
    }
}

/// A JSON text drawn as [`draw_text`] draws, whole within `steps`.
pub(super) fn drawn_json(grammar: &Grammar, tokenizer: &Tokenizer, seed: u64, steps: usize) -> Value {
    let (text, whole) = draw_text(grammar, tokenizer, seed, steps);
    assert!(whole, "seed {seed}: {text:?} did not close");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

/// Whether `text` (tokenized) is taken whole, token by token.
pub(super) fn accepts(grammar: &Grammar, tokenizer: &Tokenizer, text: &str) -> bool {
    let mut constraint = Constraint::grammar(grammar);
    let tokens = tokenizer.encode(text, EncodeOptions::default()).expect("encode");
    tokens.iter().all(|&t| constraint.accept(t, tokenizer))
        && (constraint.is_complete() || tokenizer.eos_id().is_some_and(|eos| constraint.allows(eos, tokenizer)))
}

#[test]
fn gbnf_texts_drawn_at_random_are_texts_of_the_grammar() {
    let (tokenizer, vocabulary) = vocabulary();
    let gbnf = "root ::= answer \" \" count\nanswer ::= \"yes\" | \"no\"\ncount ::= [1-9] [0-9]{0,2} \" items\"";
    let grammar = vocabulary.compile(&GrammarSource::Gbnf(gbnf.into())).expect("compiles");
    for seed in 0..8 {
        let (text, whole) = draw_text(&grammar, &tokenizer, seed, 64);
        assert!(whole, "seed {seed}: {text:?} did not end");
        let (answer, rest) = text.split_once(' ').unwrap_or_else(|| panic!("{text:?}"));
        let digits = rest.strip_suffix(" items").unwrap_or_else(|| panic!("{text:?}"));
        assert!(["yes", "no"].contains(&answer), "{text:?}");
        assert!((1..=3).contains(&digits.len()) && !digits.starts_with('0'), "{text:?}");
        assert!(digits.bytes().all(|b| b.is_ascii_digit()), "{text:?}");
    }
    assert!(accepts(&grammar, &tokenizer, "no 120 items"));
    assert!(!accepts(&grammar, &tokenizer, "no 1200 items"), "four digits");
    assert!(!accepts(&grammar, &tokenizer, "maybe 1 items"));
}

#[test]
fn regex_texts_drawn_at_random_match_it() {
    let (tokenizer, vocabulary) = vocabulary();
    let grammar = vocabulary.compile(&GrammarSource::Regex("[a-c]{2,4}-[0-9]{3}".into())).expect("compiles");
    for seed in 0..8 {
        let (text, whole) = draw_text(&grammar, &tokenizer, seed, 32);
        assert!(whole, "seed {seed}: {text:?}");
        let (letters, digits) = text.split_once('-').unwrap_or_else(|| panic!("{text:?}"));
        assert!((2..=4).contains(&letters.len()) && letters.bytes().all(|b| (b'a'..=b'c').contains(&b)), "{text:?}");
        assert!(digits.len() == 3 && digits.bytes().all(|b| b.is_ascii_digit()), "{text:?}");
    }
    assert!(!accepts(&grammar, &tokenizer, "abcd-12"));
}

/// Whether `value` is a Record of [`pydantic_record`], its count within
/// the schema defaults' bound.
pub(super) fn is_record(value: &Value) -> Result<(), String> {
    pydantic_record_check(value, INTEGER_BOUND)
}

#[test]
fn pydantic_schemas_hold_texts_drawn_at_random() {
    let (tokenizer, vocabulary) = vocabulary();
    let grammar = vocabulary.compile(&GrammarSource::JsonSchema(pydantic_record())).expect("compiles");
    for seed in 0..6 {
        let value = drawn_json(&grammar, &tokenizer, seed, 600);
        is_record(&value).unwrap_or_else(|why| panic!("seed {seed}: {why} in {value}"));
    }
}

#[test]
fn schema_defaults_refuse_what_the_schema_does_not_declare() {
    let (tokenizer, vocabulary) = vocabulary();
    let grammar = vocabulary.compile(&GrammarSource::JsonSchema(pydantic_record())).expect("compiles");
    let good = r#"{"count": 7, "code": "ABC", "when": "2026-12-06T10:00:00Z", "pet": {"kind": "cat", "lives": 3}}"#;
    is_record(&serde_json::from_str(good).expect("json")).expect("the good record is one");
    assert!(accepts(&grammar, &tokenizer, good), "{good}");
    let sixteen = "9".repeat(16);
    assert!(accepts(&grammar, &tokenizer, &good.replace("7,", &format!("{sixteen},"))), "16 digits");
    assert!(accepts(&grammar, &tokenizer, &good.replace("00:00Z", "00:00.123456789+01:00")), "nine digits");
    for (bad, why) in [
        (good.replace("7,", &format!("{sixteen}9,")), "17 digits"),
        (good.replace("7,", "-1,"), "below minimum 0"),
        (good.replace("\"ABC\"", "\"ABCD\""), "pattern"),
        (good.replace("\"ABC\"", "\"abc\""), "pattern"),
        (good.replace("2026-12-06T", "2026-13-06T"), "date-time"),
        (good.replace("00:00Z", "00:00.1234567890Z"), "ten digits of a second"),
        (good.replace("\"lives\": 3", "\"lives\": 0"), "minimum 1"),
        (good.replace("\"lives\": 3", "\"good\": true"), "union branch"),
        (good.replace("\"code\"", "\"extra\": 1, \"code\""), "undeclared key"),
        (good.replace("}}", ", \"age\": 2}}"), "undeclared key in a union branch"),
    ] {
        assert!(!accepts(&grammar, &tokenizer, &bad), "{why}: {bad}");
    }
    // A schema that allows more keys gets them.
    let open = json!({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": true});
    let grammar = vocabulary.compile(&GrammarSource::JsonSchema(open)).expect("compiles");
    assert!(accepts(&grammar, &tokenizer, r#"{"a": 1, "b": [true]}"#));
}

#[test]
fn json_object_texts_are_objects_and_end_tokens_wait_for_the_close() {
    let (tokenizer, vocabulary) = vocabulary();
    let grammar = vocabulary.compile(&GrammarSource::JsonObject).expect("compiles");
    let eos = tokenizer.eos_id().expect("eos");
    let mut constraint = Constraint::grammar(&grammar);
    let tokens = tokenizer.encode(r#"{"a": [1, 2]}"#, EncodeOptions::default()).expect("encode");
    for &t in &tokens {
        assert!(!constraint.allows(eos, &tokenizer), "no end inside the object");
        assert!(constraint.accept(t, &tokenizer));
    }
    assert!(constraint.is_complete() || constraint.allows(eos, &tokenizer));
    let x = tokenizer.encode("x", EncodeOptions::default()).expect("encode")[0];
    assert!(!constraint.accept(x, &tokenizer), "nothing follows the object");
    assert!(!accepts(&grammar, &tokenizer, "[1]"), "an array is not an object");
}

#[test]
fn bad_grammars_are_refused_with_a_reason() {
    let (_, vocabulary) = vocabulary();
    for (source, says) in [
        (GrammarSource::Gbnf("root ::= item".into()), "`item` is used but never defined"),
        (GrammarSource::Regex("(".into()), "regular expression"),
        (GrammarSource::JsonSchema(json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/none"}}})), "none"),
        (GrammarSource::JsonSchema(json!({"type": "integer", "minimum": 5, "maximum": 1})), "JSON schema"),
    ] {
        let error = vocabulary.compile(&source).expect_err(&format!("{source:?}"));
        assert!(error.to_string().contains(says), "{source:?}: {error}");
    }
}

#[test]
fn long_reference_chains_compile_or_are_refused_without_overflowing_the_stack() {
    let (tokenizer, vocabulary) = vocabulary();
    // 1,600 `$ref`s through `items` (95 KB) aborted a server once; ten
    // times that fills a megabyte body.
    for links in [1600, 16000] {
        let chain = baton_testkit::schemas::items_chain(links);
        if let Ok(grammar) = vocabulary.compile(&GrammarSource::JsonSchema(chain)) {
            let (text, _) = draw_text(&grammar, &tokenizer, 1, 16);
            assert!(text.starts_with('[') || text.starts_with('{') || text.is_empty(), "{links}: {text:?}");
        }
    }
}
