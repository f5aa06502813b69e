//! `response_format: {"type": "json_object"}`: the answer is held to one
//! JSON object (a valid prefix of one while it runs out of tokens, a whole
//! one when it ends with `stop`), whole and streamed; `json_schema` to a
//! text the schema accepts; other formats, and schemas that cannot be
//! held, get 400. llama-server's forms of a schema (`json_object` with
//! its `schema`, a `json_schema` field) hold the answer the same way.

use baton_gen::constraint::GrammarSource;
use serde_json::{json, Value};

use crate::server::*;

fn holds_to_an_object(server: &Server, text: &str, finish: &str) {
    assert!(held_to(server, &GrammarSource::JsonObject, text, false), "not the start of a JSON object: {text:?}");
    if finish == "stop" {
        assert!(held_to(server, &GrammarSource::JsonObject, text, true), "{text:?} ended before its object closed");
        let value: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert!(value.is_object(), "{text:?}");
    }
}

/// The request streamed gives the whole answer's text and finish.
fn streams_as_whole(server: &Server, request: &Value, text: &str, finish: &str) {
    let mut streamed = request.clone();
    streamed["stream"] = json!(true);
    let (status, events) = server.stream("/v1/chat/completions", &streamed);
    assert_eq!(status, 200);
    let (stream_text, stream_finish, _) = read_stream(&events, true);
    assert_eq!((stream_text.as_str(), stream_finish.as_str()), (text, finish), "streamed as whole");
}

#[test]
fn json_object_answers_are_json_objects() {
    let server = Server::start(2, 8, 256);
    let mut stops = 0;
    for seed in 0..6 {
        let request = json!({
            "messages": [{"role": "user", "content": "data"}],
            "max_tokens": 48, "temperature": 1.0, "seed": seed,
            "response_format": {"type": "json_object"},
        });
        let (status, body) = server.post("/v1/chat/completions", &request);
        assert_eq!(status, 200, "{body}");
        let choice = &body["choices"][0];
        let (text, finish) = (
            choice["message"]["content"].as_str().expect("content"),
            choice["finish_reason"].as_str().expect("finish"),
        );
        holds_to_an_object(&server, text, finish);
        stops += usize::from(finish == "stop");
        streams_as_whole(&server, &request, text, finish);
    }
    eprintln!("{stops} of 6 objects closed within 48 tokens");
    // Completions take it too.
    let (status, body) = server.post(
        "/v1/completions",
        &json!({"prompt": "x", "max_tokens": 24, "seed": 1, "response_format": {"type": "json_object"}}),
    );
    assert_eq!(status, 200, "{body}");
    holds_to_an_object(
        &server,
        body["choices"][0]["text"].as_str().expect("text"),
        body["choices"][0]["finish_reason"].as_str().expect("finish"),
    );
}

#[test]
fn other_response_formats_are_refused() {
    let server = Server::start(1, 4, 64);
    for format in [
        json!({"type": "json_schema", "json_schema": {"schema": {"type": "string", "pattern": "a("}}}),
        json!({"type": "json_schema", "json_schema": {"schema": {"type": "text"}}}),
        json!({"type": "json_schema", "json_schema": {"schema": {"type": "integer", "minimum": 3, "maximum": 1}}}),
        json!({"type": "json_schema", "json_schema": {"schema": "x"}}),
        json!({"type": "json_schema", "json_schema": {"name": 3, "schema": {}}}),
        json!({"type": "json_schema", "json_schema": "x"}),
        json!({"type": "json_schema"}),
        json!({"type": "yaml"}),
        json!("json"),
        json!({}),
    ] {
        let request = json!({"messages": [{"role": "user", "content": "x"}], "response_format": format});
        let (status, body) = server.post("/v1/chat/completions", &request);
        assert_eq!(status, 400, "{format}: {body}");
        assert_eq!(body["error"]["param"], "response_format", "{body}");
    }
    // The construct that cannot be held is named.
    let request = json!({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema",
        "json_schema": {"schema": {"properties": {"a": {"$ref": "#/$defs/missing"}}}}}});
    let message = server.post("/v1/chat/completions", &request).1["error"]["message"].to_string();
    assert!(message.contains("missing"), "{message}");
    let request =
        json!({"messages": [{"role": "user", "content": "x"}], "max_tokens": 2, "response_format": {"type": "text"}});
    assert_eq!(server.post("/v1/chat/completions", &request).0, 200);
}

