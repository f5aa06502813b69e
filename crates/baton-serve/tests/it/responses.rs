//! `POST /v1/responses` (OpenAI's Responses API): the chat completions'
//! answer as a response, whole and as its `response.*` events; the token
//! limit makes it `incomplete`; `text.format` holds the text to JSON; a
//! function call and its output round trip; bad requests get 400 in
//! OpenAI's error shape; llama-server's `timings_per_token` and
//! `return_progress` ride a stream when asked, on `/responses` too.

use baton_gen::constraint::GrammarSource;
use baton_serve::engine::EngineOptions;
use baton_serve::http::ServerOptions;
use serde_json::{json, Value};

use crate::server::*;

fn tools() -> Value {
    json!([
        {"type": "function", "name": "get_weather", "description": "The weather of a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}},
            "required": ["city"], "additionalProperties": false}},
    ])
}

/// A whole response's text and function call, checking its shape.
fn read_response(body: &Value) -> (String, Option<Value>) {
    assert!(body["id"].as_str().is_some_and(|id| id.starts_with("resp_")), "{body}");
    assert_eq!((&body["object"], &body["model"]), (&json!("response"), &json!("tiny")), "{body}");
    let usage = &body["usage"];
    let (input, output) =
        (usage["input_tokens"].as_u64().expect("input"), usage["output_tokens"].as_u64().expect("output"));
    assert_eq!(usage["total_tokens"].as_u64(), Some(input + output), "{body}");
    let (mut text, mut call) = (String::new(), None);
    for item in body["output"].as_array().expect("output") {
        match item["type"].as_str() {
            Some("message") => {
                assert_eq!(item["role"], "assistant", "{item}");
                for part in item["content"].as_array().expect("content") {
                    assert_eq!((&part["type"], &part["annotations"]), (&json!("output_text"), &json!([])), "{part}");
                    text.push_str(part["text"].as_str().expect("text"));
                }
            }
            Some("function_call") => {
                assert!(item["call_id"].as_str().is_some_and(|id| id.starts_with("call_")), "{item}");
                let arguments = item["arguments"].as_str().expect("arguments are a JSON text");
                let arguments: Value = serde_json::from_str(arguments).unwrap_or_else(|e| panic!("{arguments}: {e}"));
                assert!(arguments.is_object(), "{item}");
                assert!(call.replace(item.clone()).is_none(), "one call: {body}");
            }
            other => panic!("an item of type {other:?}: {body}"),
        }
    }
    (text, call)
}

/// A stream's text, function call item and last response, checking the
/// events' order and numbering.
fn read_events(events: &[(String, Value)]) -> (String, Option<Value>, Value) {
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names[..2], ["response.created", "response.in_progress"], "{names:?}");
    for (i, (_, data)) in events.iter().enumerate() {
        assert_eq!(data["sequence_number"], i, "{data}");
    }
    let (mut text, mut call) = (String::new(), None);
    let mut expected: Vec<&str> = Vec::new();
    for (name, data) in &events[2..events.len() - 1] {
        match name.as_str() {
            "response.output_item.added" if data["item"]["type"] == "message" => {
                expected = vec!["response.content_part.added", "response.output_text.delta"];
            }
            "response.output_text.delta" => text.push_str(data["delta"].as_str().expect("delta")),
            "response.output_text.done" => assert_eq!(data["text"], json!(text)),
            "response.output_item.done" if data["item"]["type"] == "function_call" => call = Some(data["item"].clone()),
            _ => {}
        }
        expected.retain(|e| e != name);
    }
    assert!(expected.is_empty(), "missing {expected:?} in {names:?}");
    let (last, data) = &events[events.len() - 1];
    assert!(["response.completed", "response.incomplete"].contains(&last.as_str()), "{names:?}");
    assert_eq!(format!("response.{}", data["response"]["status"].as_str().expect("status")), *last);
    (text, call, data["response"].clone())
}

