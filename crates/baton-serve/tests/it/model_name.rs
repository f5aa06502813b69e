//! The served model answers to any `model` name (as llama-server's one
//! model does), unless the server is strict about it.

use baton_serve::http::ServerOptions;
use serde_json::json;

use crate::server::{error_of, Server, BODY_LIMIT};

#[test]
fn any_model_name_is_served() {
    let server = Server::start(1, 4, 64);
    let completion = json!({"model": "gpt-3.5-turbo", "prompt": "hi", "max_tokens": 2, "temperature": 0});
    let (status, body) = server.post("/v1/completions", &completion);
    assert_eq!(status, 200, "{body}");
    let chat = json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2});
    let (status, body) = server.post("/v1/chat/completions", &chat);
    assert_eq!(status, 200, "{body}");
    let (status, body) = server.post("/v1/embeddings", &json!({"model": "text-embedding-3-small", "input": "hi"}));
    assert_eq!(status, 200, "{body}");
}

#[test]
fn a_strict_server_refuses_another_name_and_serves_on() {
    let options = ServerOptions { body_limit: BODY_LIMIT, strict_model_name: true, ..ServerOptions::default() };
    let server = Server::start_with(1, 4, 64, options);
    for (path, body) in [
        ("/v1/completions", json!({"model": "gpt-4", "prompt": "hi", "max_tokens": 2})),
        ("/v1/chat/completions", json!({"model": "gpt-4", "messages": [{"role": "user", "content": "hi"}]})),
        ("/v1/embeddings", json!({"model": "gpt-4", "input": "hi"})),
    ] {
        let (status, value) = server.post(path, &body);
        error_of(status, &value, 404, path);
        assert_eq!(value["error"]["code"], "model_not_found", "{path}");
    }
    let (status, body) = server.post("/v1/completions", &json!({"model": "tiny", "prompt": "hi", "max_tokens": 2}));
    assert_eq!(status, 200, "{body}");
}
