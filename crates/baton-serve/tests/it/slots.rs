//! `GET /slots`: each sequence slot in llama-server's shape: free and
//! empty at the start, processing while a generation runs (its prompt and
//! tokens counted), its prefix kept once it ends; `fail_on_no_slot` 503s
//! when all are busy; with the endpoint off (`--no-slots`), 501.

use std::time::{Duration, Instant};

use baton_serve::http::ServerOptions;
use serde_json::{json, Value};

use crate::server::*;

fn slots(server: &Server, query: &str) -> (u16, Value) {
    let (status, text) = server.call("GET", &format!("/slots{query}"), b"");
    (status, serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}")))
}

#[test]
fn slots_tell_what_each_slot_holds() {
    let server = Server::start(2, 4, LONG_CONTEXT);
    let (status, body) = slots(&server, "");
    assert_eq!(status, 200, "{body}");
    let list = body.as_array().expect("a list");
    assert_eq!(list.len(), 2, "{body}");
    for (i, slot) in list.iter().enumerate() {
        assert_eq!((slot["id"].as_u64(), slot["n_ctx"].as_u64()), (Some(i as u64), Some(LONG_CONTEXT as u64)));
        assert_eq!((slot["is_processing"].as_bool(), slot["n_tokens"].as_u64()), (Some(false), Some(0)), "{slot}");
    }
    assert_eq!(slots(&server, "?fail_on_no_slot=1").0, 200, "a slot is free");
    // A generation that runs until the context is full.
    let stream = long_stream(&server);
    let start = Instant::now();
    let busy = loop {
        let (_, body) = slots(&server, "");
        let busy: Vec<Value> =
            body.as_array().expect("a list").iter().filter(|s| s["is_processing"] == true).cloned().collect();
        if busy.len() == 1 && busy[0]["next_token"][0]["n_decoded"].as_u64() > Some(1) {
            break busy[0].clone();
        }
        assert!(start.elapsed() < Duration::from_secs(20), "no slot shows the generation: {body}");
        std::thread::sleep(Duration::from_millis(5));
    };
    let prompt = busy["n_prompt_tokens"].as_u64().expect("prompt tokens");
    let decoded = busy["next_token"][0]["n_decoded"].as_u64().expect("decoded");
    assert!(prompt >= 1 && busy["n_tokens"].as_u64() >= Some(prompt + decoded - 1), "{busy}");
    assert_eq!(busy["next_token"][0]["has_next_token"], true, "{busy}");
    assert!(busy["next_token"][0]["n_remain"].as_u64().is_some_and(|n| n > 0), "{busy}");
    drop(stream);
    server.wait_for("the stream's end", |s| s.running == 0);
    let start = Instant::now();
    loop {
        let (_, body) = slots(&server, "");
        let list = body.as_array().expect("a list");
        if list.iter().all(|s| s["is_processing"] == false) {
            assert!(list.iter().any(|s| s["n_tokens"].as_u64() > Some(0)), "the ended slot keeps its prefix: {body}");
            for slot in list {
                let idle = (slot["next_token"][0]["n_remain"].as_i64(), slot["next_token"][0]["n_decoded"].as_u64());
                assert_eq!(idle, (Some(-1), Some(0)), "an idle slot has no task's budget: {slot}");
            }
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "{body}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn fail_on_no_slot_answers_503_when_every_slot_is_busy() {
    let server = Server::start(1, 4, LONG_CONTEXT);
    let stream = long_stream(&server);
    server.wait_for("the stream", |s| s.running == 1);
    let start = Instant::now();
    loop {
        let (status, body) = slots(&server, "?fail_on_no_slot=1");
        if status == 503 {
            error_of(status, &body, 503, "no slot");
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "{status} {body}");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(slots(&server, "?fail_on_no_slot=0").0, 200);
    drop(stream);
}

#[test]
fn with_the_slots_endpoint_off_slots_answers_501() {
    let options = ServerOptions { slots_endpoint: false, ..ServerOptions::default() };
    let server = Server::start_with(2, 4, 64, options);
    let (status, text) = server.call("GET", "/slots", b"");
    let body: Value = serde_json::from_str(&text).expect("json");
    error_of(status, &body, 501, "/slots with --no-slots");
    let (status, body) = server.post("/completion", &json!({"prompt": "hi", "n_predict": 1}));
    assert_eq!(status, 200, "the other routes serve on: {body}");
}
