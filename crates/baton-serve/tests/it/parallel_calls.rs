//! `parallel_tool_calls` on `/v1/chat/completions`: `false` (and absent,
//! llama-server's default) keeps a required call held and answers one
//! call; `true` lets an answer hold several calls, each held to the
//! tools, whole and streamed; an answer `max_tokens` cuts inside a later
//! call answers the whole calls before it with `finish_reason: "length"`;
//! a value that is not a boolean gets 400.

use serde_json::{json, Value};

use baton_model::baton_tokenizer::TokenType;
use baton_serve::http::tools::MAX_CALLS;

use crate::server::*;

fn tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_time",
            "parameters": {"type": "object", "properties": {"zone": {"enum": ["UTC", "CET"]}},
            "required": ["zone"], "additionalProperties": false}}},
        {"type": "function", "function": {"name": "get_day",
            "parameters": {"type": "object", "properties": {"short": {"type": "boolean"}},
            "required": ["short"], "additionalProperties": false}}},
    ])
}

/// The names of a whole answer's calls, each checked against the tools.
fn calls_of(answer: &Value) -> Vec<String> {
    let listed = answer["message"]["tool_calls"].as_array().expect("tool_calls");
    listed
        .iter()
        .enumerate()
        .map(|(i, call)| {
            let arguments: Value =
                serde_json::from_str(call["function"]["arguments"].as_str().expect("arguments")).expect("JSON");
            let name = call["function"]["name"].as_str().expect("name");
            match name {
                "get_time" => assert!(["UTC", "CET"].contains(&arguments["zone"].as_str().expect("zone"))),
                "get_day" => assert!(arguments["short"].is_boolean(), "{arguments}"),
                other => panic!("no tool is named {other}"),
            }
            let id = call["id"].as_str().expect("id");
            assert!(listed[..i].iter().all(|c| c["id"] != id), "call ids differ: {answer}");
            name.to_string()
        })
        .collect()
}

fn request(seed: usize, parallel: Option<bool>) -> Value {
    let mut request = json!({
        "messages": [{"role": "user", "content": "time and day?"}],
        "tools": tools(), "tool_choice": "required", "max_tokens": 160, "temperature": 1.0, "seed": seed,
    });
    if let Some(parallel) = parallel {
        request["parallel_tool_calls"] = json!(parallel);
    }
    request
}

/// The control tokens of the served vocabulary, each banned: as
/// `logit_bias` pairs.
fn banned_control_tokens(server: &Server) -> Value {
    let tokenizer = server.engine.tokenizer().clone();
    let control: Vec<Value> = (0..tokenizer.vocab_size() as u32)
        .filter(|&id| tokenizer.token_type(id).is_ok_and(|t| t == TokenType::Control))
        .map(|id| json!([id, false]))
        .collect();
    assert!(!control.is_empty(), "the vocabulary has control tokens");
    Value::Array(control)
}

#[test]
fn parallel_tool_calls_false_or_absent_answers_one_held_call() {
    let server = Server::start(2, 8, 1024);
    let banned = banned_control_tokens(&server);
    let mut called = 0;
    for seed in 0..8 {
        // Half absent, half false; half with the control tokens banned
        // (which, with several calls allowed, would make it go on).
        let mut request = request(seed, (seed % 4 < 2).then_some(false));
        if seed % 2 == 1 {
            request["logit_bias"] = banned.clone();
        }
        let (status, body) = server.post("/v1/chat/completions", &request);
        assert_eq!(status, 200, "{body}");
        let answer = &body["choices"][0];
        if answer["finish_reason"] == "tool_calls" {
            assert_eq!(calls_of(answer).len(), 1, "one call: {answer}");
            called += 1;
        } else {
            assert_eq!(answer["finish_reason"], "length", "held to the call, not text: {answer}");
        }
    }
    assert!(called >= 6, "only {called} of 8 answers closed their call");
}