#[test]
fn responses_answer_as_chat_completions_whole_and_streamed() {
    let server = Server::start(2, 8, 1024);
    let request = json!({
        "model": "gpt-4.1", "instructions": "Be brief.", "max_output_tokens": 12, "temperature": 0,
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "hello"}]}],
    });
    let (status, body) = server.post("/v1/responses", &request);
    assert_eq!(status, 200, "{body}");
    let (text, call) = read_response(&body);
    assert!(call.is_none());
    let incomplete = body["status"] == "incomplete";
    assert!(incomplete || body["status"] == "completed", "{body}");
    let details = if incomplete { json!({"reason": "max_output_tokens"}) } else { Value::Null };
    assert_eq!(body["incomplete_details"], details, "{body}");
    assert_eq!((&body["instructions"], &body["max_output_tokens"]), (&json!("Be brief."), &json!(12)));

    let chat = json!({"max_tokens": 12, "temperature": 0, "messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello"}]});
    let (_, answer) = server.post("/v1/chat/completions", &chat);
    assert_eq!(answer["choices"][0]["message"]["content"], json!(text));
    assert_eq!(answer["usage"]["prompt_tokens"], body["usage"]["input_tokens"]);
    // A string input is one user message.
    let mut plain = request.clone();
    plain["input"] = json!("hello");
    let (_, same) = server.post("/v1/responses", &plain);
    assert_eq!(read_response(&same).0, text);

    let mut streamed = request.clone();
    streamed["stream"] = json!(true);
    let (_, events) = server.named_stream("/v1/responses", &streamed);
    let (stream_text, stream_call, last) = read_events(&events);
    assert_eq!((stream_text, stream_call), (text.clone(), None), "streamed as whole");
    assert_eq!(last["status"], body["status"]);
    for count in ["input_tokens", "output_tokens"] {
        assert_eq!(last["usage"][count], body["usage"][count], "{count}");
    }
    assert_eq!(read_response(&last).0, text);
}

#[test]
fn timings_and_prompt_progress_ride_a_stream_when_asked() {
    // Chunks of 8 prompt tokens: several progress reports.
    let engine = EngineOptions { parallel: 1, queue: 4, prefill_chunk: 8, ..EngineOptions::default() };
    let server =
        Server::start_engine(256, engine, ServerOptions { body_limit: BODY_LIMIT, ..ServerOptions::default() });
    let request = json!({
        "input": "islands sailed to the far shore of the long sea and back again", "max_output_tokens": 5,
        "temperature": 0, "stream": true, "timings_per_token": true, "return_progress": true,
    });
    // llama-server serves the route without `/v1` too.
    let (_, events) = server.named_stream("/responses", &request);
    let (text, _, last) = read_events(&events);
    let field = |v: &Value, name: &str| v[name].as_u64().unwrap_or_else(|| panic!("{name}: {v}"));
    let progress: Vec<(u64, u64, u64)> = events
        .iter()
        .filter_map(|(name, data)| data.get("prompt_progress").map(|p| (name, p)))
        .map(|(name, p)| {
            assert_eq!(name, "response.in_progress", "{p}");
            (field(p, "total"), field(p, "cache"), field(p, "processed"))
        })
        .collect();
    let total = progress.first().map_or(0, |p| p.0);
    assert!(total > 8, "{progress:?}");
    assert_eq!(progress.len() as u64, 1 + total.div_ceil(8), "one report per chunk after the first: {progress:?}");
    assert!(progress.windows(2).all(|w| w[0].2 < w[1].2 && w[0].0 == w[1].0), "{progress:?}");
    assert_eq!(progress.last().map(|p| p.2), Some(total), "{progress:?}");
    assert_eq!(total, field(&last["usage"], "input_tokens"));
    // Every delta carries the timings so far; the last event the final ones.
    let mut predicted = Vec::new();
    for (name, data) in &events {
        if name == "response.output_text.delta" {
            let timings = &data["timings"];
            assert!(timings["prompt_per_second"].is_number() && timings["predicted_per_second"].is_number(), "{data}");
            predicted.push(field(timings, "predicted_n"));
        }
    }
    assert!(!text.is_empty() && predicted.windows(2).all(|w| w[0] <= w[1]), "{predicted:?}");
    let (_, end) = events.last().expect("the last event");
    assert_eq!(field(&end["timings"], "predicted_n"), field(&last["usage"], "output_tokens"), "{end}");
    // Not asked: neither.
    let plain = json!({"input": request["input"], "max_output_tokens": 5, "temperature": 0, "stream": true});
    let (_, events) = server.named_stream("/v1/responses", &plain);
    assert!(events.iter().all(|(_, d)| d.get("timings").is_none() && d.get("prompt_progress").is_none()));
}

