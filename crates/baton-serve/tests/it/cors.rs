//! CORS, as llama-server answers: preflights answered with 200 (without a
//! key when keys are set), allowed origins' answers carrying their origin
//! in `Access-Control-Allow-Origin` and credentials allowed, others'
//! answers without them.

use baton_serve::http::{ApiKeys, CorsOrigins, ServerOptions};

use crate::server::{Server, BODY_LIMIT};

const PREFLIGHT: [(&str, &str); 3] = [
    ("Origin", "https://app.example"),
    ("Access-Control-Request-Method", "POST"),
    ("Access-Control-Request-Headers", "authorization, content-type"),
];

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

#[test]
fn any_origin_is_allowed_by_default_and_preflight_is_answered() {
    let server = Server::start(1, 4, 64);
    let (status, head, _) = server.call_with("OPTIONS", "/v1/chat/completions", &PREFLIGHT, b"");
    assert_eq!(status, 200, "{head}");
    assert_eq!(header(&head, "access-control-allow-origin"), Some("https://app.example"), "{head}");
    assert_eq!(header(&head, "access-control-allow-credentials"), Some("true"), "{head}");
    assert_eq!(header(&head, "access-control-allow-methods"), Some("GET, POST, DELETE, OPTIONS"), "{head}");
    assert_eq!(header(&head, "access-control-allow-headers"), Some("authorization, content-type"), "{head}");
    assert_eq!(header(&head, "vary"), Some("origin"), "{head}");
    let body = br#"{"prompt": "hi", "max_tokens": 2}"#;
    let (status, head, _) = server.call_with("POST", "/v1/completions", &PREFLIGHT[..1], body);
    assert_eq!(status, 200, "{head}");
    assert_eq!(header(&head, "access-control-allow-origin"), Some("https://app.example"), "{head}");
}

#[test]
fn only_listed_origins_are_allowed_and_preflight_needs_no_key() {
    let options = ServerOptions {
        body_limit: BODY_LIMIT,
        cors_origins: "https://app.example, http://localhost:3000".parse::<CorsOrigins>().expect("origins"),
        api_keys: ApiKeys::new(["sesame"]).expect("keys"),
        ..ServerOptions::default()
    };
    let server = Server::start_with(1, 4, 64, options);
    // The preflight carries no key and is answered.
    let (status, head, _) = server.call_with("OPTIONS", "/v1/chat/completions", &PREFLIGHT, b"");
    assert_eq!(status, 200, "{head}");
    assert_eq!(header(&head, "access-control-allow-origin"), Some("https://app.example"), "{head}");
    // Another origin's preflight: answered without the CORS headers (its
    // browser then refuses the request).
    let other = [("Origin", "https://evil.example"), ("Access-Control-Request-Method", "POST")];
    let (status, head, _) = server.call_with("OPTIONS", "/v1/chat/completions", &other, b"");
    assert_eq!(status, 200, "{head}");
    assert_eq!(header(&head, "access-control-allow-origin"), None, "{head}");
    assert_eq!(header(&head, "access-control-allow-methods"), None, "{head}");
    // The request itself still needs the key; its 401 is readable by the page.
    let (status, head, _) = server.call_with("GET", "/v1/models", &PREFLIGHT[..1], b"");
    assert_eq!(status, 401, "{head}");
    assert_eq!(header(&head, "access-control-allow-origin"), Some("https://app.example"), "{head}");
    let keyed = [("Origin", "http://localhost:3000"), ("Authorization", "Bearer sesame")];
    let (status, head, _) = server.call_with("GET", "/v1/models", &keyed, b"");
    assert_eq!(status, 200, "{head}");
    assert_eq!(header(&head, "access-control-allow-origin"), Some("http://localhost:3000"), "{head}");
    // Not an allowed origin: answered, without the header.
    let (status, head, _) = server.call_with("GET", "/health", &other[..1], b"");
    assert_eq!(status, 200, "{head}");
    assert_eq!(header(&head, "access-control-allow-origin"), None, "{head}");
}