/// The tiny model's random weights mostly end an answer at the first
/// chance (a control token may end it after each call); with the control
/// tokens banned (`logit_bias`) on half the requests, an answer can only
/// go on to another call, as a model asked for several does, up to
/// [`MAX_CALLS`].
#[test]
fn parallel_tool_calls_let_an_answer_hold_several_calls_whole_and_streamed() {
    let server = Server::start(2, 8, 2048);
    let banned = banned_control_tokens(&server);
    let (mut several, mut called) = (0, 0);
    for seed in 0..16 {
        let mut request = request(seed, Some(true));
        if seed % 2 == 1 {
            request["logit_bias"] = banned.clone();
            request["max_tokens"] = json!(800);
        }
        let (status, body) = server.post("/v1/chat/completions", &request);
        assert_eq!(status, 200, "{body}");
        let answer = &body["choices"][0];
        if answer["finish_reason"] != "tool_calls" {
            assert_eq!(answer["finish_reason"], "length", "{answer}");
            continue;
        }
        called += 1;
        let names = calls_of(answer);
        if names.len() > 1 {
            several += 1;
            assert!(names.len() <= MAX_CALLS, "at most {MAX_CALLS} calls: {answer}");
        }
        // Streamed: the same calls in one delta, each with its index.
        let (streamed_names, _) = streamed_calls(&server, &request);
        assert_eq!(streamed_names, names, "streamed as whole");
    }
    assert!(called >= 10, "only {called} of 16 answers closed their calls");
    assert!(several >= 4, "{several} of {called} answers held more than one call");
}

/// The names of the calls `request` streamed and its finish reason.
fn streamed_calls(server: &Server, request: &Value) -> (Vec<String>, String) {
    let (deltas, finish) = streamed_tool_calls(server, request);
    (deltas.iter().map(|c| c["function"]["name"].as_str().expect("name").to_string()).collect(), finish)
}

/// With the control tokens banned, an answer goes on from call to call
/// until `max_tokens` cuts one: the calls before it come back whole (the
/// cut one left out), `finish_reason: "length"`, streamed as whole.
#[test]
fn calls_cut_by_max_tokens_answer_the_whole_ones_with_length() {
    let server = Server::start(2, 8, 2048);
    let banned = banned_control_tokens(&server);
    let mut cut_after_calls = 0;
    for seed in 0..12 {
        let mut request = request(seed, Some(true));
        request["logit_bias"] = banned.clone();
        request["max_tokens"] = json!(40 + 13 * seed);
        let (status, body) = server.post("/v1/chat/completions", &request);
        assert_eq!(status, 200, "{body}");
        let answer = &body["choices"][0];
        let finish = answer["finish_reason"].as_str().expect("finish");
        let names = match answer["message"].get("tool_calls") {
            Some(calls) if calls.is_array() => {
                assert!(answer["message"]["content"].is_null(), "calls, not text: {answer}");
                calls_of(answer)
            }
            _ => Vec::new(),
        };
        if finish == "length" && !names.is_empty() {
            cut_after_calls += 1;
        }
        let streamed = streamed_calls(&server, &request);
        assert_eq!(streamed, (names, finish.to_string()), "streamed as whole");
    }
    assert!(cut_after_calls >= 3, "only {cut_after_calls} of 12 answers were cut after a whole call");
}

#[test]
fn parallel_tool_calls_of_the_wrong_type_get_400() {
    let server = Server::start(1, 4, 1024);
    for value in [json!("false"), json!(1), json!({})] {
        let mut request = request(0, None);
        request["parallel_tool_calls"] = value.clone();
        let (status, body) = server.post("/v1/chat/completions", &request);
        error_of(status, &body, 400, &format!("parallel_tool_calls = {value}"));
        assert_eq!(body["error"]["param"], "parallel_tool_calls", "{body}");
    }
    let mut request = request(0, None);
    request["parallel_tool_calls"] = Value::Null;
    request["max_tokens"] = json!(4);
    let (status, body) = server.post("/v1/chat/completions", &request);
    assert_eq!(status, 200, "null is the default: {body}");
}
