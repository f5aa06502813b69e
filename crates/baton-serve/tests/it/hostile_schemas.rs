//! Hostile schemas (issue 51): shapes that froze the server (2^40 paths
//! through `anyOf`s), aborted it (a chain of 1,600 `$ref`s), or stuck
//! their answers with a 500 (an empty closed object, names that need
//! escapes, required nesting), and random compositions of the served
//! keywords. Each gets 400 or an answer held to its schema (whole when it
//! ends with `stop`), while `/health` answers and a fixed greedy request
//! keeps its text.

use std::time::{Duration, Instant};

use baton_gen::constraint::GrammarSource;
use baton_serve::http::ServerOptions;
use baton_testkit::schemas::{doubling, items_chain, required_chain, SchemaGen};
use serde_json::{json, Value};

use crate::hostile::{check_alive, reference};
use crate::server::*;

/// A server that takes bodies up to the default megabyte, with `context`
/// positions a sequence (a tool's parameters are in its prompt).
fn server(context: usize) -> Server {
    Server::start_with(2, 8, context, ServerOptions { body_limit: 1 << 20, ..ServerOptions::default() })
}

fn schema_request(schema: &Value, seed: u64) -> Value {
    json!({
        "messages": [{"role": "user", "content": "data"}],
        "max_tokens": 48, "temperature": 1.5, "seed": seed,
        "response_format": {"type": "json_schema", "json_schema": {"name": "t", "schema": schema}},
    })
}

fn tool_request(parameters: &Value, seed: u64) -> Value {
    json!({
        "messages": [{"role": "user", "content": "What time is it?"}],
        "max_tokens": 48, "temperature": 1.5, "seed": seed, "tool_choice": "required",
        "tools": [{"type": "function", "function": {"name": "get_time", "parameters": parameters}}],
    })
}

/// Whether the answer to `request` was refused with a 400 in the error
/// shape (`false`) or served held to `schema` (`true`): a prefix of a text
/// it accepts, whole when the answer ends with `stop`.
fn refused_or_held(server: &Server, request: &Value, schema: &Value) -> bool {
    let what = request.to_string();
    let what = &what[..what.len().min(300)];
    let (status, body) = server.post("/v1/chat/completions", request);
    if status == 400 {
        error_of(status, &body, 400, what);
        return false;
    }
    assert_eq!(status, 200, "{what}: {body}");
    let choice = &body["choices"][0];
    let text = choice["message"]["content"].as_str().unwrap_or_else(|| panic!("{what}: {body}"));
    let finish = choice["finish_reason"].as_str().expect("finish_reason");
    let source = GrammarSource::JsonSchema(schema.clone());
    assert!(held_to(server, &source, text, false), "{what}: {text:?} is not held to the schema");
    if finish == "stop" {
        assert!(held_to(server, &source, text, true), "{what}: {text:?} ended with stop before its text was whole");
        serde_json::from_str::<Value>(text).unwrap_or_else(|e| panic!("{what}: {text:?}: {e}"));
    }
    true
}

#[test]
fn a_schema_of_exponentially_many_paths_is_answered_while_health_answers() {
    let server = server(4096);
    let expected = reference(&server);
    let fan = doubling(40);
    let parameters = json!({"$defs": fan["$defs"], "type": "object", "properties": {"x": {"$ref": "#/$defs/a0"}}});
    let slowest = std::thread::scope(|scope| {
        let a = scope.spawn(|| refused_or_held(&server, &schema_request(&fan, 1), &fan));
        let b = scope.spawn(|| server.post("/v1/chat/completions", &tool_request(&parameters, 2)));
        let mut slowest = Duration::ZERO;
        while !(a.is_finished() && b.is_finished()) {
            let asked = Instant::now();
            let (status, health) = server.call("GET", "/health", b"");
            assert_eq!(status, 200, "{health}");
            slowest = slowest.max(asked.elapsed());
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(a.join().expect("the schema request"), "2^40 paths through anyOfs are served");
        let (status, body) = b.join().expect("the tool request");
        assert_eq!(status, 200, "{body}");
        slowest
    });
    // A bound for a loaded machine; the compile takes milliseconds.
    assert!(slowest < Duration::from_secs(5), "/health took {slowest:?} while the schemas compiled");
    eprintln!("slowest /health while the schemas compiled: {slowest:?}");
    check_alive(&server, &expected, "the schemas of 2^40 paths");
}

#[test]
fn schemas_that_crashed_or_stuck_answers_are_served_to_a_close() {
    let server = server(1024);
    let expected = reference(&server);
    // 1,600 `$ref`s through `items` (95 KB): aborted the process.
    let chain = items_chain(1600);
    assert!(refused_or_held(&server, &schema_request(&chain, 3), &chain));
    // Deep required nesting is served (65 levels were past the old
    // reader's limit; the grammar engine has none of its own).
    for levels in [64, 65, 200] {
        assert!(refused_or_held(&server, &schema_request(&required_chain(levels), 4), &required_chain(levels)));
    }
    // Names that need escapes, and a name required twice.
    let escaped = json!({
        "type": "object", "additionalProperties": false,
        "properties": {"a\"b": {"type": "null"}, "c\\d": {"type": "null"}, "e\tf": {"type": "null"}},
        "required": ["a\"b", "c\\d", "e\tf"],
    });
    let twice = json!({"type": "object", "required": ["a", "a"], "additionalProperties": {"type": "null"}});
    for seed in 0..3 {
        assert!(refused_or_held(&server, &schema_request(&escaped, seed), &escaped));
        assert!(refused_or_held(&server, &schema_request(&twice, seed), &twice));
    }
    // OpenAI strict mode's tool without arguments: a call every time.
    let none = json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false});
    let mut calls = 0;
    for seed in 0..4 {
        let (status, body) = server.post("/v1/chat/completions", &tool_request(&none, seed));
        assert_eq!(status, 200, "{body}");
        let choice = &body["choices"][0];
        if choice["finish_reason"] == "tool_calls" {
            let call = &choice["message"]["tool_calls"][0]["function"];
            assert_eq!((&call["name"], &call["arguments"]), (&json!("get_time"), &json!("{}")), "{body}");
            calls += 1;
        } else {
            assert_eq!(choice["finish_reason"], "length", "{body}");
        }
    }
    assert!(calls > 0, "no call closed within 48 tokens");
    check_alive(&server, &expected, "the schemas that crashed or stuck");
}

#[test]
fn stop_strings_do_not_cut_a_schema_held_answer() {
    let server = server(256);
    let schema = json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
                        "additionalProperties": false});
    for seed in 0..3 {
        let mut request = schema_request(&schema, seed);
        request["stop"] = json!(["\"", ","]);
        let (status, body) = server.post("/v1/chat/completions", &request);
        assert_eq!(status, 200, "{body}");
        let text = body["choices"][0]["message"]["content"].as_str().expect("content");
        assert!(text.contains("\"a\""), "the answer was cut at a stop string: {text:?}");
        assert!(refused_or_held(&server, &request, &schema));
    }
}

#[test]
fn random_schemas_are_refused_or_served_to_a_close() {
    let server = server(256);
    let expected = reference(&server);
    let mut generator = SchemaGen::new(0x5851_f42d_4c95_7f2d);
    let (mut served, mut refused) = (0, 0);
    for seed in 0..40 {
        let schema = generator.document();
        if refused_or_held(&server, &schema_request(&schema, seed), &schema) {
            served += 1;
        } else {
            refused += 1;
        }
        check_alive(&server, &expected, &schema.to_string());
    }
    assert!(served > 20, "{served} served, {refused} refused");
}
