//! Calls in the XML form held by llguidance: a call names one of the
//! tools and its parameter blocks follow the tool's parameters (types,
//! enums, required and optional ones, JSON objects and arrays, strings of
//! several lines); texts drawn at random read back as calls that fit
//! their tools; with `"auto"`, words go free and a call opened by its tag
//! is held.

use baton_tokenizer::Tokenizer;
use serde_json::Value;

use super::gemma4_grammar_tests::{fits, time, weather};
use super::grammar_tests::{accepts, assert_mask_agrees, draw_text, feed, vocabulary};
use super::*;

fn compile(shape: CallShape) -> (Tokenizer, Grammar) {
    let (tokenizer, vocabulary) = vocabulary();
    let (time, weather) = (time(), weather());
    let source = xml_call_grammar([("time", &time), ("weather", &weather)], shape);
    let grammar = vocabulary.compile(&source).unwrap_or_else(|e| panic!("{source:?}: {e}"));
    (tokenizer, grammar)
}

/// Whether `arguments` fit the tool `name`'s parameters, no string
/// holding the closing tag.
fn fits_xml(name: &str, arguments: &Value) -> Result<(), String> {
    let city = arguments.get("city").and_then(Value::as_str).unwrap_or("");
    if city.contains(XML_PARAMETER_CLOSE) {
        return Err(format!("a city holding the closing tag: {city:?}"));
    }
    fits(name, arguments)
}

/// A parameter block.
fn block(key: &str, value: &str) -> String {
    format!("<parameter={key}>\n{value}\n</parameter>\n")
}

#[test]
fn an_xml_call_names_a_tool_and_its_blocks_follow_the_schema() {
    let (tokenizer, grammar) = compile(CallShape { parallel: false, opens: false });
    let call = |name: &str, blocks: &[(&str, &str)]| {
        let blocks: String = blocks.iter().map(|(k, v)| block(k, v)).collect();
        format!("<function={name}>\n{blocks}</function>")
    };
    let good_weather = call("weather", &[("city", "Oslo"), ("where", r#"{"lat": -150.5}"#)]);
    for good in [
        call("time", &[("zone", "UTC")]),
        good_weather.clone(),
        format!("{good_weather}\n</tool_call>"),
        call(
            "weather",
            &[
                ("city", "two\nlines </p> and <b>"),
                ("days", "3"),
                ("hot", "true"),
                ("tags", r#"["a", "b"]"#),
                ("where", r#"{"lat": 0}"#),
            ],
        ),
        call("weather", &[("city", ""), ("where", r#"{"lat": 0}"#)]),
    ] {
        assert!(accepts(&grammar, &tokenizer, &good), "{good}");
    }
    for (bad, why) in [
        (call("clock", &[("zone", "UTC")]), "no such tool"),
        (call("time", &[("zone", "PST")]), "its enum"),
        (call("weather", &[("city", "O")]), "a required parameter left out"),
        (call("weather", &[("city", "O"), ("days", "1.5"), ("where", r#"{"lat": 0}"#)]), "an integer"),
        (call("weather", &[("city", "O"), ("where", r#"{"lat": 0}"#), ("x", "1")]), "an undeclared parameter"),
        (call("weather", &[("where", r#"{"lat": 0}"#), ("city", "O")]), "the parameters in their order"),
        (call("weather", &[("city", "a</parameter>b"), ("where", r#"{"lat": 0}"#)]), "the closing tag in a string"),
        (call("weather", &[("city", "O"), ("where", r#"{"lon": 0}"#)]), "an object held to its schema"),
        (format!("{good_weather}\n</tool_call> more"), "nothing after the call"),
        (r#"{"name": "time", "arguments": {"zone": "UTC"}}"#.to_string(), "Hermes JSON is not this form"),
        (call("weather", &[("city", "O"), ("days", &"9".repeat(17)), ("where", r#"{"lat": 0}"#)]), "17 digits"),
    ] {
        assert!(!accepts(&grammar, &tokenizer, &bad), "{why}: {bad}");
    }
}

#[test]
fn xml_calls_drawn_at_random_read_back_as_calls_that_fit_their_tools() {
    let (time, weather) = (time(), weather());
    let schema = |name: &str| match name {
        "time" => Some(&time),
        "weather" => Some(&weather),
        _ => None,
    };
    for parallel in [false, true] {
        let (tokenizer, grammar) = compile(CallShape { parallel, opens: false });
        let mut wholes = 0;
        for seed in 0..12 {
            let (text, whole) = draw_text(&grammar, &tokenizer, seed, 600);
            let mut calls = Vec::new();
            for part in text.split(TOOL_CALL_OPEN) {
                let name = part.trim_start().strip_prefix(XML_FUNCTION_OPEN).and_then(|r| r.split_once('>'));
                let parameters = name.and_then(|(name, _)| schema(name));
                match read_xml_call(part, parameters) {
                    Some((name, arguments, rest)) => {
                        let rest = rest.trim();
                        assert!(
                            rest.is_empty() || rest == TOOL_CALL_CLOSE || !whole,
                            "seed {seed}: {rest:?} after a call in {text:?}"
                        );
                        calls.push((name, arguments));
                    }
                    // A text cut short: only its last call may be cut.
                    None => assert!(!whole, "seed {seed}: {part:?} is not a call in {text:?}"),
                }
            }
            if whole {
                wholes += 1;
                assert!(!calls.is_empty() && (parallel || calls.len() == 1), "seed {seed}: {text:?}");
            }
            for (name, arguments) in &calls {
                fits_xml(name, arguments).unwrap_or_else(|why| panic!("seed {seed}: {why}: {text:?}"));
            }
        }
        assert!(wholes >= 2, "parallel {parallel}: {wholes} of 12 drawn texts closed within 600 tokens");
    }
}

#[test]
fn xml_words_go_free_and_a_call_opened_by_its_tag_is_held() {
    let (tokenizer, grammar) = compile(CallShape { parallel: false, opens: true });
    let feed = |constraint: &mut Constraint, text: &str| feed(constraint, &tokenizer, text);
    let mut words = Constraint::call_or_text_opened_by(&grammar, TOOL_CALL_OPEN);
    assert!(feed(&mut words, " \n<tool"), "a start of the tag");
    assert!(!words.is_free());
    assert!(feed(&mut words, "s are nice"));
    assert!(words.is_free() && !words.is_complete());
    let mut call = Constraint::call_or_text_opened_by(&grammar, TOOL_CALL_OPEN);
    assert!(feed(&mut call, "<tool_call>\n<function=time>\n<parameter=zone>\nCET\n</parameter>\n"));
    assert!(!call.is_free() && !call.is_complete());
    assert!(!feed(&mut call.clone(), "<parameter=x>\n1\n</parameter>\n"), "nothing else in the call");
    assert!(feed(&mut call, "</function>\n</tool_call>"));
    assert!(call.is_complete() || call.allows(tokenizer.eos_id().expect("eos"), &tokenizer));
    for (seed, prefix) in ["", " ", "<tool_", "<tool_call>\n", "<tool_call>\n<function=wea"].into_iter().enumerate() {
        let mut constraint = Constraint::call_or_text_opened_by(&grammar, TOOL_CALL_OPEN);
        assert!(feed(&mut constraint, prefix), "{prefix:?}");
        assert_mask_agrees(&mut constraint, &tokenizer, seed as u64, prefix);
    }
}
