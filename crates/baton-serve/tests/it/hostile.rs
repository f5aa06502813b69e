//! A hostile client: every numeric parameter at its extremes, alone and
//! with each sampling setting, on both endpoints, streamed and whole. No
//! request may crash, hang or poison the server: after each one `/health`
//! answers "ok" and a greedy reference request returns its exact text.

use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use crate::server::*;

/// The numeric fields of a generation request.
const NUMERIC: [&str; 14] = [
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "repeat_penalty",
    "repeat_last_n",
    "n",
    "logprobs",
];

/// Extremes of every kind: zero, negatives, the smallest and largest
/// floats, integers past f64's exact range and u64's, strings that look
/// like numbers, null, a boolean.
fn extremes() -> Vec<Value> {
    vec![
        json!(0),
        json!(-1),
        json!(-2),
        json!(1e-45),
        json!(1e38),
        json!(-1e38),
        json!(9007199254740992u64),
        json!(9223372036854775808u64),
        json!(u64::MAX),
        json!(i64::MIN),
        json!("NaN"),
        json!("inf"),
        json!(null),
        json!(true),
    ]
}

/// Sampling settings each extreme is combined with.
fn settings() -> Vec<Value> {
    vec![
        json!({}),
        json!({"temperature": 0}),
        json!({"top_k": 1, "top_p": 0.1}),
        json!({"min_p": 1.0, "temperature": 1e-45}),
        json!({"repeat_penalty": 1e-45, "repeat_last_n": -1, "frequency_penalty": 2, "presence_penalty": -2}),
    ]
}

pub(crate) fn reference(server: &Server) -> Value {
    let (status, answer) =
        server.post("/v1/completions", &json!({"prompt": "a b c", "max_tokens": 6, "temperature": 0}));
    assert_eq!(status, 200, "the reference request: {answer}");
    answer["choices"][0]["text"].clone()
}

pub(crate) fn check_alive(server: &Server, expected: &Value, after: &str) {
    let (status, health) = server.call("GET", "/health", b"");
    assert_eq!(status, 200, "health after {after}: {health}");
    let health: Value = serde_json::from_str(&health).unwrap_or_else(|e| panic!("health after {after}: {e}"));
    assert_eq!(health["status"], "ok", "health after {after}");
    assert_eq!(&reference(server), expected, "the reference text after {after}");
}

#[test]
fn no_parameter_extreme_crashes_hangs_or_poisons_the_server() {
    let server = Server::start(2, 4, 64);
    let expected = reference(&server);
    let start = Instant::now();
    let mut sent = 0;
    for (i, field) in NUMERIC.iter().enumerate() {
        for (j, value) in extremes().into_iter().enumerate() {
            for (k, setting) in settings().into_iter().enumerate() {
                let mut body: Map<String, Value> = setting.as_object().cloned().unwrap_or_default();
                body.insert("max_tokens".into(), json!(3));
                body.insert((*field).into(), value.clone());
                let stream = (i + j + k) % 3 == 0;
                body.insert("stream".into(), json!(stream));
                let chat = (i + j + k) % 2 == 0;
                let (path, prompt) = if chat {
                    ("/v1/chat/completions", json!({"messages": [{"role": "user", "content": "hi"}]}))
                } else {
                    ("/v1/completions", json!({"prompt": "a b"}))
                };
                body.extend(prompt.as_object().cloned().unwrap_or_default());
                let what = format!("{path} {}", Value::Object(body.clone()));
                let (status, answer) = server.call("POST", path, Value::Object(body).to_string().as_bytes());
                sent += 1;
                assert!(
                    status == 200 || (400..500).contains(&status),
                    "{what}: status {status}, a server error or crash: {answer}"
                );
                if status == 200 && stream {
                    let events = events(&answer);
                    assert_eq!(events.last().map(String::as_str), Some("[DONE]"), "{what}: {events:?}");
                } else {
                    let answer: Value =
                        serde_json::from_str(&answer).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {answer}"));
                    if status != 200 {
                        error_of(status, &answer, status, &what);
                    }
                }
                check_alive(&server, &expected, &what);
                assert!(start.elapsed() < Duration::from_secs(300), "the hostile run takes too long ({sent} sent)");
            }
        }
    }
    assert_eq!(sent, NUMERIC.len() * extremes().len() * settings().len());
}

#[test]
fn the_reported_hostile_requests_get_answers_and_the_server_stays_up() {
    let server = Server::start(1, 1, 64);
    let expected = reference(&server);
    for body in [
        json!({"prompt": "The capital of France is", "max_tokens": 4, "repeat_last_n": 100000000000u64}),
        json!({"prompt": "The capital of France is", "max_tokens": 4, "repeat_last_n": 4611686018427387904u64}),
        json!({"prompt": "The capital of France is", "max_tokens": 8, "repeat_penalty": 1e-45}),
        json!({"prompt": "a", "max_tokens": u64::MAX}),
        json!({"prompt": "a", "max_tokens": 9223372036854775808u64}),
        json!({"prompt": "a", "max_tokens": 2, "stream": null, "echo": null, "ignore_eos": null}),
    ] {
        let (status, answer) = server.call("POST", "/v1/completions", body.to_string().as_bytes());
        assert!(status == 200 || status == 400, "{body}: {status} {answer}");
        check_alive(&server, &expected, &body.to_string());
    }
    // 2^64 - 1 tokens never fit: refused like 2^63, not wrapped around.
    let (status, _) = server.post("/v1/completions", &json!({"prompt": "a", "max_tokens": u64::MAX}));
    assert_eq!(status, 400);
    let (status, answer) = server.post("/v1/completions", &json!({"prompt": "a", "max_tokens": 2, "stream": null}));
    assert_eq!(status, 200, "stream: null is false: {answer}");
}
