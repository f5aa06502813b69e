//! API keys and the prefix cache's scopes: without a key, or with a wrong
//! one, every route but `/health` answers 401 (and the server serves on);
//! one key's cached prompts are not reused for another key, from a free
//! slot, a running sequence or host memory; `cache_salt` parts requests
//! the same way.

use std::io::Read;

use baton_serve::engine::EngineOptions;
use baton_serve::http::{ApiKeys, ServerOptions};
use baton_testkit::TempDir;
use serde_json::{json, Value};

use crate::server::*;

fn keyed(keys: &[&str]) -> ServerOptions {
    ServerOptions {
        body_limit: BODY_LIMIT,
        api_keys: ApiKeys::new(keys.iter().copied()).expect("keys"),
        ..ServerOptions::default()
    }
}

/// A completion of `prompt` (token ids) with `headers`; the status and the
/// parsed body.
fn complete(server: &Server, headers: &[(&str, &str)], body: &Value) -> (u16, Value) {
    let (status, _, text) = server.call_with("POST", "/v1/completions", headers, body.to_string().as_bytes());
    let value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    (status, value)
}

/// The tokens of the prompt that came from the cache, of an answer that
/// must be 200.
fn cached(status: u16, answer: &Value) -> u64 {
    assert_eq!(status, 200, "{answer}");
    answer["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap_or_else(|| panic!("usage: {answer}"))
}

fn prompt(first: u32, len: u32) -> Value {
    json!({"prompt": (first..first + len).collect::<Vec<u32>>(), "max_tokens": 2, "temperature": 0, "ignore_eos": true})
}

fn bearer(key: &str) -> String {
    format!("Bearer {key}")
}

/// A 401 in the error shape, with `WWW-Authenticate: Bearer`.
fn refused(server: &Server, method: &str, path: &str, headers: &[(&str, &str)], what: &str) {
    let body = if method == "POST" { prompt(1, 5).to_string() } else { String::new() };
    let (status, head, text) = server.call_with(method, path, headers, body.as_bytes());
    let value: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {text}"));
    error_of(status, &value, 401, what);
    assert_eq!(value["error"]["code"], "invalid_api_key", "{what}: {value}");
    assert_eq!(value["error"]["type"], "authentication_error", "{what}: {value}");
    let head = head.to_ascii_lowercase();
    assert!(head.contains("\r\nwww-authenticate: bearer"), "{what}: no WWW-Authenticate: Bearer in {head}");
}

#[test]
fn without_the_key_every_route_but_health_answers_401_and_the_server_serves_on() {
    let server = Server::start_with(2, 4, 256, keyed(&["key-alpha"]));
    let wrong = bearer("key-alph");
    for (method, path) in [("POST", "/v1/completions"), ("POST", "/v1/chat/completions"), ("GET", "/metrics")] {
        refused(&server, method, path, &[], &format!("{method} {path} without a key"));
        refused(&server, method, path, &[("Authorization", &wrong)], &format!("{method} {path}, a wrong bearer"));
        refused(&server, method, path, &[("x-api-key", "key-alphaa")], &format!("{method} {path}, a wrong x-api-key"));
    }
    for (method, path) in [("GET", "/v1/models"), ("POST", "/v1/embeddings"), ("GET", "/no/such/path")] {
        refused(&server, method, path, &[], &format!("{method} {path} without a key"));
    }
    refused(&server, "POST", "/v1/completions", &[("Authorization", "Basic key-alpha")], "another scheme");
    assert_eq!(server.engine.stats().prompt_tokens, 0, "no refused request reached the engine");

    let (status, health) = server.call("GET", "/health", b"");
    assert_eq!(status, 200, "/health needs no key: {health}");

    let right = bearer("key-alpha");
    let (status, answer) = complete(&server, &[("Authorization", &right)], &prompt(1, 5));
    assert_eq!(status, 200, "the key by Bearer: {answer}");
    assert_eq!(answer["usage"]["completion_tokens"], 2);
    let (status, answer) = complete(&server, &[("x-api-key", "key-alpha")], &prompt(1, 5));
    assert_eq!(status, 200, "the key by x-api-key: {answer}");
    let (status, _, metrics) = server.call_with("GET", "/metrics", &[("x-api-key", "key-alpha")], b"");
    assert_eq!(status, 200, "{metrics}");
    assert!(metrics.contains("baton_"), "{metrics}");
    let (status, _, models) = server.call_with("GET", "/v1/models", &[("Authorization", "bearer key-alpha")], b"");
    assert_eq!(status, 200, "the scheme's name in any case: {models}");
}

#[test]
fn keys_from_a_file_open_the_server() {
    let dir = TempDir::new("serve-key-file");
    let file = dir.file("keys");
    std::fs::write(&file, "\nkey-one\n\n  key-two \n\n").expect("write the keys");
    let keys = ApiKeys::read_file(&file).expect("read the keys");
    let options =
        ServerOptions { body_limit: BODY_LIMIT, api_keys: ApiKeys::new(keys).expect("keys"), ..Default::default() };
    let server = Server::start_with(2, 4, 256, options);
    for key in ["key-one", "key-two"] {
        let (status, answer) = complete(&server, &[("Authorization", &bearer(key))], &prompt(1, 5));
        assert_eq!(status, 200, "{key}: {answer}");
    }
    refused(&server, "POST", "/v1/completions", &[("Authorization", &bearer("key-three"))], "a key not in the file");
    refused(&server, "POST", "/v1/completions", &[("Authorization", &bearer(""))], "an empty key");
}

/// Two keys, one slot, and host memory: whatever the source (the slot
/// the prompt left, host memory after another key took the slot), a key
/// reuses only its own prompts.
#[test]
fn a_second_key_reuses_nothing_of_the_first_keys_prompt() {
    let engine =
        EngineOptions { parallel: 1, queue: 4, prefill_chunk: 32, cache_ram: 64 << 20, ..EngineOptions::default() };
    let server = Server::start_engine(256, engine, keyed(&["key-a", "key-b"]));
    let a = bearer("key-a");
    let secret = prompt(200, 40);
    let as_a = [("Authorization", a.as_str())];
    let as_b = [("x-api-key", "key-b")];
    assert_eq!(cached_of(&server, &as_a, &secret), 0, "the first time");
    assert_eq!(cached_of(&server, &as_a, &secret), 39, "the same key again: from the slot");
    // The slot holds key a's prompt: key b does not get it.
    assert_eq!(cached_of(&server, &as_b, &secret), 0, "another key, the slot key a left");
    // Key a's prompt went to host memory when key b took the slot; key b's
    // is in the slot now, and the same for key b is its own.
    assert_eq!(cached_of(&server, &as_b, &secret), 39, "key b again: its own");
    let other = prompt(300, 40);
    assert_eq!(cached_of(&server, &as_b, &other), 0, "key b, another prompt");
    // The slot holds key b's other prompt, host memory both keys' secret.
    assert_eq!(cached_of(&server, &as_a, &secret), 39, "key a: its own, from host memory");
}

fn cached_of(server: &Server, headers: &[(&str, &str)], body: &Value) -> u64 {
    let (status, answer) = complete(server, headers, body);
    cached(status, &answer)
}

/// A running sequence's positions are copied only into a request of its
/// key.
#[test]
fn a_running_sequence_of_another_key_is_not_copied() {
    let server = Server::start_with(3, 4, LONG_CONTEXT, keyed(&["key-a", "key-b"]));
    let a = bearer("key-a");
    let as_a = [("Authorization", a.as_str())];
    let as_b = [("x-api-key", "key-b")];
    // Key a's long stream: it runs until the context is full.
    let mut stream = server.connect();
    let mut body = prompt(200, 40);
    body["stream"] = json!(true);
    body.as_object_mut().expect("an object").remove("max_tokens");
    send_with(&mut stream, "POST", "/v1/completions", &as_a, body.to_string().as_bytes());
    let mut seen = Vec::new();
    let mut buf = [0u8; 256];
    while !String::from_utf8_lossy(&seen).contains("data: ") {
        let n = stream.read(&mut buf).expect("read the stream");
        assert!(n > 0, "the stream ended early: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    let mut longer = prompt(200, 40);
    longer["prompt"].as_array_mut().expect("tokens").push(json!(7));
    assert_eq!(cached_of(&server, &as_b, &longer), 0, "key b: nothing of key a's running sequence");
    assert_eq!(cached_of(&server, &as_a, &longer), 40, "key a: copied from its running sequence");
    drop(stream);
}

#[test]
fn different_cache_salts_share_no_prefix_and_the_same_salt_does() {
    let server = Server::start(2, 4, 256);
    let salted = |salt: Option<&str>| {
        let mut body = prompt(200, 40);
        if let Some(salt) = salt {
            body["cache_salt"] = json!(salt);
        }
        body
    };
    assert_eq!(cached_of(&server, &[], &salted(Some("one"))), 0, "the first time");
    assert_eq!(cached_of(&server, &[], &salted(Some("one"))), 39, "the same salt: reused");
    assert_eq!(cached_of(&server, &[], &salted(Some("two"))), 0, "another salt");
    assert_eq!(cached_of(&server, &[], &salted(None)), 0, "no salt");
    assert_eq!(cached_of(&server, &[], &salted(None)), 39, "no salt again: reused");

    // Chat honours it too.
    let chat = |salt: &str| {
        json!({"messages": [{"role": "user", "content": "The PIN is 4711."}], "max_tokens": 2,
               "temperature": 0, "cache_salt": salt})
    };
    let (status, first) = server.post("/v1/chat/completions", &chat("one"));
    assert_eq!(cached(status, &first), 0);
    let (status, again) = server.post("/v1/chat/completions", &chat("one"));
    assert!(cached(status, &again) > 0, "the same salt: {again}");
    let (status, other) = server.post("/v1/chat/completions", &chat("two"));
    assert_eq!(cached(status, &other), 0, "another salt: {other}");

    for (bad, what) in [(json!(5), "a number"), (json!(["a"]), "a list"), (json!(""), "empty")] {
        let mut body = prompt(1, 5);
        body["cache_salt"] = bad;
        let (status, answer) = server.post("/v1/completions", &body);
        error_of(status, &answer, 400, what);
        assert!(answer["error"]["message"].as_str().is_some_and(|m| m.contains("cache_salt")), "{what}: {answer}");
    }
}
