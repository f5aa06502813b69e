//! `POST /v1/messages` (Anthropic's Messages API) and
//! `/v1/messages/count_tokens`: the chat completions' answer in
//! Anthropic's shape, whole and as its event stream; stop sequences
//! named; a tool call and its result round trip; bad requests get 400 in
//! Anthropic's error shape; `x-api-key` is a key.

use baton_serve::http::{ApiKeys, ServerOptions};
use serde_json::{json, Value};

use crate::server::*;

fn tools() -> Value {
    json!([
        {"name": "get_weather", "description": "The weather of a city",
            "input_schema": {"type": "object", "properties": {
                "city": {"type": "string", "maxLength": 12},
                "unit": {"enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"], "additionalProperties": false}},
        {"name": "get_time",
            "input_schema": {"type": "object", "properties": {"zone": {"enum": ["UTC", "CET"]}},
            "required": ["zone"], "additionalProperties": false}},
    ])
}

/// A whole message's text (its text blocks) and tool use, checking its
/// shape.
fn read_message(body: &Value) -> (String, Option<Value>) {
    assert!(body["id"].as_str().is_some_and(|id| id.starts_with("msg_")), "{body}");
    assert_eq!(
        (&body["type"], &body["role"], &body["model"]),
        (&json!("message"), &json!("assistant"), &json!("tiny"))
    );
    assert!(body["usage"]["input_tokens"].as_u64().is_some_and(|n| n > 0), "{body}");
    let (mut text, mut call) = (String::new(), None);
    for block in body["content"].as_array().expect("content") {
        match block["type"].as_str() {
            Some("text") => text.push_str(block["text"].as_str().expect("text")),
            Some("tool_use") => {
                assert!(block["id"].as_str().is_some_and(|id| id.starts_with("toolu_")), "{block}");
                assert!(block["input"].is_object(), "{block}");
                assert!(call.replace(block.clone()).is_none(), "one call: {body}");
            }
            _ => panic!("a block of another type: {body}"),
        }
    }
    (text, call)
}

/// A stream's text, tool use (its input parsed), stop reason and output
/// tokens, checking the events' order.
fn read_events(events: &[(String, Value)]) -> (String, Option<Value>, Value, u64) {
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names[..2], ["message_start", "ping"], "{names:?}");
    assert_eq!(names[names.len() - 2..], ["message_delta", "message_stop"], "{names:?}");
    assert_eq!(events[0].1["message"]["content"], json!([]));
    let (mut text, mut call, mut open): (String, Option<Value>, Option<u64>) = (String::new(), None, None);
    let mut index = 0;
    for (name, data) in &events[2..events.len() - 2] {
        match name.as_str() {
            "content_block_start" => {
                assert!(open.is_none(), "a block opened inside another: {names:?}");
                assert_eq!(data["index"], index, "{data}");
                open = Some(index);
                if data["content_block"]["type"] == "tool_use" {
                    let mut block = data["content_block"].clone();
                    block["input"] = json!("");
                    call = Some(block);
                }
            }
            "content_block_delta" => {
                assert_eq!(data["index"].as_u64(), open, "{data}");
                match data["delta"]["type"].as_str() {
                    Some("text_delta") => text.push_str(data["delta"]["text"].as_str().expect("text")),
                    Some("input_json_delta") => {
                        let block = call.as_mut().expect("a tool_use block is open");
                        let so_far = block["input"].as_str().unwrap_or("").to_string();
                        block["input"] = json!(so_far + data["delta"]["partial_json"].as_str().expect("json"));
                    }
                    other => panic!("a delta of type {other:?}"),
                }
            }
            "content_block_stop" => {
                assert_eq!(data["index"].as_u64(), open.take(), "{data}");
                index += 1;
            }
            other => panic!("an event {other} among the blocks: {names:?}"),
        }
    }
    assert!(open.is_none(), "a block left open: {names:?}");
    if let Some(block) = call.as_mut() {
        let input = block["input"].as_str().expect("input").to_string();
        block["input"] = serde_json::from_str(&input).unwrap_or_else(|e| panic!("{input}: {e}"));
    }
    let delta = &events[events.len() - 2].1;
    let output = delta["usage"]["output_tokens"].as_u64().expect("output tokens");
    (text, call, delta["delta"].clone(), output)
}

