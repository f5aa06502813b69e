//! Tool calls held by llguidance: a call names one of the tools first and
//! its arguments follow the tool's parameters, `pattern`, `minimum`,
//! `oneOf` and `date-time` included (texts drawn at random are valid
//! calls); several calls follow one another through their tags and may
//! end only between calls; words that part from the opening tag go free.

use baton_testkit::schemas::pydantic_record;
use baton_tokenizer::{EncodeOptions, Tokenizer};
use serde_json::{json, Value};

use super::grammar_tests::{accepts, assert_mask_agrees, drawn_json, draws, feed, is_record, vocabulary};
use super::*;

fn time_parameters() -> Value {
    json!({"type": "object", "properties": {"zone": {"enum": ["UTC", "CET"]}}, "required": ["zone"]})
}

fn compile(shape: CallShape) -> (Tokenizer, Grammar) {
    let (tokenizer, vocabulary) = vocabulary();
    let (record, time) = (pydantic_record(), time_parameters());
    let source = tool_call_grammar([("record", &record), ("time", &time)], shape);
    let grammar = vocabulary.compile(&source).unwrap_or_else(|e| panic!("{source:?}: {e}"));
    (tokenizer, grammar)
}

/// A call's name and arguments, each checked against its tool.
fn check_call(value: &Value) -> Result<&str, String> {
    let object = value.as_object().ok_or("not an object")?;
    let keys: Vec<&str> = object.keys().map(String::as_str).collect();
    if keys.len() != 2 {
        return Err(format!("keys {keys:?}"));
    }
    match value["name"].as_str() {
        Some("record") => is_record(&value["arguments"]).map(|()| "record"),
        Some("time") if ["\"UTC\"", "\"CET\""].contains(&value["arguments"]["zone"].to_string().as_str()) => Ok("time"),
        other => Err(format!("name {other:?}: {value}")),
    }
}

const RECORD: &str =
    r#"{"count": 7, "code": "ABC", "when": "2026-12-06T10:00:00Z", "pet": {"kind": "dog", "good": true}}"#;

