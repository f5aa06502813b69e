//! `echo` on `/v1/completions`: the prompt's text before the completion's,
//! and with `logprobs` each prompt token's log-probability after the ones
//! before it (the first has none); `tests/engine.rs` checks those values
//! against a generation's.

use serde_json::{json, Value};

use crate::server::*;

fn text(body: &Value) -> &str {
    body["choices"][0]["text"].as_str().expect("text")
}

#[test]
fn echo_puts_the_prompt_before_the_completion_whole_and_streamed() {
    let server = Server::start(2, 8, 256);
    let plain = json!({"prompt": "hello world", "max_tokens": 6, "temperature": 0, "ignore_eos": true});
    let (status, alone) = server.post("/v1/completions", &plain);
    assert_eq!(status, 200, "{alone}");
    let mut echoed = plain.clone();
    echoed["echo"] = json!(true);
    let (status, body) = server.post("/v1/completions", &echoed);
    assert_eq!(status, 200, "{body}");
    assert_eq!(text(&body), format!("hello world{}", text(&alone)));
    assert_eq!(body["usage"]["prompt_tokens"], alone["usage"]["prompt_tokens"]);
    assert_eq!(body["usage"]["completion_tokens"], 6);

    echoed["stream"] = json!(true);
    let (status, events) = server.stream("/v1/completions", &echoed);
    assert_eq!(status, 200);
    let first: Value = serde_json::from_str(&events[0]).expect("a JSON chunk");
    assert_eq!(first["choices"][0]["text"], "hello world", "the first chunk is the prompt");
    let (streamed, finish, _) = read_stream(&events, false);
    assert_eq!((streamed.as_str(), finish.as_str()), (text(&body), "length"));
}

#[test]
fn echo_with_logprobs_scores_the_prompt() {
    let server = Server::start(2, 8, 256);
    let prompt = [11u32, 22, 33, 44, 55, 66];
    let request = json!({"prompt": prompt, "max_tokens": 0, "echo": true, "logprobs": 2});
    let (status, scored) = server.post("/v1/completions", &request);
    assert_eq!(status, 200, "{scored}");
    let lp = &scored["choices"][0]["logprobs"];
    let tokens = lp["tokens"].as_array().expect("tokens");
    assert_eq!(tokens.len(), prompt.len(), "one entry per prompt token");
    assert_eq!(lp["token_logprobs"][0], Value::Null, "nothing predicts the first token");
    assert_eq!(lp["top_logprobs"][0], Value::Null);
    for i in 1..prompt.len() {
        let value = lp["token_logprobs"][i].as_f64().expect("a logprob");
        let alternatives = lp["top_logprobs"][i].as_object().expect("a map");
        assert!(value <= 0.0 && (1..=2).contains(&alternatives.len()), "{lp}");
        let best = alternatives.values().filter_map(Value::as_f64).fold(f64::NEG_INFINITY, f64::max);
        assert!(value <= best + 1e-6, "no token is likelier than the most likely: {lp}");
    }
    let joined: String = tokens.iter().filter_map(Value::as_str).collect();
    assert_eq!(joined, text(&scored), "the entries spell the echoed text");
    assert_eq!(scored["choices"][0]["finish_reason"], "length");
    assert_eq!(scored["usage"]["prompt_tokens"], 6);
    assert_eq!(scored["usage"]["completion_tokens"], 0);

    // Streamed: one chunk with the echo and its logprobs, then [DONE].
    let mut streamed = request.clone();
    streamed["stream"] = json!(true);
    let (status, events) = server.stream("/v1/completions", &streamed);
    assert_eq!(status, 200);
    assert_eq!(events.len(), 2, "{events:?}");
    let chunk: Value = serde_json::from_str(&events[0]).expect("a JSON chunk");
    assert_eq!(chunk["choices"][0]["logprobs"], *lp);

    // Bad: a prompt with no tokens, too many alternatives.
    let (status, _) =
        server.post("/v1/completions", &json!({"prompt": [], "max_tokens": 0, "echo": true, "logprobs": 1}));
    assert_eq!(status, 400);
    let (status, _) = server.post("/v1/completions", &json!({"prompt": "x", "echo": true, "logprobs": 21}));
    assert_eq!(status, 400);
}
