//! The OpenAI routes answer without their `/v1` prefix too, as
//! llama-server's do (`/completions` there is its native route).

use serde_json::{json, Value};

use crate::server::{error_of, Server};

#[test]
fn the_routes_answer_without_v1() {
    let server = Server::start(1, 4, 64);
    let (status, text) = server.call("GET", "/models", b"");
    assert_eq!(status, 200, "{text}");
    let models: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(models["data"][0]["id"], "tiny");
    // `/completions` is llama-server's native route there, not OpenAI's.
    let (status, body) = server.post("/completions", &json!({"prompt": "hi", "n_predict": 2, "temperature": 0}));
    assert_eq!((status, body["tokens_predicted"].as_u64()), (200, Some(2)), "{body}");
    assert!(body["content"].is_string() && body.get("object").is_none(), "{body}");
    let chat = json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2});
    let (status, body) = server.post("/chat/completions", &chat);
    assert_eq!((status, body["object"].as_str()), (200, Some("chat.completion")), "{body}");
    let (status, body) = server.post("/embeddings", &json!({"input": "hi"}));
    assert_eq!((status, body["object"].as_str()), (200, Some("list")), "{body}");
    // Bad input on an alias is refused as on the route itself.
    let (status, body) = server.post("/chat/completions", &json!({"messages": []}));
    error_of(status, &body, 400, "no messages");
}
