//! The schema reader against texts written by hand, and random texts it
//! lets through checked by an independent validator of the same subset.

use std::sync::Arc;

use serde_json::{json, Value};

use baton_testkit::schemas::{doubling, items_chain, required_chain, SchemaGen};

use super::schema::Node;
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
    let complete = random_walks(&person(), 300, 0x9e37_79b9_7f4a_7c15, 2);
    assert!(complete > 100, "only {complete} of 300 random texts completed");
}

/// Walks `walks` random texts through the reader, a byte at a time, and
/// fails if one gets stuck (no byte continues it) or a completed one does
/// not validate; returns how many completed. Closing bytes are tried
/// first one walk in `close_every`, so texts end; the others wander.
fn random_walks(schema: &Value, walks: usize, seed: u64, close_every: u64) -> usize {
    let compiled = Arc::new(Schema::compile(schema).unwrap_or_else(|e| panic!("{schema}: {e}")));
    let mut state = seed | 1;
    let mut random = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut alphabet: Vec<u8> = b" \n\t\"{}[],:-.0123456789eEabcdefghijklmnopqrstuvwxyz\\ACU".to_vec();
    alphabet.extend("\u{e9}".as_bytes());
    let mut complete = 0;
    for _ in 0..walks {
        let mut p = SchemaPrefix::new(compiled.clone());
        let mut text = Vec::new();
        for _ in 0..400 {
            if p.is_complete() {
                break;
            }
            let mut order = alphabet.clone();
            for i in (1..order.len()).rev() {
                order.swap(i, (random() % (i as u64 + 1)) as usize);
            }
            if random() % close_every == 0 {
                order.sort_by_key(|b| !b"\"}]".contains(b));
            }
            let Some(&b) = order.iter().find(|&&b| p.clone().push(b)) else {
                panic!("stuck after {:?} in {schema}", String::from_utf8_lossy(&text))
            };
            assert!(p.push(b));
            text.push(b);
        }
        if p.is_complete() {
            complete += 1;
            let text = String::from_utf8(text).expect("UTF-8");
            let value: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert!(validate(schema, schema, &value), "{text} does not validate against {schema}");
        }
    }
    complete
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
            // Closed by `false`, and by declaring properties without
            // saying anything of others (the reader's default).
            let declared = properties.is_some_and(|p| !p.is_empty());
            let closed = schema.get("additionalProperties") == Some(&json!(false))
                || schema.get("additionalProperties").is_none() && declared;
            required.iter().all(|r| r.as_str().is_some_and(|r| map.contains_key(r)))
                && map.iter().all(|(k, v)| match properties.and_then(|p| p.get(k)) {
                    Some(s) => validate(root, s, v),
                    // A required name without a schema of its own is
                    // allowed when nothing is said of other names.
                    None => {
                        !closed
                            || schema.get("additionalProperties").is_none()
                                && required.iter().any(|r| r.as_str() == Some(k.as_str()))
                    }
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

#[test]
fn references_that_fan_out_compile_once_each() {
    // 2^40 paths: a walk of every path would not end.
    let schema = doubling(40);
    let compiled = Schema::compile(&schema).expect("compiles");
    assert!(compiled.nodes.len() <= 2 * 41 + 1, "{} nodes for 41 definitions", compiled.nodes.len());
    match &compiled.nodes[compiled.root as usize] {
        Node::AnyOf(alternatives) => assert_eq!(alternatives.len(), 1, "the anyOfs flatten to their one alternative"),
        other => panic!("the root is {other:?}"),
    }
    assert_eq!(reads(&schema, "null"), (true, true));
    assert!(!reads(&schema, "1").0);
    // The same through a tool's parameters.
    let mut parameters = json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/a0"}}, "required": ["x"]});
    parameters["$defs"] = schema["$defs"].clone();
    let tool = Arc::new(Schema::tool_call([("f", &parameters)]).expect("compiles"));
    let mut p = SchemaPrefix::new(tool);
    assert!(p.push_all(br#"{"name": "f", "arguments": {"x": null}}"#) && p.is_complete());
}

#[test]
fn a_chain_of_references_compiles_without_recursing_along_it() {
    // 1,600 links through `items` (a 95 KB request body): compiled on a
    // thread with a small stack, which a recursion per link overflows.
    let schema = items_chain(1600);
    let document = schema.clone();
    let compiled = std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(move || Schema::compile(&document).map(|s| s.nodes.len()))
        .expect("thread")
        .join()
        .expect("compiling did not overflow the stack");
    assert!(compiled.is_ok(), "{compiled:?}");
    assert_eq!(reads(&schema, "[[[]], []]"), (true, true));
    assert!(!reads(&schema, "[null").0, "the first item is an array");
    // Schemas nested inside schemas are bounded as such.
    let mut deep = json!({"type": "null"});
    for _ in 0..MAX_SCHEMA_NESTING {
        deep = json!({"type": "object", "properties": {"a": deep}});
    }
    assert!(matches!(Schema::compile(&deep), Err(SchemaError::Invalid { .. })));
}

#[test]
fn references_share_their_target_instead_of_copying_it() {
    // 200 links ending in an enum of 20,000 strings, named by 50
    // properties: one copy of the strings.
    let names: Vec<Value> = (0..20_000).map(|i| json!(format!("v{i}"))).collect();
    let one_copy: usize = names.iter().map(|n| serde_json::to_vec(n).expect("JSON").len()).sum();
    let mut defs = serde_json::Map::new();
    for i in 0..200 {
        defs.insert(format!("r{i}"), json!({"$ref": format!("#/$defs/r{}", i + 1)}));
    }
    defs.insert("r200".into(), json!({"enum": names}));
    let properties: serde_json::Map<String, Value> =
        (0..50).map(|i| (format!("a{i}"), json!({"$ref": format!("#/$defs/r{}", i * 4)}))).collect();
    let schema = json!({"$defs": defs, "type": "object", "properties": properties});
    let compiled = Schema::compile(&schema).expect("compiles");
    let held: usize = compiled
        .nodes
        .iter()
        .map(|n| match n {
            Node::Literals(list) => list.iter().map(Vec::len).sum(),
            _ => 0,
        })
        .sum();
    assert_eq!(held, one_copy, "the strings are held once");
    assert_eq!(reads(&schema, r#"{"a3": "v19999", "a49": "v0"}"#), (true, true));
    // What literals may cost is bounded.
    let big: Vec<Value> = (0..40_000).map(|i| json!(format!("{i:032}"))).collect();
    match Schema::compile(&json!({"enum": big})) {
        Err(SchemaError::Invalid { reason, .. }) => assert!(reason.contains("bytes"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_object_with_no_properties_and_no_others_is_written_empty() {
    // OpenAI strict mode's tool without arguments.
    let schema = json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false});
    assert_eq!(reads(&schema, "{}"), (true, true));
    assert_eq!(reads(&schema, "{ }"), (true, true));
    assert!(!reads(&schema, "{\"").0, "no key can be written, so none may start");
    let tool = Arc::new(Schema::tool_call([("get_time", &schema)]).expect("compiles"));
    let read = |text: &str| {
        let mut p = SchemaPrefix::new(tool.clone());
        let ok = p.push_all(text.as_bytes());
        (ok, ok && p.is_complete())
    };
    assert_eq!(read(r#"{"name": "get_time", "arguments": {}}"#), (true, true));
    assert!(!read(r#"{"name": "get_time", "arguments": {""#).0);
    assert_eq!(random_walks(&schema, 50, 7, 2), 50, "every walk closes the object");
}

#[test]
fn required_names_that_need_escapes_are_written_with_them() {
    let schema = json!({
        "type": "object",
        "properties": {"a\"b": {"type": "integer"}, "c\\d": {"type": "null"}, "e\tf": {"type": "boolean"}},
        "required": ["a\"b", "c\\d", "e\tf"],
        "additionalProperties": false,
    });
    assert_eq!(reads(&schema, r#"{"a\"b": 1, "c\\d": null, "e\tf": true}"#), (true, true));
    assert!(!reads(&schema, r#"{"a\u0022b""#).0, "a name is written as JSON writes it compactly");
    assert!(!reads(&schema, r#"{"a"b""#).0);
    assert!(random_walks(&schema, 200, 11, 2) > 0, "some walk closes the object");
    // Names of other keys are still written without escapes.
    let open = json!({"type": "object", "properties": {"q\"": {"type": "null"}}, "additionalProperties": true});
    assert_eq!(reads(&open, r#"{"q\"": null, "x": 1}"#), (true, true));
    assert!(!reads(&open, r#"{"x\n"#).0);
    assert!(!reads(&open, r#"{"q\"x""#).0, "a declared name's escape begins no other name");
}

#[test]
fn a_required_name_listed_twice_is_required_once() {
    let schema = json!({"type": "object", "required": ["a", "a"]});
    assert_eq!(reads(&schema, r#"{"a": 1}"#), (true, true));
    assert!(random_walks(&schema, 100, 13, 2) > 0);
}

#[test]
fn required_nesting_is_served_to_the_depth_read_and_refused_past_it() {
    let deepest = required_chain(MAX_DEPTH);
    let text = format!("{}{{}}{}", "{\"a\":".repeat(MAX_DEPTH - 1), "}".repeat(MAX_DEPTH - 1));
    assert_eq!(reads(&deepest, &text), (true, true));
    // Walks of 400 bytes are too short to close it: they must not stick.
    random_walks(&deepest, 10, 17, 1);
    match Schema::compile(&required_chain(MAX_DEPTH + 1)) {
        Err(SchemaError::Invalid { reason, .. }) => assert!(reason.contains("nesting"), "{reason}"),
        other => panic!("{other:?}"),
    }
    for endless in [
        json!({"$defs": {"n": {"type": "object", "properties": {"n": {"$ref": "#/$defs/n"}}, "required": ["n"]}}, "$ref": "#/$defs/n"}),
        json!({"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}, "minItems": 1}}, "$ref": "#/$defs/n"}),
    ] {
        assert!(matches!(Schema::compile(&endless), Err(SchemaError::Invalid { .. })), "{endless}");
    }
}

#[test]
fn optional_nesting_stops_where_a_value_could_no_longer_close() {
    // Each level may hold another, or an object that needs three levels.
    let schema = json!({
        "$defs": {
            "n": {"type": "object", "properties": {"k": {"anyOf": [{"$ref": "#/$defs/n"}, {"$ref": "#/$defs/deep"}]}},
                  "additionalProperties": false},
            "deep": {"type": "object", "additionalProperties": false, "required": ["x"], "properties": {
                "x": {"type": "object", "additionalProperties": false, "required": ["y"], "properties": {
                    "y": {"type": "object", "additionalProperties": false}}}}},
        },
        "$ref": "#/$defs/n",
    });
    let mut p = prefix(&schema);
    let mut levels = 0;
    while p.clone().push_all(b"{\"k\": ") {
        assert!(p.push_all(b"{\"k\": "));
        levels += 1;
        if levels == MAX_DEPTH - 2 {
            assert!(!p.clone().push_all(b"{\"x\""), "three more levels no longer fit");
        }
    }
    assert_eq!(levels, MAX_DEPTH - 1);
    assert!(p.push_all(b"{}") && p.push_all("}".repeat(levels).as_bytes()) && p.is_complete());
    random_walks(&schema, 50, 19, 4);
}

#[test]
fn integers_are_bounded_in_digits() {
    let schema = json!({"type": "array", "items": {"type": "number"}});
    let most = "9".repeat(MAX_INTEGER_DIGITS as usize);
    assert_eq!(reads(&schema, &format!("[-{most}e99]")), (true, true));
    let value: Value = serde_json::from_str(&format!("-{most}e99")).expect("JSON");
    assert!(value.as_f64().is_some_and(f64::is_finite), "the largest number read is finite");
    assert!(!reads(&schema, &format!("[{most}9")).0);
    assert!(!reads(&schema, &format!("[-{most}0")).0);
}

#[test]
fn random_schemas_are_refused_or_served_to_a_close() {
    let mut generator = SchemaGen::new(0x2545_f491_4f6c_dd1d);
    let (mut served, mut refused, mut closed) = (0, 0, 0);
    for i in 0..300 {
        let schema = generator.document();
        match Schema::compile(&schema) {
            Err(_) => refused += 1,
            Ok(_) => {
                served += 1;
                closed += random_walks(&schema, 8, i + 1, 2);
            }
        }
    }
    assert!(served > 150 && refused > 0, "{served} served, {refused} refused");
    assert!(closed > served * 4, "{closed} walks closed over {served} schemas");
}

#[test]
fn declared_properties_are_the_only_ones_unless_others_are_allowed() {
    let declared = json!({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}});
    assert_eq!(reads(&declared, r#"{"name": "Jo", "age": 3}"#), (true, true));
    assert!(!reads(&declared, r#"{"name": "Jo", "type""#).0, "no key the schema does not declare");
    let open = json!({"type": "object", "properties": {"name": {"type": "string"}}, "additionalProperties": true});
    assert_eq!(reads(&open, r#"{"name": "Jo", "type": 1}"#), (true, true));
    let bare = json!({"type": "object"});
    assert_eq!(reads(&bare, r#"{"anything": [1]}"#), (true, true), "an object that declares nothing takes any names");
    let required_elsewhere = json!({"type": "object", "properties": {"a": {"type": "null"}}, "required": ["b"]});
    assert_eq!(reads(&required_elsewhere, r#"{"b": 1}"#), (true, true), "a required name is declared by requiring it");
    assert!(!reads(&required_elsewhere, r#"{"b": 1, "c""#).0);
}