#[test]
fn messages_answer_as_chat_completions_whole_and_streamed() {
    let server = Server::start(2, 8, 1024);
    let request = json!({
        "model": "claude-sonnet-4-5", "max_tokens": 12, "temperature": 0, "metadata": {"user_id": "u"},
        "system": [{"type": "text", "text": "Be brief."}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hello"}]}],
    });
    let (status, body) = server.post("/v1/messages", &request);
    assert_eq!(status, 200, "{body}");
    let (text, call) = read_message(&body);
    assert!(call.is_none());
    let reason = body["stop_reason"].as_str().expect("stop_reason");
    assert!(["end_turn", "max_tokens"].contains(&reason), "{body}");
    let output = body["usage"]["output_tokens"].as_u64().expect("output tokens");
    assert!(output <= 12 && (reason == "end_turn" || output == 12), "{body}");

    // The same conversation on chat completions: the same prompt and text.
    let chat = json!({"max_tokens": 12, "temperature": 0, "messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello"}]});
    let (status, answer) = server.post("/v1/chat/completions", &chat);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["choices"][0]["message"]["content"], json!(text));
    assert_eq!(answer["usage"]["prompt_tokens"], body["usage"]["input_tokens"]);
    let (status, counted) = server.post("/v1/messages/count_tokens", &request);
    assert_eq!((status, &counted["input_tokens"]), (200, &body["usage"]["input_tokens"]), "{counted}");

    let mut streamed = request.clone();
    streamed["stream"] = json!(true);
    let (_, events) = server.named_stream("/v1/messages", &streamed);
    let (stream_text, stream_call, delta, stream_output) = read_events(&events);
    assert_eq!((stream_text, stream_call, stream_output), (text, None, output), "streamed as whole");
    assert_eq!(delta["stop_reason"], reason);
    assert_eq!(events[0].1["message"]["usage"]["input_tokens"], body["usage"]["input_tokens"]);
}

#[test]
fn a_stop_sequence_ends_the_text_and_is_named() {
    let server = Server::start(1, 4, 1024);
    let ask = |stops: Value, stream: bool| {
        json!({"max_tokens": 24, "temperature": 0, "stop_sequences": stops, "stream": stream,
            "messages": [{"role": "user", "content": "count"}]})
    };
    let (status, body) = server.post("/v1/messages", &ask(json!([]), false));
    assert_eq!(status, 200, "{body}");
    let (text, _) = read_message(&body);
    let chars: Vec<char> = text.chars().collect();
    assert!(chars.len() >= 6, "the tiny model's greedy text is too short to cut: {text:?}");
    let stop: String = chars[3..5].iter().collect();
    let before = &text[..text.find(&stop).expect("found")];
    let (status, body) = server.post("/v1/messages", &ask(json!(["\u{1}never", stop]), false));
    assert_eq!(status, 200, "{body}");
    assert_eq!(read_message(&body).0, before);
    assert_eq!((&body["stop_reason"], &body["stop_sequence"]), (&json!("stop_sequence"), &json!(stop)), "{body}");
    let (_, events) = server.named_stream("/v1/messages", &ask(json!([stop]), true));
    let (streamed, _, delta, _) = read_events(&events);
    assert_eq!(streamed, before);
    assert_eq!(delta, json!({"stop_reason": "stop_sequence", "stop_sequence": stop}));
}

#[test]
fn a_tool_use_and_its_result_round_trip() {
    let server = Server::start(2, 8, 1024);
    let mut found = None;
    for seed in 0..8 {
        let request = json!({
            "max_tokens": 96, "temperature": 0.7, "seed": seed, "tools": tools(), "tool_choice": {"type": "any"},
            "messages": [{"role": "user", "content": "weather in Oslo?"}],
        });
        let (status, body) = server.post("/v1/messages", &request);
        assert_eq!(status, 200, "{body}");
        let (_, call) = read_message(&body);
        let mut streamed = request.clone();
        streamed["stream"] = json!(true);
        let (_, events) = server.named_stream("/v1/messages", &streamed);
        let (_, stream_call, delta, _) = read_events(&events);
        assert_eq!(delta["stop_reason"], body["stop_reason"], "streamed as whole");
        let Some(call) = call else {
            assert_eq!(body["stop_reason"], "max_tokens", "{body}");
            continue;
        };
        assert_eq!(body["stop_reason"], "tool_use", "{body}");
        assert_eq!(
            stream_call.map(|c| (c["name"].clone(), c["input"].clone())),
            Some((call["name"].clone(), call["input"].clone()))
        );
        found = Some((call, body["usage"]["input_tokens"].clone()));
        break;
    }
    let (call, asked_tokens) = found.expect("no tool_use closed within 96 tokens in 8 tries");
    let name = call["name"].as_str().expect("name");
    assert!(["get_weather", "get_time"].contains(&name), "{call}");

    // The call and its result sent back: a longer prompt, answered.
    let request = json!({"max_tokens": 8, "tools": tools(), "messages": [
        {"role": "user", "content": "weather in Oslo?"},
        {"role": "assistant", "content": [call.clone()]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"],
            "content": [{"type": "text", "text": "3 degrees"}]}]},
    ]});
    let (status, body) = server.post("/v1/messages", &request);
    assert_eq!(status, 200, "{body}");
    assert!(body["usage"]["input_tokens"].as_u64() > asked_tokens.as_u64(), "{body}");

    // A named tool is the one called.
    for seed in 0..8 {
        let request = json!({"max_tokens": 64, "temperature": 0.7, "seed": seed, "tools": tools(),
            "tool_choice": {"type": "tool", "name": "get_time"}, "messages": [{"role": "user", "content": "time?"}]});
        let (_, body) = server.post("/v1/messages", &request);
        if let (_, Some(call)) = read_message(&body) {
            assert_eq!(call["name"], "get_time", "{body}");
            assert!(["UTC", "CET"].contains(&call["input"]["zone"].as_str().expect("zone")), "{call}");
            return;
        }
    }
    panic!("no get_time call closed within 64 tokens in 8 tries");
}