/// A schema of the kind structured-output clients send.
fn order_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "item": {"enum": ["tea", "coffee", "cake"]},
            "count": {"type": "integer"},
            "urgent": {"type": "boolean"},
            "note": {"anyOf": [{"type": "string", "maxLength": 8}, {"type": "null"}]},
        },
        "required": ["item", "count", "urgent", "note"],
        "additionalProperties": false,
    })
}

#[test]
fn json_schema_answers_follow_the_schema() {
    let server = Server::start(2, 8, 512);
    let source = GrammarSource::JsonSchema(order_schema());
    let mut stops = 0;
    for seed in 0..6 {
        let request = json!({
            "messages": [{"role": "user", "content": "order"}],
            "max_tokens": 96, "temperature": 0.8, "seed": seed,
            "response_format": {"type": "json_schema", "json_schema": {"name": "order", "strict": true, "schema": order_schema()}},
        });
        let (status, body) = server.post("/v1/chat/completions", &request);
        assert_eq!(status, 200, "{body}");
        let choice = &body["choices"][0];
        let text = choice["message"]["content"].as_str().expect("content");
        let finish = choice["finish_reason"].as_str().expect("finish");
        assert!(held_to(&server, &source, text, false), "not the start of an order: {text:?}");
        if finish == "stop" {
            stops += 1;
            assert!(held_to(&server, &source, text, true), "{text:?}");
            let order: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            assert!(["tea", "coffee", "cake"].contains(&order["item"].as_str().expect("item")), "{order}");
            assert!(order["count"].is_i64() && order["urgent"].is_boolean(), "{order}");
            assert!(order["note"].is_null() || order["note"].as_str().is_some_and(|n| n.chars().count() <= 8));
            assert_eq!(order.as_object().map(|o| o.len()), Some(4), "{order}");
        }
        streams_as_whole(&server, &request, text, finish);
    }
    eprintln!("{stops} of 6 orders closed");
    assert!(stops > 0, "no order closed within 96 tokens");
}

#[test]
fn llama_servers_schema_fields_hold_the_answer_too() {
    let server = Server::start(1, 4, 256);
    let chat = |extra: Value| {
        let mut body = json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "temperature": 0});
        for (key, value) in extra.as_object().expect("an object") {
            body[key] = value.clone();
        }
        server.post("/v1/chat/completions", &body)
    };
    // `json_object` with its `schema`, and `json_schema` beside the messages.
    for extra in [
        json!({"response_format": {"type": "json_object", "schema": {"const": "42"}}}),
        json!({"json_schema": {"const": "42"}}),
    ] {
        let (status, body) = chat(extra.clone());
        assert_eq!(status, 200, "{extra}: {body}");
        assert_eq!(body["choices"][0]["message"]["content"], "\"42\"", "{extra}: {body}");
    }
    let (status, body) =
        server.post("/completion", &json!({"prompt": "hi", "n_predict": 8, "json_schema": {"enum": ["yes", "no"]}}));
    assert_eq!(status, 200, "{body}");
    assert!(["\"yes\"", "\"no\""].contains(&body["content"].as_str().expect("content")), "{body}");
    for (extra, what) in [
        (json!({"response_format": {"type": "json_object", "schema": 123}}), "a schema that is a number"),
        (json!({"json_schema": {"const": 1}, "response_format": {"type": "json_object"}}), "two formats"),
        (json!({"json_schema": {"const": 1}, "grammar": "root ::= \"a\""}), "a schema and a grammar"),
    ] {
        let (status, body) = chat(extra);
        error_of(status, &body, 400, what);
    }
}