#[test]
fn text_format_holds_the_answer_to_json() {
    let server = Server::start(1, 4, 512);
    for format in
        [json!({"type": "json_object"}), json!({"type": "json_schema", "name": "n", "schema": {"type": "object"}})]
    {
        let request = json!({"input": "data", "max_output_tokens": 32, "seed": 3, "text": {"format": format}});
        let (status, body) = server.post("/v1/responses", &request);
        assert_eq!(status, 200, "{body}");
        let (text, _) = read_response(&body);
        let object = held_to(&server, &GrammarSource::JsonObject, &text, false);
        assert!(object, "not the start of a JSON object: {text:?}");
        if body["status"] == "completed" {
            assert!(serde_json::from_str::<Value>(&text).is_ok_and(|v| v.is_object()), "{text:?}");
        }
        assert_eq!(body["text"]["format"], format);
    }
}

#[test]
fn a_function_call_and_its_output_round_trip() {
    let server = Server::start(2, 8, 1024);
    let mut found = None;
    for seed in 0..8 {
        let request = json!({"input": "weather in Oslo?", "tools": tools(), "tool_choice": "required",
            "max_output_tokens": 96, "temperature": 0.7, "seed": seed});
        let (status, body) = server.post("/v1/responses", &request);
        assert_eq!(status, 200, "{body}");
        let (_, call) = read_response(&body);
        let mut streamed = request.clone();
        streamed["stream"] = json!(true);
        let (_, events) = server.named_stream("/v1/responses", &streamed);
        let (_, stream_call, last) = read_events(&events);
        let named = |call: &Option<Value>| call.as_ref().map(|c| (c["name"].clone(), c["arguments"].clone()));
        assert_eq!(named(&stream_call), named(&call), "streamed as whole");
        assert_eq!(read_response(&last), (read_response(&body).0, stream_call), "streamed as whole");
        if let Some(call) = call {
            assert_eq!(call["name"], "get_weather");
            found = Some((call, body["usage"]["input_tokens"].clone()));
            break;
        }
    }
    let (call, asked) = found.expect("no call closed within 96 tokens in 8 tries");
    let request = json!({"tools": tools(), "max_output_tokens": 8, "input": [
        {"role": "user", "content": "weather in Oslo?"},
        call.clone(),
        {"type": "function_call_output", "call_id": call["call_id"], "output": "3 degrees"},
    ]});
    let (status, body) = server.post("/v1/responses", &request);
    assert_eq!(status, 200, "{body}");
    assert!(body["usage"]["input_tokens"].as_u64() > asked.as_u64(), "{body}");
}

#[test]
fn bad_requests_get_openai_errors_and_the_server_serves_on() {
    let server = Server::start(1, 4, 512);
    for (what, request, param) in [
        ("no input", json!({"max_output_tokens": 4}), Value::Null),
        ("input of the wrong type", json!({"input": 3}), json!("input")),
        ("an empty input", json!({"input": []}), json!("input")),
        ("an unknown item type", json!({"input": [{"type": "computer_call"}]}), json!("input")),
        (
            "an image part",
            json!({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}),
            json!("input"),
        ),
        ("content of the wrong type", json!({"input": [{"role": "user", "content": 3}]}), json!("input")),
        (
            "previous_response_id",
            json!({"input": "x", "previous_response_id": "resp_1"}),
            json!("previous_response_id"),
        ),
        ("store", json!({"input": "x", "store": true}), json!("store")),
        ("a hosted tool", json!({"input": "x", "tools": [{"type": "web_search"}]}), json!("tools")),
        (
            "a choice of no tool",
            json!({"input": "x", "tools": tools(), "tool_choice": {"type": "function", "name": "x"}}),
            json!("tool_choice"),
        ),
        ("an unknown format", json!({"input": "x", "text": {"format": {"type": "xml"}}}), json!("text")),
        (
            "tools beside a JSON format",
            json!({"input": "x", "tools": tools(), "text": {"format": {"type": "json_object"}}}),
            json!("text"),
        ),
        ("max_output_tokens of the wrong type", json!({"input": "x", "max_output_tokens": "4"}), Value::Null),
    ] {
        let (status, body) = server.post("/v1/responses", &request);
        error_of(status, &body, 400, what);
        if !param.is_null() {
            assert_eq!(body["error"]["param"], param, "{what}: {body}");
        }
    }
    let (status, body) = server.post("/v1/responses", &json!({"input": "x", "max_output_tokens": 2, "store": false}));
    assert_eq!(status, 200, "{body}");
}
