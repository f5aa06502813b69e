//! The schema reader against texts written by hand, and random texts it
//! lets through checked by an independent validator of the same subset.

use std::sync::Arc;

use serde_json::{json, Value};

use super::*;

fn prefix(schema: &Value) -> SchemaPrefix {
    SchemaPrefix::new(Arc::new(Schema::compile(schema).expect("compiles")))
}

/// (valid prefix, complete) for `text`.
fn reads(schema: &Value, text: &str) -> (bool, bool) {
    let mut p = prefix(schema);
    let ok = p.push_all(text.as_bytes());
    (ok, ok && p.is_complete())
}

fn person() -> Value {
    json!({
        "$defs": {
            "Address": {
                "type": "object",
                "properties": {"city": {"type": "string", "minLength": 1}, "zip": {"type": ["string", "null"]}},
                "required": ["city"],
                "additionalProperties": false,
            },
        },
        "type": "object",
        "title": "Person",
        "properties": {
            "name": {"type": "string", "maxLength": 5, "description": "given name"},
            "age": {"type": "integer"},
            "height": {"type": "number"},
            "kind": {"enum": ["a", "b", 3, null]},
            "tags": {"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 2},
            "home": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}]},
            "fixed": {"const": {"x": [1, 2]}},
        },
        "required": ["name", "age"],
        "additionalProperties": false,
    })
}

#[test]
fn texts_the_schema_accepts_are_complete() {
    let schema = person();
    for text in [
        r#"{"name": "Ann", "age": 30}"#,
        r#"{"age": -1, "name": "", "height": 1.5e3}"#,
        r#"{"name": "Bo", "age": 0, "kind": "b", "tags": [true, false]}"#,
        r#"{"name": "Bo", "age": 0, "kind": 3, "home": {"city": "X", "zip": null}}"#,
        r#"{"name": "Bo", "age": 0, "kind": null, "home": null, "fixed": {"x":[1,2]}}"#,
        "{\"name\": \"\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\", \"age\": 2}",
        r#" { "name" : "a\"\u00e9" , "age" : 7 } "#.trim_end(),
    ] {
        assert_eq!(reads(&schema, text), (true, true), "{text}");
        let value: Value = serde_json::from_str(text).expect("JSON");
        assert!(validate(&schema, &schema, &value), "the test's validator disagrees: {text}");
    }
}

