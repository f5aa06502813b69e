//! The HTTP server in-process on a synthetic tiny model, spoken to with raw
//! HTTP/1.1: both endpoints streamed and whole, stop strings, seeds, usage,
//! every bad input's status and error, the queue's limit, and a client
//! that disconnects mid-stream.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use baton_serve::http::ServerOptions;
use serde_json::{json, Value};

use crate::server::*;

#[test]
fn completions_whole_and_streamed_agree_with_usage_counts() {
    let server = Server::start(2, 4, 256);
    let request =
        json!({"model": "tiny", "prompt": [1, 2, 3, 4, 5], "max_tokens": 12, "temperature": 0, "ignore_eos": true});
    let (status, whole) = server.post("/v1/completions", &request);
    assert_eq!(status, 200, "{whole}");
    assert_eq!(whole["object"], "text_completion");
    assert_eq!(whole["choices"][0]["finish_reason"], "length");
    let usage_of = |cached: u64| {
        json!({"prompt_tokens": 5, "completion_tokens": 12, "total_tokens": 17,
               "prompt_tokens_details": {"cached_tokens": cached},
               "completion_tokens_details": {"reasoning_tokens": 0}})
    };
    assert_eq!(whole["usage"], usage_of(0));
    let text = whole["choices"][0]["text"].as_str().expect("text").to_string();
    assert!(!text.is_empty());

    let mut streamed = request.clone();
    streamed["stream"] = json!(true);
    streamed["stream_options"] = json!({"include_usage": true});
    let (status, events) = server.stream("/v1/completions", &streamed);
    assert_eq!(status, 200);
    let (stream_text, finish, usage) = read_stream(&events, false);
    assert_eq!((stream_text.as_str(), finish.as_str()), (text.as_str(), "length"));
    // The same prompt again: all but its last token from the prefix cache.
    assert_eq!(usage, Some(usage_of(4)));
}

#[test]
fn chat_whole_and_streamed_agree() {
    let server = Server::start(2, 4, 256);
    let request = json!({
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
        "max_completion_tokens": 10, "temperature": 0, "ignore_eos": true
    });
    let (status, whole) = server.post("/v1/chat/completions", &request);
    assert_eq!(status, 200, "{whole}");
    assert_eq!(whole["object"], "chat.completion");
    let message = &whole["choices"][0]["message"];
    assert_eq!(message["role"], "assistant");
    let text = message["content"].as_str().expect("content").to_string();
    assert_eq!(whole["usage"]["completion_tokens"], 10);
    // The ChatML rendering of the two messages plus the generation prompt.
    let prompt_tokens = whole["usage"]["prompt_tokens"].as_u64().expect("prompt tokens");
    assert!(prompt_tokens > 10, "{whole}");

    let mut streamed = request.clone();
    streamed["stream"] = json!(true);
    let (status, events) = server.stream("/v1/chat/completions", &streamed);
    assert_eq!(status, 200);
    let (stream_text, finish, usage) = read_stream(&events, true);
    assert_eq!((stream_text, finish.as_str(), usage), (text, "length", None));
    // Every answer and chunk names the backend (OpenAI's
    // `system_fingerprint`): Baton and its version.
    let fingerprint = format!("baton-{}", env!("CARGO_PKG_VERSION"));
    assert_eq!(whole["system_fingerprint"], json!(fingerprint), "{whole}");
    for (i, event) in events.iter().filter(|e| e.as_str() != "[DONE]").enumerate() {
        let chunk: Value = serde_json::from_str(event).expect("json chunk");
        assert_eq!(chunk["system_fingerprint"], json!(fingerprint), "{chunk}");
        // The first chunk names the role, its content `null` (as
        // llama-server's); the others have no role.
        let delta = &chunk["choices"][0]["delta"];
        match i {
            0 => assert_eq!((delta.get("role"), delta.get("content")), (Some(&json!("assistant")), Some(&Value::Null))),
            _ => assert!(delta.get("role").is_none(), "{chunk}"),
        }
    }
}

#[test]
fn a_stop_string_cuts_the_text_and_finishes_with_stop() {
    let server = Server::start(2, 4, 256);
    let mut request = json!({"prompt": "Once upon", "max_tokens": 24, "temperature": 0, "ignore_eos": true});
    let (_, whole) = server.post("/v1/completions", &request);
    let text = whole["choices"][0]["text"].as_str().expect("text").to_string();
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    assert!(chars.len() >= 8, "the tiny model's text is long enough to cut: {text:?}");
    // A stop string from the middle of the text, two characters long.
    let (from, to) = (chars[chars.len() / 2].0, chars.get(chars.len() / 2 + 2).map_or(text.len(), |c| c.0));
    let stop = &text[from..to];
    let expected = &text[..text.find(stop).expect("the stop is in the text")];
    request["stop"] = json!(["never-appears-zq", stop]);
    let (status, cut) = server.post("/v1/completions", &request);
    assert_eq!(status, 200, "{cut}");
    assert_eq!(cut["choices"][0]["text"], expected, "stop {stop:?} in {text:?}");
    assert_eq!(cut["choices"][0]["finish_reason"], "stop");
    assert!(cut["usage"]["completion_tokens"].as_u64().expect("count") < 24);

    request["stream"] = json!(true);
    let (_, events) = server.stream("/v1/completions", &request);
    let (streamed, finish, _) = read_stream(&events, false);
    assert_eq!((streamed.as_str(), finish.as_str()), (expected, "stop"));
    server.wait_for("the stopped generations to free their slots", |s| s.running == 0);
}

