//! A panic in the engine (injected: feature `fault-injection`) fails the
//! requests of the step it hit, and the server goes on; repeated panics
//! with no step between them stop the engine, `/health` says so with the
//! cause, and the server ends with an error.

use std::io::Read;
use std::time::{Duration, Instant};

use baton_serve::engine::{EngineState, MAX_PANICS_WITHOUT_A_STEP};
use baton_serve::http::{ServeError, ServerOptions};
use serde_json::{json, Value};

use crate::server::*;

fn greedy(server: &Server) -> (u16, Value) {
    server.post("/v1/completions", &json!({"prompt": "a b", "max_tokens": 4, "temperature": 0}))
}

#[test]
fn a_panic_fails_the_running_request_and_the_server_goes_on() {
    let server = Server::start(1, 1, LONG_CONTEXT);
    let (status, before) = greedy(&server);
    assert_eq!(status, 200, "{before}");
    let mut running = long_stream(&server);
    server.engine.inject_panic();
    let mut rest = Vec::new();
    running.read_to_end(&mut rest).expect("the stream ends");
    let rest = String::from_utf8_lossy(&rest);
    assert!(rest.contains("the engine failed") && !rest.contains("[DONE]"), "an error event ends it: {rest}");

    let (status, health) = server.call("GET", "/health", b"");
    let health: Value = serde_json::from_str(&health).expect("json");
    assert_eq!((status, &health["status"], &health["panics"]), (200, &json!("ok"), &json!(1)), "{health}");
    let (status, after) = greedy(&server);
    assert_eq!(status, 200, "{after}");
    assert_eq!(after["choices"][0]["text"], before["choices"][0]["text"], "the same greedy text after the panic");
}

#[test]
fn repeated_panics_stop_the_engine_and_health_answers_503_with_the_cause() {
    let options = ServerOptions { stop_when_the_engine_fails: false, ..ServerOptions::default() };
    let server = Server::start_with(1, 1, 64, options);
    for _ in 0..MAX_PANICS_WITHOUT_A_STEP {
        server.engine.inject_panic();
    }
    let start = Instant::now();
    while !matches!(server.engine.state(), EngineState::Failed(_)) {
        assert!(start.elapsed() < Duration::from_secs(20), "the engine still runs: {:?}", server.engine.state());
        std::thread::sleep(Duration::from_millis(5));
    }
    let (status, health) = server.call("GET", "/health", b"");
    let health: Value = serde_json::from_str(&health).expect("json");
    assert_eq!((status, &health["status"]), (503, &json!("failed")), "{health}");
    assert!(health["error"].as_str().is_some_and(|e| e.contains("injected")), "the cause: {health}");
    let (status, answer) = greedy(&server);
    assert_eq!(status, 503, "{answer}");
    assert!(answer["error"]["message"].as_str().is_some_and(|m| m.contains("injected")), "{answer}");
}

#[test]
fn the_server_ends_with_an_error_when_the_engine_stops_for_good() {
    let mut server = Server::start(1, 1, 64);
    for _ in 0..MAX_PANICS_WITHOUT_A_STEP {
        server.engine.inject_panic();
    }
    let start = Instant::now();
    while !server.has_stopped() {
        assert!(start.elapsed() < Duration::from_secs(20), "serve still runs after the engine failed");
        std::thread::sleep(Duration::from_millis(10));
    }
    match server.stop_result() {
        Some(Err(ServeError::EngineFailed(why))) => assert!(why.contains("injected"), "{why}"),
        other => panic!("expected EngineFailed, got {other:?}"),
    }
}