#[test]
fn a_call_names_a_tool_first_and_its_arguments_follow_the_tools_schema() {
    let (tokenizer, grammar) = compile(CallShape { parallel: false, opens: false });
    let call = |arguments: &str| format!("{{\"name\": \"record\", \"arguments\": {arguments}}}");
    assert!(accepts(&grammar, &tokenizer, &call(RECORD)));
    assert!(accepts(&grammar, &tokenizer, r#"{"name": "time", "arguments": {"zone": "CET"}}"#));
    for (bad, why) in [
        (call(&RECORD.replace("7,", "-1,")), "minimum 0"),
        (call(&RECORD.replace("ABC", "ABCD")), "pattern"),
        (call(&RECORD.replace("\"good\": true", "\"lives\": true")), "oneOf branch"),
        (call(&RECORD.replace("T10", "X10")), "date-time"),
        (call(&RECORD.replace("\"code\"", "\"x\": 1, \"code\"")), "undeclared argument"),
        (r#"{"arguments": {"zone": "CET"}, "name": "time"}"#.to_string(), "the name comes first"),
        (r#"{"name": "clock", "arguments": {}}"#.to_string(), "no such tool"),
        (r#"{"name": "time", "arguments": {"zone": "CET"}, "x": 1}"#.to_string(), "nothing else in the call"),
        (format!("<tool_call>{}", call(RECORD)), "a required call starts inside its tag"),
    ] {
        assert!(!accepts(&grammar, &tokenizer, &bad), "{why}: {bad}");
    }
    for seed in 0..6 {
        let value = drawn_json(&grammar, &tokenizer, seed, 800);
        check_call(&value).unwrap_or_else(|why| panic!("seed {seed}: {why}"));
    }
}

#[test]
fn several_calls_follow_one_another_through_their_tags_and_end_only_between_calls() {
    let (tokenizer, grammar) = compile(CallShape { parallel: true, opens: false });
    let one = r#"{"name": "time", "arguments": {"zone": "UTC"}}"#;
    let eos = tokenizer.eos_id().expect("eos");
    let fed = |text: &str| {
        let mut constraint = Constraint::grammar(&grammar);
        let tokens = tokenizer.encode(text, EncodeOptions::default()).expect("encode");
        assert!(tokens.iter().all(|&t| constraint.accept(t, &tokenizer)), "{text:?}");
        constraint
    };
    let two = format!("{one}\n</tool_call>\n<tool_call>\n{one}");
    assert!(fed(one).allows(eos, &tokenizer), "an end after a whole call");
    assert!(fed(&format!("{one}\n</tool_call>")).allows(eos, &tokenizer), "an end after its closing tag");
    assert!(!fed(&format!("{one}\n</tool_call>\n<tool_call>")).allows(eos, &tokenizer), "not in an open call");
    assert!(!fed(&two[..two.len() - 3]).allows(eos, &tokenizer), "not inside a call");
    assert!(accepts(&grammar, &tokenizer, &two));
    assert!(!accepts(&grammar, &tokenizer, &format!("{one}\nwords")), "only tags between calls");
    assert!(!accepts(&grammar, &tokenizer, &format!("{one}\n\n\n</tool_call>")), "whitespace is bounded");
    let most = [one; MAX_CALLS].join("\n</tool_call>\n<tool_call>\n");
    assert!(accepts(&grammar, &tokenizer, &most), "{MAX_CALLS} calls");
    assert!(!accepts(&grammar, &tokenizer, &format!("{most}\n</tool_call>\n<tool_call>\n{one}")), "one more");
    // Drawn at random with the end tokens banned: calls, each valid and
    // closed, until the last one allowed or the steps run out.
    for seed in 0..4 {
        let text = draw_without_ends(&grammar, &tokenizer, seed, 1200);
        let calls: Vec<&str> = text.split("<tool_call>").collect();
        for (i, call) in calls.iter().enumerate() {
            let object = call.trim().trim_end_matches("</tool_call>").trim();
            match serde_json::from_str::<Value>(object) {
                Ok(value) => drop(check_call(&value).unwrap_or_else(|why| panic!("seed {seed}: {why}"))),
                Err(_) => assert_eq!(i + 1, calls.len(), "only the last call may be cut: {text:?}"),
            }
        }
        assert!(calls.len() > 1, "seed {seed}: one call, then no end: {text:?}");
    }
}

/// Up to `steps` tokens drawn at random among those the grammar allows,
/// never an end token.
fn draw_without_ends(grammar: &Grammar, tokenizer: &Tokenizer, seed: u64, steps: usize) -> String {
    let mut constraint = Constraint::grammar(grammar);
    let mut next = draws(seed);
    let mut text = Vec::new();
    let ends = |id: usize| tokenizer.token_bytes(id as u32, false).map_or(true, <[u8]>::is_empty);
    for _ in 0..steps {
        if constraint.is_complete() {
            break;
        }
        let mut logits: Vec<f32> = (0..tokenizer.vocab_size())
            .map(|id| if ends(id) { f32::NEG_INFINITY } else { (next() % 1000) as f32 })
            .collect();
        assert!(constraint.mask(&mut logits, tokenizer) > 0, "{:?}", String::from_utf8_lossy(&text));
        let token = (0..logits.len()).max_by(|&a, &b| logits[a].total_cmp(&logits[b])).expect("a token") as u32;
        assert!(constraint.accept(token, tokenizer));
        text.extend_from_slice(tokenizer.token_bytes(token, false).expect("token"));
    }
    String::from_utf8_lossy(&text).into_owned()
}

#[test]
fn words_go_free_and_a_call_opened_by_its_tag_is_held() {
    let (tokenizer, grammar) = compile(CallShape { parallel: false, opens: true });
    let feed = |constraint: &mut Constraint, text: &str| feed(constraint, &tokenizer, text);
    let mut words = Constraint::call_or_text(&grammar);
    assert!(feed(&mut words, " \n<tool"), "a start of the tag");
    assert!(!words.is_free());
    assert!(feed(&mut words, "s are nice"));
    assert!(words.is_free() && !words.is_complete());
    let mut call = Constraint::call_or_text(&grammar);
    assert!(feed(&mut call, "<tool_call>\n{\"name\": \"time\", \"arguments\": {\"zone\": \"UTC\"}"));
    assert!(!call.is_free() && !call.is_complete());
    assert!(!feed(&mut call.clone(), ", \"z\""), "nothing else in the call");
    assert!(feed(&mut call, "}"));
    assert!(call.is_complete() || call.allows(tokenizer.eos_id().expect("eos"), &tokenizer));
    // While the text may open a call, the mask and the one-token check
    // agree: words, or the call's grammar.
    for (seed, prefix) in ["", " ", "<tool_", "<tool_call>", "<tool_call>\n{\"name\": \"re"].into_iter().enumerate() {
        let mut constraint = Constraint::call_or_text(&grammar);
        assert!(feed(&mut constraint, prefix), "{prefix:?}");
        assert_mask_agrees(&mut constraint, &tokenizer, seed as u64, prefix);
    }
}

#[test]
fn a_harmony_call_names_a_tool_after_its_recipient_and_its_arguments_follow_the_schema() {
    let (tokenizer, vocabulary) = vocabulary();
    let (record, time) = (pydantic_record(), time_parameters());
    let source = harmony_call_grammar([("record", &record), ("time", &time)]);
    let grammar = vocabulary.compile(&source).unwrap_or_else(|e| panic!("{source:?}: {e}"));
    let call = |name: &str, arguments: &str| format!("to=functions.{name} <|constrain|>json<|message|>{arguments}");
    assert!(accepts(&grammar, &tokenizer, &call("record", RECORD)));
    assert!(accepts(&grammar, &tokenizer, &call("time", r#"{"zone": "UTC"}"#)));
    for (bad, why) in [
        (call("clock", "{}"), "no such tool"),
        (call("time", r#"{"zone": "PST"}"#), "its parameters"),
        (call("record", &RECORD.replace("7,", "-1,")), "minimum 0"),
        (format!("{} words", call("time", r#"{"zone": "UTC"}"#)), "nothing after the arguments"),
        (r#"to=functions.time<|message|>{"zone": "UTC"}"#.to_string(), "the JSON constraint is written"),
    ] {
        assert!(!accepts(&grammar, &tokenizer, &bad), "{why}: {bad}");
    }
    // Drawn at random: a whole call of one of the tools.
    for seed in 0..4 {
        let (text, whole) = super::grammar_tests::draw_text(&grammar, &tokenizer, seed, 800);
        assert!(whole, "seed {seed}: {text:?}");
        let (header, arguments) = text.split_once("<|message|>").unwrap_or_else(|| panic!("{text:?}"));
        let name = header.strip_prefix("to=functions.").and_then(|h| h.strip_suffix(" <|constrain|>json"));
        let value: Value = serde_json::from_str(arguments).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        let name = name.unwrap_or_else(|| panic!("{text:?}"));
        check_call(&json!({"name": name, "arguments": value})).unwrap_or_else(|why| panic!("seed {seed}: {why}"));
    }
}

/// `tool_choice: "auto"` for gpt-oss: the answer goes free (thinking,
/// words, even `to=functions.` in passing) until a call starts on the
/// commentary channel or in a role header, then the call is held to the
/// tools; the mask and the one-token check agree before, at and after the
/// trigger.
#[test]
fn a_lazy_harmony_call_goes_free_until_its_trigger_and_is_held_from_it() {
    let (tokenizer, vocabulary) = vocabulary();
    let (record, time) = (pydantic_record(), time_parameters());
    let source = harmony_lazy_call_grammar([("record", &record), ("time", &time)]);
    let grammar = vocabulary.compile(&source).unwrap_or_else(|e| panic!("{source:?}: {e}"));
    let feed = |constraint: &mut Constraint, text: &str| feed(constraint, &tokenizer, text);
    let thinking = "<|channel|>analysis<|message|>I may write to=functions.time here.<|end|>";
    let channel = "<|start|>assistant<|channel|>commentary to=functions.time <|constrain|>json<|message|>";
    let header = "<|start|>assistant to=functions.time<|channel|>commentary json<|message|>";
    for opening in [channel, header] {
        let mut call = Constraint::triggered(&grammar, &HARMONY_CALL_TRIGGERS);
        assert!(feed(&mut call, thinking), "thinking is free text");
        assert!(!call.is_complete() && !call.is_free());
        assert!(feed(&mut call.clone(), "<|channel|>final<|message|>Sunny."), "an answer is free text");
        assert!(feed(&mut call, opening), "{opening}");
        assert!(!feed(&mut call.clone(), r#"{"zone": "PST"}"#), "held to the tool's parameters");
        assert!(feed(&mut call, r#"{"zone": "UTC"}"#));
        assert!(call.is_complete() || call.allows(tokenizer.eos_id().expect("eos"), &tokenizer));
    }
    let mut unknown = Constraint::triggered(&grammar, &HARMONY_CALL_TRIGGERS);
    assert!(!feed(&mut unknown, "<|channel|>commentary to=functions.clock <|constrain|>json"), "no such tool");
    for (seed, prefix) in
        ["", thinking, "<|channel|>commentary to=functions", "<|channel|>commentary to=functions.", channel]
            .into_iter()
            .enumerate()
    {
        let mut constraint = Constraint::triggered(&grammar, &HARMONY_CALL_TRIGGERS);
        assert!(feed(&mut constraint, prefix), "{prefix:?}");
        assert_mask_agrees(&mut constraint, &tokenizer, seed as u64, prefix);
    }
}
