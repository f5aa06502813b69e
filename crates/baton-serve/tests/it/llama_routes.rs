//! llama-server's own routes: `/tokenize`, `/detokenize`,
//! `/apply-template`, `/chat/completions/input_tokens` and `/props`, in
//! its shapes; bad input gets a 4xx
//! JSON error and the server serves on; with keys set, they need one.

use baton_serve::http::{ApiKeys, RequestDefaults, ServerOptions};
use serde_json::{json, Value};

use crate::server::{error_of, Server, BODY_LIMIT};

#[test]
fn tokenize_and_detokenize_round_trip() {
    let server = Server::start(2, 4, 64);
    let (status, body) = server.post("/tokenize", &json!({"content": "hello world"}));
    assert_eq!(status, 200, "{body}");
    let ids: Vec<u64> = body["tokens"].as_array().expect("tokens").iter().filter_map(Value::as_u64).collect();
    assert!(!ids.is_empty(), "{body}");
    let (status, pieces) = server.post("/tokenize", &json!({"content": "hello world", "with_pieces": true}));
    assert_eq!(status, 200, "{pieces}");
    let pieces = pieces["tokens"].as_array().expect("tokens");
    assert_eq!(pieces.iter().map(|p| p["id"].as_u64().expect("id")).collect::<Vec<_>>(), ids);
    assert!(pieces.iter().all(|p| p["piece"].is_string() || p["piece"].is_array()), "{pieces:?}");
    let (status, text) = server.post("/detokenize", &json!({"tokens": ids}));
    assert_eq!(status, 200, "{text}");
    assert_eq!(text["content"], "hello world");
    let (status, empty) = server.post("/detokenize", &json!({"tokens": []}));
    assert_eq!((status, &empty["content"]), (200, &json!("")));
}

#[test]
fn apply_template_renders_the_conversation() {
    let server = Server::start(1, 4, 64);
    let messages = json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]);
    let (status, body) = server.post("/apply-template", &json!({"messages": messages}));
    assert_eq!(status, 200, "{body}");
    let prompt = body["prompt"].as_str().expect("prompt");
    assert!(prompt.contains("Be brief.") && prompt.contains("Hi there"), "{prompt}");
    assert!(prompt.find("Be brief.") < prompt.find("Hi there"), "{prompt}");
}

#[test]
fn input_tokens_counts_the_chat_prompt() {
    let server = Server::start(1, 4, 256);
    let messages = json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]);
    let (status, chat) = server.post("/v1/chat/completions", &json!({"messages": messages, "max_tokens": 1}));
    assert_eq!(status, 200, "{chat}");
    for path in ["/chat/completions/input_tokens", "/v1/chat/completions/input_tokens"] {
        let (status, body) = server.post(path, &json!({"messages": messages}));
        assert_eq!(status, 200, "{path}: {body}");
        assert_eq!(body["input_tokens"], chat["usage"]["prompt_tokens"], "{path}: {body}");
    }
    let (status, body) = server.post("/chat/completions/input_tokens", &json!({"messages": []}));
    error_of(status, &body, 400, "empty messages");
}

#[test]
fn props_tells_the_defaults_and_the_model() {
    let server = Server::start(3, 4, 64);
    let (status, text) = server.call("GET", "/props", b"");
    assert_eq!(status, 200, "{text}");
    let props: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(props["total_slots"], 3, "{props}");
    assert_eq!(props["model_alias"], "tiny", "{props}");
    assert_eq!(props["default_generation_settings"]["n_ctx"], 64, "{props}");
    assert!(props["default_generation_settings"]["params"]["temperature"].is_number(), "{props}");
    assert!(props["chat_template"].as_str().is_some_and(|t| !t.is_empty()), "{props}");
    assert!(props["model_path"].is_string(), "{props}");
}

