//! Gemma 4's calls held by llguidance: a call names one of the tools and
//! its arguments, in Gemma's value syntax, follow the tool's parameters
//! (types, enums, required and optional properties, array items); texts
//! drawn at random are calls that read back as such; with `"auto"`, words
//! go free and a call opened by its tag is held.

use baton_tokenizer::Tokenizer;
use serde_json::{json, Value};

use super::grammar_tests::{accepts, assert_mask_agrees, draw_text, feed, vocabulary};
use super::*;

pub(super) fn time() -> Value {
    json!({"type": "object", "properties": {"zone": {"enum": ["UTC", "CET"]}}, "required": ["zone"]})
}

pub(super) fn weather() -> Value {
    json!({"type": "object", "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer"},
        "hot": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
        "where": {"type": "object", "properties": {"lat": {"type": "number"}}, "required": ["lat"]}},
        "required": ["city", "where"]})
}

fn compile(shape: CallShape) -> (Tokenizer, Grammar) {
    let (tokenizer, vocabulary) = vocabulary();
    let (time, weather) = (time(), weather());
    let source = gemma4_call_grammar([("time", &time), ("weather", &weather)], shape);
    let grammar = vocabulary.compile(&source).unwrap_or_else(|e| panic!("{source:?}: {e}"));
    (tokenizer, grammar)
}

/// Whether `arguments` fit the tool `name`'s parameters (the tools of
/// [`time`] and [`weather`]).
pub(super) fn fits(name: &str, arguments: &Value) -> Result<(), String> {
    let object = arguments.as_object().ok_or("not an object")?;
    let known: &[&str] = match name {
        "time" => {
            let zone = object.get("zone").and_then(Value::as_str).ok_or("no zone")?;
            return ["UTC", "CET"].contains(&zone).then_some(()).ok_or(format!("zone {zone}"));
        }
        "weather" => &["city", "days", "hot", "tags", "where"],
        other => return Err(format!("no tool {other}")),
    };
    if let Some(key) = object.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(format!("undeclared {key}"));
    }
    object.get("city").and_then(Value::as_str).ok_or("no city")?;
    object.get("where").and_then(|w| w.get("lat")).and_then(Value::as_f64).ok_or("no where.lat")?;
    if object.get("days").is_some_and(|d| !d.is_i64()) || object.get("hot").is_some_and(|h| !h.is_boolean()) {
        return Err("days or hot of another type".into());
    }
    let tags = object.get("tags").map(|t| t.as_array().map(|a| a.iter().all(|x| x == "a" || x == "b")));
    if tags.is_some_and(|ok| ok != Some(true)) {
        return Err("tags".into());
    }
    Ok(())
}

#[test]
fn a_gemma4_call_names_a_tool_and_its_arguments_follow_the_schema() {
    let (tokenizer, grammar) = compile(CallShape { parallel: false, opens: false });
    let q = GEMMA4_QUOTE;
    for good in [
        format!("call:time{{zone:{q}UTC{q}}}<tool_call|>"),
        format!("call:weather{{city:{q}Oslo, {{x}}{q},where:{{lat:-1.5e2}}}}<tool_call|>"),
        format!("call:weather{{city:{q}O{q},days:3,hot:true,tags:[{q}a{q},{q}b{q}],where:{{lat:0}}}}<tool_call|>"),
    ] {
        assert!(accepts(&grammar, &tokenizer, &good), "{good}");
    }
    for (bad, why) in [
        (format!("call:clock{{zone:{q}UTC{q}}}<tool_call|>"), "no such tool"),
        (format!("call:time{{zone:{q}PST{q}}}<tool_call|>"), "its enum"),
        (format!("call:weather{{city:{q}O{q}}}<tool_call|>"), "a required property left out"),
        (format!("call:weather{{city:{q}O{q},days:1.5,where:{{lat:0}}}}<tool_call|>"), "an integer"),
        (format!("call:weather{{city:{q}O{q},where:{{lat:0}},x:1}}<tool_call|>"), "an undeclared property"),
        (format!("call:weather{{where:{{lat:0}},city:{q}O{q}}}<tool_call|>"), "the properties in their order"),
        (r#"call:time{"zone": "UTC"}<tool_call|>"#.to_string(), "JSON is not Gemma's syntax"),
        (format!("call:time{{zone:{q}UTC{q}}}<tool_call|> more"), "nothing after the call"),
        (format!("call:weather{{city:{q}O{q},days:{},where:{{lat:0}}}}<tool_call|>", "9".repeat(17)), "17 digits"),
    ] {
        assert!(!accepts(&grammar, &tokenizer, &bad), "{why}: {bad}");
    }
}

#[test]
fn gemma4_calls_drawn_at_random_read_back_as_calls_that_fit_their_tools() {
    for parallel in [false, true] {
        let (tokenizer, grammar) = compile(CallShape { parallel, opens: false });
        let mut wholes = 0;
        for seed in 0..12 {
            let (text, whole) = draw_text(&grammar, &tokenizer, seed, 600);
            // A text cut short: its whole calls fit too.
            let (calls, rest) = read_gemma4_calls(&text);
            if whole {
                wholes += 1;
                assert!(!calls.is_empty() && rest.trim().is_empty(), "seed {seed}: {text:?} left {rest:?}");
                assert!(parallel || calls.len() == 1, "seed {seed}: {text:?}");
            }
            for (name, arguments) in &calls {
                fits(name, arguments).unwrap_or_else(|why| panic!("seed {seed}: {why}: {text:?}"));
            }
        }
        assert!(wholes >= 2, "parallel {parallel}: {wholes} of 12 drawn texts closed within 600 tokens");
    }
}

#[test]
fn gemma4_words_go_free_and_a_call_opened_by_its_tag_is_held() {
    let (tokenizer, grammar) = compile(CallShape { parallel: false, opens: true });
    let feed = |constraint: &mut Constraint, text: &str| feed(constraint, &tokenizer, text);
    let mut words = Constraint::call_or_text_opened_by(&grammar, GEMMA4_CALL_OPEN);
    assert!(feed(&mut words, " \n<|tool"), "a start of the tag");
    assert!(!words.is_free());
    assert!(feed(&mut words, "s are nice"));
    assert!(words.is_free() && !words.is_complete());
    let mut call = Constraint::call_or_text_opened_by(&grammar, GEMMA4_CALL_OPEN);
    assert!(feed(&mut call, "<|tool_call>call:time{zone:<|\"|>CET<|\"|>}"));
    assert!(!call.is_free() && !call.is_complete());
    assert!(!feed(&mut call.clone(), ",x:1"), "nothing else in the call");
    assert!(feed(&mut call, "<tool_call|>"));
    assert!(call.is_complete() || call.allows(tokenizer.eos_id().expect("eos"), &tokenizer));
    // While the text may open a call, the mask and the one-token check agree.
    for (seed, prefix) in ["", " ", "<|tool_", "<|tool_call>", "<|tool_call>call:wea"].into_iter().enumerate() {
        let mut constraint = Constraint::call_or_text_opened_by(&grammar, GEMMA4_CALL_OPEN);
        assert!(feed(&mut constraint, prefix), "{prefix:?}");
        assert_mask_agrees(&mut constraint, &tokenizer, seed as u64, prefix);
    }
}