#[test]
fn bad_requests_get_anthropic_errors_and_the_server_serves_on() {
    let server = Server::start(1, 4, 512);
    let user = json!([{"role": "user", "content": "x"}]);
    for (what, request) in [
        ("no max_tokens", json!({"messages": user})),
        ("no messages", json!({"max_tokens": 4})),
        ("content of the wrong type", json!({"max_tokens": 4, "messages": [{"role": "user", "content": 3}]})),
        (
            "an unknown block type",
            json!({"max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "video"}]}]}),
        ),
        (
            "an image",
            json!({"max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]}),
        ),
        ("a system turn", json!({"max_tokens": 4, "messages": [{"role": "system", "content": "x"}]})),
        ("max_tokens of the wrong type", json!({"max_tokens": "4", "messages": user})),
        ("max_tokens 0", json!({"max_tokens": 0, "messages": user})),
        (
            "a server tool",
            json!({"max_tokens": 4, "messages": user, "tools": [{"type": "web_search_20250305", "name": "w"}]}),
        ),
        (
            "an unknown tool choice",
            json!({"max_tokens": 4, "messages": user, "tools": tools(), "tool_choice": {"type": "all"}}),
        ),
        (
            "a choice of no tool",
            json!({"max_tokens": 4, "messages": user, "tools": tools(), "tool_choice": {"type": "tool", "name": "x"}}),
        ),
        ("a bad temperature", json!({"max_tokens": 4, "messages": user, "temperature": -1})),
    ] {
        let (status, body) = server.post("/v1/messages", &request);
        anthropic_error_of(status, &body, 400, "invalid_request_error", what);
    }
    let (status, text) = server.call("POST", "/v1/messages", b"{not json");
    let body: Value = serde_json::from_str(&text).expect("JSON");
    anthropic_error_of(status, &body, 400, "invalid_request_error", "not JSON");
    let (status, body) =
        server.post("/v1/messages/count_tokens", &json!({"messages": [{"role": "user", "content": 3}]}));
    anthropic_error_of(status, &body, 400, "invalid_request_error", "count_tokens");
    let (status, body) = server.post("/v1/messages", &json!({"max_tokens": 2, "messages": user}));
    assert_eq!(status, 200, "{body}");
}

#[test]
fn x_api_key_is_a_key_and_its_refusal_is_anthropic_shaped() {
    let options = ServerOptions {
        body_limit: BODY_LIMIT,
        api_keys: ApiKeys::new(["sk-test"]).expect("keys"),
        ..ServerOptions::default()
    };
    let server = Server::start_with(1, 4, 512, options);
    let body = json!({"max_tokens": 2, "messages": [{"role": "user", "content": "x"}]}).to_string();
    let (status, _, text) = server.call_with("POST", "/v1/messages", &[("x-api-key", "sk-test")], body.as_bytes());
    assert_eq!(status, 200, "{text}");
    for headers in [&[][..], &[("x-api-key", "wrong")][..]] {
        let (status, _, text) = server.call_with("POST", "/v1/messages", headers, body.as_bytes());
        let value: Value = serde_json::from_str(&text).expect("JSON");
        anthropic_error_of(status, &value, 401, "authentication_error", "a missing or wrong key");
    }
}

#[test]
fn cache_reads_are_counted_and_an_empty_conversation_is_served() {
    let server = Server::start(1, 4, 512);
    let request = json!({"max_tokens": 4, "temperature": 0, "system": "Be brief.",
        "messages": [{"role": "user", "content": "hello there"}]});
    let cache_read =
        |body: &Value| body["usage"]["cache_read_input_tokens"].as_u64().unwrap_or_else(|| panic!("{body}"));
    let (status, first) = server.post("/v1/messages", &request);
    assert_eq!((status, cache_read(&first)), (200, 0), "a fresh server holds nothing: {first}");
    let (status, again) = server.post("/v1/messages", &request);
    assert_eq!(status, 200, "{again}");
    let input = again["usage"]["input_tokens"].as_u64().expect("input_tokens");
    assert!(cache_read(&again) > 0 && cache_read(&again) < input, "the prompt again, from the cache: {again}");
    let mut streamed = request.clone();
    streamed["stream"] = json!(true);
    let (_, events) = server.named_stream("/v1/messages", &streamed);
    let delta = events.iter().find(|(name, _)| name == "message_delta").expect("message_delta");
    assert!(cache_read(&delta.1) > 0, "{delta:?}");
    // As llama-server (Anthropic's API refuses it): the generation prompt alone.
    let (status, empty) = server.post("/v1/messages", &json!({"max_tokens": 4, "messages": []}));
    assert_eq!((status, &empty["type"]), (200, &json!("message")), "{empty}");
}