#[test]
fn prefixes_are_valid_but_incomplete() {
    let schema = person();
    for text in
        [r#"{"na"#, r#"{"name": "Ann", "age": 3"#, r#"{"name": "Ann", "age": 3, "home": {"ci"#, r#"{"kind": "#, "{"]
    {
        assert_eq!(reads(&schema, text), (true, false), "{text}");
    }
}

#[test]
fn texts_the_schema_refuses_stop_where_they_break_it() {
    let schema = person();
    for text in [
        r#"{"name": "Ann"}"#,                       // age is required
        r#"{"name": "Ann", "age": 1, "x": 1}"#,     // no other keys
        r#"{"name": "Ann", "name": "B", "age": 1"#, // a key twice
        r#"{"name": "Annabel""#,                    // longer than 5
        r#"{"name": 3"#,                            // a number for a string
        r#"{"age": 1.5"#,                           // a fraction for an integer
        r#"{"age": 1e3"#,                           // an exponent for an integer
        r#"{"kind": "c""#,                          // not in the enum
        r#"{"kind": 33"#,                           // not in the enum either
        r#"{"tags": []"#,                           // fewer than 1 item
        r#"{"tags": [true, true, true"#,            // more than 2
        r#"{"tags": [1"#,                           // items are booleans
        r#"{"home": {"zip": null}"#,                // city is required
        r#"{"home": {"city": ""}"#,                 // city has at least 1 character
        r#"{"fixed": {"x": [1, 2]}"#,               // constants are written compactly
        r#"{"name": "\ud800"#,                      // no surrogate escapes
        "[",
        r#"{"na\u006de""#, // keys are written without escapes
    ] {
        assert!(!reads(&schema, text).0, "{text} was taken");
    }
}

#[test]
fn whitespace_between_tokens_is_a_space_or_an_indented_line() {
    let schema = json!({"type": "object", "properties": {"a": {"type": "array"}}});
    let indent = " ".repeat(MAX_INDENT as usize);
    for text in ["{\"a\": [1, 2]}", "{\n  \"a\":\n\t[\n    1\n  ]\n}", &format!("\n{indent}{{}}"), " {}"] {
        assert_eq!(reads(&schema, text), (true, true), "{text:?}");
    }
    for text in ["  {}", &format!("\n{indent} {{}}"), "{\"a\":\r[]}", "{\"a\": \n[]}", "{\n\n}"] {
        assert!(!reads(&schema, text).0, "{text:?} was taken");
    }
    assert!(!reads(&schema, "{} ").0, "nothing follows a whole text");
}

#[test]
fn strings_are_well_formed_utf8_counted_in_characters() {
    let schema = json!({"type": "string", "maxLength": 2});
    let read = |bytes: &[u8]| {
        let mut p = prefix(&schema);
        let ok = p.push_all(bytes);
        (ok, ok && p.is_complete())
    };
    assert_eq!(read("\"\u{e9}\u{1f600}\"".as_bytes()), (true, true), "two characters, five bytes");
    assert!(!read("\"\u{e9}\u{e9}\u{e9}".as_bytes()).0, "three characters");
    for bad in
        [&b"\"\x80"[..], b"\"\xc0\xaf", b"\"\xe0\x80", b"\"\xed\xa0", b"\"\xf4\x90", b"\"\xf8", b"\"\xc3\"", b"\"\xff"]
    {
        assert!(!read(bad).0, "{bad:?} was taken");
    }
}

#[test]
fn recursive_schemas_read_nested_texts() {
    let tree = json!({
        "$defs": {"node": {"type": "object", "properties": {
            "v": {"type": "integer"},
            "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}},
        }, "required": ["v"], "additionalProperties": false}},
        "$ref": "#/$defs/node",
    });
    assert_eq!(reads(&tree, r#"{"v": 1, "kids": [{"v": 2, "kids": [{"v": 3}]}, {"v": 4}]}"#), (true, true));
    assert!(!reads(&tree, r#"{"v": 1, "kids": [{"w": 2"#).0);
    let looping = json!({"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"});
    assert!(Schema::compile(&looping).is_err(), "a $ref loop that reads nothing is refused");
}

#[test]
fn unsupported_keywords_are_named() {
    for (schema, keyword, at) in [
        (json!({"type": "string", "pattern": "a+"}), "pattern", "/"),
        (json!({"type": "integer", "minimum": 0}), "minimum", "/"),
        (json!({"oneOf": [{"type": "string"}]}), "oneOf", "/"),
        (json!({"not": {"type": "string"}}), "not", "/"),
        (json!({"properties": {"a": {"if": {}}}}), "if", "/properties/a"),
        (json!({"items": [{"type": "string"}]}), "items as an array (prefixItems)", "/"),
        (json!({"properties": {"a": false}}), "false", "/properties/a"),
        (json!({"$ref": "https://example.com/s.json"}), "$ref outside the document", "/"),
        (json!({"allOf": [{}, {}]}), "allOf", "/"),
    ] {
        match Schema::compile(&schema) {
            Err(SchemaError::Unsupported { keyword: k, path }) => {
                assert_eq!((k.as_str(), path.as_str()), (keyword, at), "{schema}")
            }
            other => panic!("{schema}: {other:?}"),
        }
    }
    for bad in
        [json!({"type": "text"}), json!({"required": "a"}), json!({"enum": []}), json!(3), json!({"$ref": "#/nope"})]
    {
        assert!(matches!(Schema::compile(&bad), Err(SchemaError::Invalid { .. })), "{bad}");
    }
}

#[test]
fn tool_calls_name_a_tool_first_and_hold_its_arguments() {
    let weather = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
    let time =
        json!({"type": "object", "properties": {"zone": {"enum": ["UTC", "CET"]}}, "additionalProperties": false});
    let schema = Arc::new(Schema::tool_call([("weather", &weather), ("time", &time)]).expect("compiles"));
    let read = |text: &str| {
        let mut p = SchemaPrefix::new(schema.clone());
        let ok = p.push_all(text.as_bytes());
        (ok, ok && p.is_complete())
    };
    assert_eq!(read(r#"{"name": "weather", "arguments": {"city": "Oslo"}}"#), (true, true));
    assert_eq!(read(r#"{"name": "time", "arguments": {}}"#), (true, true));
    assert!(!read(r#"{"arguments""#).0, "the name comes first");
    assert!(!read(r#"{"name": "clock""#).0, "no such tool");
    assert!(!read(r#"{"name": "time", "arguments": {"city""#).0, "time's arguments");
    assert!(!read(r#"{"name": "weather", "arguments": {}}"#).0, "city is required");
    assert!(!read(r#"{"name": "time", "arguments": {}, "x""#).0, "nothing else");
}

#[test]
fn call_or_text_holds_only_what_opens_a_call() {
    let tokenizer = Tokenizer::from_config(&baton_tokenizer::synthetic_bpe(512)).expect("tokenizer");
    let args = json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]});
    let schema = Arc::new(Schema::tool_call([("search", &args)]).expect("compiles"));
    let feed = |constraint: &mut Constraint, text: &str| {
        let ids = tokenizer.encode(text, baton_tokenizer::EncodeOptions::default()).expect("encode");
        ids.iter().all(|&id| constraint.accept(id, &tokenizer))
    };
    // Words: free once they part from the opening tag.
    let mut words = Constraint::call_or_text(schema.clone());
    assert!(feed(&mut words, " <tool"), "a start of the tag");
    assert!(!words.is_free());
    assert!(feed(&mut words, "s are nice"));
    assert!(words.is_free() && !words.is_complete());
    // A call: held from the tag on, complete when its object closes.
    let mut call = Constraint::call_or_text(schema);
    assert!(feed(&mut call, "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"x\"}"));
    assert!(!call.is_free() && !call.is_complete());
    let mut bad = call.clone();
    assert!(!feed(&mut bad, ", \"z\""), "nothing else in the call");
    assert!(feed(&mut call, "}"));
    assert!(call.is_complete());
}

/// Random texts the reader lets through, byte by byte, each checked by
/// [`validate`] when complete.
#[test]
fn random_texts_the_reader_completes_validate() {
    let schema = person();
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut random = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let alphabet: Vec<u8> = b" \n\t\"{}[],:-.0123456789eEabcdefghijklmnopqrstuvwxyz\\ACU".to_vec();
    let mut complete = 0;
    for _ in 0..300 {
        let mut p = prefix(&schema);
        let mut text = Vec::new();
        for _ in 0..400 {
            if p.is_complete() {
                break;
            }
            // Closing bytes are tried first half the time, so texts end.
            let mut order = alphabet.clone();
            for i in (1..order.len()).rev() {
                order.swap(i, (random() % (i as u64 + 1)) as usize);
            }
            if random() % 2 == 0 {
                order.sort_by_key(|b| !b"\"}]".contains(b));
            }
            let Some(&b) = order.iter().find(|&&b| p.clone().push(b)) else { panic!("stuck after {text:?}") };
            assert!(p.push(b));
            text.push(b);
        }
        if p.is_complete() {
            complete += 1;
            let text = String::from_utf8(text).expect("ASCII");
            let value: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert!(validate(&schema, &schema, &value), "{text} does not validate");
        }
    }
    assert!(complete > 100, "only {complete} of 300 random texts completed");
}

/// The subset of JSON Schema the reader serves, checked on a parsed value
/// (written apart from the reader, for the test).
fn validate(root: &Value, schema: &Value, value: &Value) -> bool {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        return validate(root, root.pointer(&r[1..]).expect("ref"), value);
    }
    if let Some(any) = schema.get("anyOf").and_then(Value::as_array) {
        return any.iter().any(|s| validate(root, s, value));
    }
    if let Some(list) = schema.get("enum").and_then(Value::as_array) {
        return list.contains(value);
    }
    if let Some(c) = schema.get("const") {
        return c == value;
    }
    let kind = match value {
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(n) if n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0) => "integer",
        Value::Number(_) => "number",
        Value::Bool(_) => "boolean",
        Value::Null => "null",
    };
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).collect(),
        _ => vec![kind],
    };
    if !types.iter().any(|t| *t == kind || (*t == "number" && kind == "integer")) {
        return false;
    }
    let count = |key: &str| schema.get(key).and_then(Value::as_u64);
    match value {
        Value::String(s) => {
            let n = s.chars().count() as u64;
            n >= count("minLength").unwrap_or(0) && n <= count("maxLength").unwrap_or(u64::MAX)
        }
        Value::Array(items) => {
            let n = items.len() as u64;
            let item = schema.get("items").cloned().unwrap_or(json!(true));
            n >= count("minItems").unwrap_or(0)
                && n <= count("maxItems").unwrap_or(u64::MAX)
                && items.iter().all(|v| item == json!(true) || validate(root, &item, v))
        }
        Value::Object(map) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let required = schema.get("required").and_then(Value::as_array).cloned().unwrap_or_default();
            let closed = schema.get("additionalProperties") == Some(&json!(false));
            required.iter().all(|r| r.as_str().is_some_and(|r| map.contains_key(r)))
                && map.iter().all(|(k, v)| match properties.and_then(|p| p.get(k)) {
                    Some(s) => validate(root, s, v),
                    None => !closed,
                })
        }
        _ => true,
    }
}

#[test]
fn the_mask_keeps_exactly_the_tokens_that_continue_the_schema() {
    let tokenizer = Tokenizer::from_config(&baton_tokenizer::synthetic_bpe(512)).expect("tokenizer");
    let constraint = Constraint::schema(Arc::new(Schema::compile(&person()).expect("compiles")));
    let vocab = tokenizer.vocab_size();
    // Distinct logits (7919 is prime to the vocabulary's size): the
    // candidates are the tokens of the CANDIDATES largest.
    let logits: Vec<f32> = (0..vocab).map(|i| ((i * 7919) % vocab) as f32).collect();
    let candidate = |t: usize| logits[t] >= (vocab - CANDIDATES) as f32;
    let mut fell_back = false;
    for text in ["", "{", "{\"", "{\"name\": \"A", "{\"name\": \"Ab\", \"age\": 1", "{\"kind\": "] {
        let ids = tokenizer.encode(text, baton_tokenizer::EncodeOptions::default()).expect("encode");
        let mut at = constraint.clone();
        assert!(ids.iter().all(|&id| at.accept(id, &tokenizer)), "{text}");
        let fitting: Vec<usize> = (0..vocab).filter(|&t| at.allows(t as u32, &tokenizer)).collect();
        let among: Vec<usize> = fitting.iter().copied().filter(|&t| candidate(t)).collect();
        let expected = if among.is_empty() { fitting.clone() } else { among };
        let mut masked = logits.clone();
        assert_eq!(at.mask(&mut masked, &tokenizer), expected.len(), "{text}");
        let kept: Vec<usize> = (0..vocab).filter(|&t| masked[t].is_finite()).collect();
        assert_eq!(kept, expected, "{text}");
        assert!(!kept.is_empty(), "{text}: something continues it");
        // The likeliest tokens made ones that do not fit: the rest are
        // read, and every token that fits is kept.
        let misfits: Vec<usize> = (0..vocab).filter(|t| !fitting.contains(t)).collect();
        if misfits.len() >= CANDIDATES {
            let mut rest_only = vec![0.0f32; vocab];
            misfits.iter().take(CANDIDATES).for_each(|&t| rest_only[t] = 10.0);
            assert_eq!(at.mask(&mut rest_only, &tokenizer), fitting.len(), "{text}");
            let kept: Vec<usize> = (0..vocab).filter(|&t| rest_only[t].is_finite()).collect();
            assert_eq!(kept, fitting, "{text}");
            fell_back = true;
        }
    }
    assert!(fell_back, "the whole vocabulary was read for one text at least");
}