#[test]
fn bad_input_gets_4xx_json_errors_and_the_server_goes_on() {
    let server = Server::start(1, 4, 64);
    for (path, body, what) in [
        ("/tokenize", r#"{}"#, "no content"),
        ("/tokenize", r#"{"content": 5}"#, "content not a string"),
        ("/tokenize", r#"{"content": "hi", "with_pieces": "yes"}"#, "with_pieces not a boolean"),
        ("/tokenize", r#"{"content": "#, "malformed JSON"),
        ("/detokenize", r#"{"tokens": [999999]}"#, "a token outside the vocabulary"),
        ("/detokenize", r#"{"tokens": [-1]}"#, "a negative token"),
        ("/detokenize", r#"{"tokens": "abc"}"#, "tokens not a list"),
        ("/apply-template", r#"{}"#, "no messages"),
        ("/apply-template", r#"{"messages": []}"#, "empty messages"),
        ("/apply-template", r#"{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}"#, "an image"),
    ] {
        let (status, text) = server.call("POST", path, body.as_bytes());
        let value: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {text}"));
        error_of(status, &value, 400, what);
    }
    let (status, text) = server.call("POST", "/props", b"{}");
    assert_eq!(status, 405, "POST /props: {text}");
    let (status, body) = server.post("/tokenize", &json!({"content": "still here"}));
    assert_eq!(status, 200, "{body}");
}

#[test]
fn with_keys_the_routes_need_one() {
    let options = ServerOptions {
        body_limit: BODY_LIMIT,
        api_keys: ApiKeys::new(["sesame"]).expect("keys"),
        ..Default::default()
    };
    let server = Server::start_with(1, 4, 64, options);
    for (method, path, body) in [
        ("POST", "/tokenize", r#"{"content": "hi"}"#),
        ("POST", "/detokenize", r#"{"tokens": [1]}"#),
        ("POST", "/apply-template", r#"{"messages": [{"role": "user", "content": "hi"}]}"#),
        ("GET", "/props", ""),
        ("GET", "/models", ""),
    ] {
        let (status, _, text) = server.call_with(method, path, &[], body.as_bytes());
        let value: Value = serde_json::from_str(&text).expect("json");
        error_of(status, &value, 401, path);
        let (status, _, text) = server.call_with(method, path, &[("Authorization", "Bearer sesame")], body.as_bytes());
        assert_eq!(status, 200, "{path}: {text}");
    }
}

/// `--temp`, `--seed` and `-n` (llama-server's): a request that gives no
/// temperature, seed or `max_tokens` takes the server's, which `/props`
/// tells; one that gives its own keeps it.
#[test]
fn the_servers_defaults_fill_what_a_request_leaves_out() {
    let defaults = RequestDefaults { temperature: Some(1.0), seed: Some(42), max_tokens: Some(5) };
    let server =
        Server::start_with(1, 4, 64, ServerOptions { body_limit: BODY_LIMIT, defaults, ..ServerOptions::default() });
    let bare = json!({"prompt": "Once upon", "ignore_eos": true});
    let (status, first) = server.post("/v1/completions", &bare);
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["usage"]["completion_tokens"], 5, "-n: {first}");
    let (_, again) = server.post("/v1/completions", &bare);
    assert_eq!(first["choices"][0]["text"], again["choices"][0]["text"], "--seed: the same draw");
    let own = json!({"prompt": "Once upon", "ignore_eos": true, "max_tokens": 3, "seed": 7});
    let (_, answer) = server.post("/v1/completions", &own);
    assert_eq!(answer["usage"]["completion_tokens"], 3, "{answer}");
    // 61 of the 64 positions: 3 left.
    let long = json!({"prompt": (1..62).collect::<Vec<u32>>(), "ignore_eos": true});
    let (status, cut) = server.post("/v1/completions", &long);
    assert_eq!(status, 200, "{cut}");
    assert_eq!(cut["usage"]["completion_tokens"], 3, "cut to the context: {cut}");
    let (status, text) = server.call("GET", "/props", b"");
    assert_eq!(status, 200, "{text}");
    let props: Value = serde_json::from_str(&text).expect("json");
    let params = &props["default_generation_settings"]["params"];
    assert_eq!((&params["n_predict"], &params["seed"], &params["temperature"]), (&json!(5), &json!(42), &json!(1.0)));
}
