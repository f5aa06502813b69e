//! `response_format: {"type": "json_object"}`: the answer is held to one
//! JSON object (a valid prefix of one while it runs out of tokens, a whole
//! one when it ends with `stop`), whole and streamed; other formats get 400.

use baton_llama::constraint::JsonPrefix;
use serde_json::{json, Value};

use crate::server::*;

fn holds_to_an_object(text: &str, finish: &str) {
    let mut prefix = JsonPrefix::object();
    assert!(prefix.push_all(text.as_bytes()), "not the start of a JSON object: {text:?}");
    if finish == "stop" {
        assert!(prefix.is_complete(), "{text:?} ended before its object closed");
        let value: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert!(value.is_object(), "{text:?}");
    }
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
        holds_to_an_object(text, finish);
        stops += usize::from(finish == "stop");
        let mut streamed = request.clone();
        streamed["stream"] = json!(true);
        let (status, events) = server.stream("/v1/chat/completions", &streamed);
        assert_eq!(status, 200);
        let (stream_text, stream_finish, _) = read_stream(&events, true);
        assert_eq!((stream_text.as_str(), stream_finish.as_str()), (text, finish), "streamed as whole");
    }
    eprintln!("{stops} of 6 objects closed within 48 tokens");
    // Completions take it too.
    let (status, body) = server.post(
        "/v1/completions",
        &json!({"prompt": "x", "max_tokens": 24, "seed": 1, "response_format": {"type": "json_object"}}),
    );
    assert_eq!(status, 200, "{body}");
    holds_to_an_object(
        body["choices"][0]["text"].as_str().expect("text"),
        body["choices"][0]["finish_reason"].as_str().expect("finish"),
    );
}

#[test]
fn other_response_formats_are_refused() {
    let server = Server::start(1, 4, 64);
    for format in [
        json!({"type": "json_schema", "json_schema": {"schema": {}}}),
        json!({"type": "yaml"}),
        json!("json"),
        json!({}),
    ] {
        let request = json!({"messages": [{"role": "user", "content": "x"}], "response_format": format});
        let (status, body) = server.post("/v1/chat/completions", &request);
        assert_eq!(status, 400, "{format}: {body}");
        assert_eq!(body["error"]["param"], "response_format", "{body}");
    }
    let request =
        json!({"messages": [{"role": "user", "content": "x"}], "max_tokens": 2, "response_format": {"type": "text"}});
    assert_eq!(server.post("/v1/chat/completions", &request).0, 200);
}