#[test]
fn a_seed_gives_the_same_text_twice() {
    let server = Server::start(2, 4, 256);
    let request = json!({"prompt": "Hello", "max_tokens": 16, "temperature": 1.0, "seed": 1234, "ignore_eos": true});
    let (_, a) = server.post("/v1/completions", &request);
    let (_, b) = server.post("/v1/completions", &request);
    assert_eq!(a["choices"][0]["text"], b["choices"][0]["text"]);
    let chat =
        json!({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 16, "seed": 99, "ignore_eos": true});
    let (_, a) = server.post("/v1/chat/completions", &chat);
    let (_, b) = server.post("/v1/chat/completions", &chat);
    assert_eq!(a["choices"][0]["message"], b["choices"][0]["message"]);
}

#[test]
fn models_and_health_answer() {
    let server = Server::start(1, 1, 64);
    let (status, models) = server.call("GET", "/v1/models", b"");
    assert_eq!(status, 200);
    let models: Value = serde_json::from_str(&models).expect("json");
    assert_eq!(models["data"][0]["id"], "tiny");
    let (status, health) = server.call("GET", "/health", b"");
    assert_eq!(status, 200);
    assert_eq!(serde_json::from_str::<Value>(&health).expect("json")["status"], "ok");
}

#[test]
fn bad_requests_get_4xx_json_errors_and_the_server_goes_on() {
    let server = Server::start(2, 4, 64);
    let long: Vec<u32> = (0..64).map(|i| 1 + i % 50).collect();
    let cases: [(&str, &str, u16, &str); 11] = [
        ("/v1/completions", r#"{"prompt": "hi", "max_tokens": "#, 400, "malformed JSON"),
        ("/v1/completions", r#"{"prompt": "hi", "max_tokens": "ten"}"#, 400, "a field of the wrong type"),
        ("/v1/chat/completions", r#"{"messages": "hi"}"#, 400, "messages of the wrong type"),
        ("/v1/completions", r#"{"max_tokens": 3}"#, 400, "no prompt"),
        ("/v1/completions", r#"{"prompt": "hi", "max_tokens": 1000}"#, 400, "max_tokens past the context"),
        ("/v1/completions", r#"{"prompt": "hi", "presence_penalty": 2.5}"#, 400, "a presence penalty past 2"),
        ("/v1/completions", r#"{"prompt": "hi", "n": 17}"#, 400, "n = 17"),
        ("/v1/completions", r#"{"prompt": "hi", "temperature": -1}"#, 400, "a negative temperature"),
        ("/v1/completions", r#"{"prompt": [999999]}"#, 400, "a token outside the vocabulary"),
        ("/v1/chat/completions", r#"{"messages": []}"#, 400, "no messages"),
        ("/v1/nothing", r#"{}"#, 404, "an unknown path"),
    ];
    for (path, body, expected, what) in cases {
        let (status, text) = server.call("POST", path, body.as_bytes());
        let value: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {text}"));
        error_of(status, &value, expected, what);
    }
    let (status, body) = server.post("/v1/completions", &json!({"prompt": long}));
    error_of(status, &body, 400, "a prompt longer than the context");
    assert_eq!(body["error"]["code"], "context_length_exceeded");
    // llama-server's type, with the prompt's tokens and a sequence's context.
    assert_eq!(body["error"]["type"], "exceed_context_size_error", "{body}");
    assert!(body["error"]["n_prompt_tokens"].as_u64().is_some_and(|n| n > 0), "{body}");
    assert!(body["error"]["n_ctx"].as_u64().is_some_and(|n| n > 0), "{body}");
    let big = format!(r#"{{"prompt": "{}"}}"#, "a".repeat(BODY_LIMIT + 1000));
    let (status, text) = server.call("POST", "/v1/completions", big.as_bytes());
    error_of(status, &serde_json::from_str(&text).expect("json"), 413, "a body over the limit");

    let (status, ok) = server.post("/v1/completions", &json!({"prompt": "hi", "max_tokens": 2, "ignore_eos": true}));
    assert_eq!((status, ok["usage"]["completion_tokens"].as_u64()), (200, Some(2)), "{ok}");
}

/// Starts a streamed completion that runs until the context is full and
/// returns its connection once the first event arrived.
#[test]
fn past_the_queue_requests_get_429_and_a_disconnect_frees_the_slot() {
    let server = Server::start(1, 1, LONG_CONTEXT);
    let running = long_stream(&server);
    // One more waits in the queue…
    let addr = server.addr;
    let waiting = std::thread::spawn(move || {
        let mut stream = TcpStream::connect(addr).expect("connect");
        let body = json!({"prompt": "b", "max_tokens": 3, "ignore_eos": true});
        send(&mut stream, "POST", "/v1/completions", body.to_string().as_bytes());
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).expect("read");
        parse(&raw)
    });
    server.wait_for("one running and one waiting", |s| s.running == 1 && s.queued == 1);
    // …and the next is refused.
    let (status, body) = server.post("/v1/completions", &json!({"prompt": "c", "max_tokens": 3}));
    error_of(status, &body, 429, "a full queue");
    // The client of the running stream goes away: its sequence is freed
    // and the waiting request runs.
    drop(running);
    let stats = server.wait_for("the disconnected stream to be cancelled", |s| s.cancelled == 1);
    assert!(stats.generated_tokens < LONG_CONTEXT as u64 - 2, "cancelled before the context filled: {stats:?}");
    let (status, text) = waiting.join().expect("the waiting client");
    assert_eq!(status, 200, "{text}");
    server.wait_for("every slot free", |s| s.running == 0 && s.queued == 0);
}

#[test]
fn shutdown_cancels_what_outlives_the_drain_time() {
    let options =
        ServerOptions { body_limit: BODY_LIMIT, drain: Duration::from_millis(50), ..ServerOptions::default() };
    let mut server = Server::start_with(1, 1, LONG_CONTEXT, options);
    let mut running = long_stream(&server);
    server.stop();
    let mut rest = Vec::new();
    running.read_to_end(&mut rest).expect("the stream ends");
    let rest = String::from_utf8_lossy(&rest);
    assert!(rest.contains("\"error\"") && !rest.contains("[DONE]"), "the stream ends with an error event: {rest}");
    assert!(TcpStream::connect(server.addr).is_err(), "the listener is closed");
}

#[test]
fn a_body_without_a_json_content_type_is_read_as_json() {
    let server = Server::start(1, 1, 64);
    let body = r#"{"prompt": "hi", "max_tokens": 2, "ignore_eos": true}"#;
    let mut stream = server.connect();
    let head = format!(
        "POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(head.as_bytes()).expect("write");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read");
    let (status, text) = parse(&raw);
    assert_eq!(status, 200, "{text}");
    assert_eq!(serde_json::from_str::<Value>(&text).expect("json")["usage"]["completion_tokens"], 2);
}

#[test]
fn concurrent_requests_each_get_their_own_text() {
    let server = Server::start(4, 8, 256);
    let request =
        |i: u32| json!({"prompt": [1 + i, 7, 3 * i + 2], "max_tokens": 16, "temperature": 0, "ignore_eos": true});
    let alone: Vec<Value> =
        (0..4).map(|i| server.post("/v1/completions", &request(i)).1["choices"][0]["text"].clone()).collect();
    let addr = server.addr;
    let clients: Vec<_> = (0..4)
        .map(|i| {
            let body = request(i).to_string();
            std::thread::spawn(move || {
                let mut stream = TcpStream::connect(addr).expect("connect");
                send(&mut stream, "POST", "/v1/completions", body.as_bytes());
                let mut raw = Vec::new();
                stream.read_to_end(&mut raw).expect("read");
                parse(&raw)
            })
        })
        .collect();
    for (i, client) in clients.into_iter().enumerate() {
        let (status, text) = client.join().expect("client");
        assert_eq!(status, 200, "{text}");
        let answer: Value = serde_json::from_str(&text).expect("json");
        assert_eq!(answer["choices"][0]["text"], alone[i], "request {i} under load against alone");
    }
}

#[test]
fn a_client_leaving_a_whole_answer_early_frees_its_slot() {
    let server = Server::start(1, 1, LONG_CONTEXT);
    let mut stream = server.connect();
    let body = json!({"prompt": "a", "ignore_eos": true, "temperature": 0});
    send(&mut stream, "POST", "/v1/completions", body.to_string().as_bytes());
    server.wait_for("the request to run", |s| s.running == 1);
    drop(stream);
    let stats = server.wait_for("the abandoned request to be cancelled", |s| s.cancelled == 1 && s.running == 0);
    assert!(stats.generated_tokens < LONG_CONTEXT as u64 - 2, "cancelled before the context filled: {stats:?}");
}
