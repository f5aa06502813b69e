//! What llama-server's chat answers add when a request asks, and how it
//! ends a conversation: a last assistant message continued (its
//! assistant prefill, `continue_final_message`) and refused where
//! llama-server refuses it; `verbose`'s `__verbose`; a stream's
//! `timings_per_token` and `return_progress`.

use baton_serve::engine::EngineOptions;
use baton_serve::http::ServerOptions;
use serde_json::{json, Value};

use crate::server::{error_of, read_stream, Server, BODY_LIMIT};

/// The prompt a chat request renders to, as `__verbose` tells it.
fn verbose_prompt(server: &Server, request: Value) -> String {
    let mut request = request;
    request["verbose"] = json!(true);
    request["max_tokens"] = json!(1);
    let (status, body) = server.post("/v1/chat/completions", &request);
    assert_eq!(status, 200, "{body}");
    assert!(body["__verbose"]["content"].is_string(), "{body}");
    body["__verbose"]["prompt"].as_str().unwrap_or_else(|| panic!("no __verbose.prompt: {body}")).to_string()
}

#[test]
fn a_last_assistant_message_is_continued_unless_asked_otherwise() {
    let server = Server::start(1, 4, 256);
    let user = json!({"role": "user", "content": "islands"});
    let said = json!({"role": "assistant", "content": "sailed to"});
    // Asked for nothing, a last assistant message is continued (prefill).
    let prefill = verbose_prompt(&server, json!({"messages": [user, said]}));
    assert!(prefill.ends_with("<|im_start|>assistant\nsailed to"), "{prefill:?}");
    let explicit = verbose_prompt(
        &server,
        json!({"messages": [user, said], "continue_final_message": true, "add_generation_prompt": false}),
    );
    assert_eq!(explicit, prefill);
    // add_generation_prompt: true opens a new turn after it.
    let new_turn = verbose_prompt(&server, json!({"messages": [user, said], "add_generation_prompt": true}));
    assert!(new_turn.ends_with("sailed to<|im_end|>\n<|im_start|>assistant\n"), "{new_turn:?}");
    // Without the generation prompt, the last message is closed.
    let closed = verbose_prompt(&server, json!({"messages": [user], "add_generation_prompt": false}));
    assert!(closed.ends_with("islands<|im_end|>\n"), "{closed:?}");
    // Without verbose, no __verbose.
    let (status, plain) = server.post("/v1/chat/completions", &json!({"messages": [user], "max_tokens": 1}));
    assert!(status == 200 && plain.get("__verbose").is_none(), "{plain}");

    let refused = [
        (json!({"messages": [user, said], "continue_final_message": true, "add_generation_prompt": true}), "both"),
        (json!({"messages": [user], "continue_final_message": true}), "a last message not the assistant's"),
        (json!({"messages": [user, said, said]}), "two assistant messages at the end"),
    ];
    for (request, what) in refused {
        let (status, body) = server.post("/v1/chat/completions", &request);
        error_of(status, &body, 400, what);
    }
    // Two in a row are fine when the last is not continued.
    let (status, body) = server.post(
        "/v1/chat/completions",
        &json!({"messages": [user, said, said], "add_generation_prompt": true, "max_tokens": 1}),
    );
    assert_eq!(status, 200, "{body}");
}

#[test]
fn timings_per_token_ride_the_chunks_after_the_first() {
    let server = Server::start(1, 4, 256);
    let request = json!({
        "messages": [{"role": "user", "content": "islands"}], "max_tokens": 5, "ignore_eos": true,
        "stream": true, "stream_options": {"include_usage": true}, "timings_per_token": true,
    });
    let (status, events) = server.stream("/v1/chat/completions", &request);
    assert_eq!(status, 200);
    let (_, _, usage) = read_stream(&events, true);
    let chunks: Vec<Value> =
        events[..events.len() - 1].iter().map(|e| serde_json::from_str(e).expect("JSON")).collect();
    assert!(chunks[0].get("timings").is_none(), "the opening chunk: {}", chunks[0]);
    let mut predicted = Vec::new();
    for chunk in &chunks[1..] {
        let timings = &chunk["timings"];
        assert!(timings["prompt_per_second"].is_number() && timings["predicted_ms"].is_number(), "{chunk}");
        predicted.push(timings["predicted_n"].as_u64().unwrap_or_else(|| panic!("{chunk}")));
    }
    assert!(predicted.windows(2).all(|w| w[0] <= w[1]), "{predicted:?}");
    let last = chunks.last().expect("the usage chunk");
    assert!(last["choices"].as_array().is_some_and(Vec::is_empty), "{last}");
    assert_eq!(Some(last["timings"]["predicted_n"].clone()), usage.map(|u| u["completion_tokens"].clone()), "{last}");
    assert_eq!(last["timings"]["predicted_n"], 5, "{last}");
    // Not asked: no timings anywhere.
    let mut plain = request.clone();
    plain["timings_per_token"] = Value::Null;
    let (_, events) = server.stream("/v1/chat/completions", &plain);
    assert!(events.iter().all(|e| !e.contains("\"timings\"")), "{events:?}");
}

/// The `prompt_progress` reports of a streamed chat of `content`.
fn progress(server: &Server, content: &str) -> Vec<(u64, u64, u64)> {
    let request = json!({
        "messages": [{"role": "user", "content": content}], "max_tokens": 2, "stream": true, "return_progress": true,
    });
    let (status, events) = server.stream("/v1/chat/completions", &request);
    assert_eq!(status, 200);
    read_stream(&events, true);
    let chunks = events[..events.len() - 1].iter().map(|e| serde_json::from_str::<Value>(e).expect("JSON"));
    let field = |p: &Value, name: &str| p[name].as_u64().unwrap_or_else(|| panic!("{name}: {p}"));
    chunks
        .filter_map(|chunk| chunk.get("prompt_progress").cloned())
        .map(|p| (field(&p, "total"), field(&p, "cache"), field(&p, "processed")))
        .collect()
}

#[test]
fn return_progress_reports_each_chunk_of_the_prompt_read() {
    // Chunks of 8 prompt tokens.
    let engine = EngineOptions { parallel: 1, queue: 4, prefill_chunk: 8, ..EngineOptions::default() };
    let server =
        Server::start_engine(256, engine, ServerOptions { body_limit: BODY_LIMIT, ..ServerOptions::default() });
    let content = "islands sailed to the far shore of the long sea and back again";
    let reports = progress(&server, content);
    let (total, cache, first) = reports[0];
    assert_eq!((cache, first), (0, 0), "nothing cached at first: {reports:?}");
    assert_eq!(reports.len() as u64, 1 + total.div_ceil(8), "one report per chunk after the first: {reports:?}");
    assert!(reports.windows(2).all(|w| w[0].2 < w[1].2 && w[0].0 == w[1].0), "{reports:?}");
    assert_eq!(reports.last().map(|r| r.2), Some(total), "{reports:?}");
    // Again: the cache holds all but the last token, read in one chunk.
    let again = progress(&server, content);
    assert_eq!(again.len(), 2, "{again:?}");
    assert!(again[0].1 > 0 && again[0].1 == again[0].2 && again[1].2 == total, "{again:?}");
}

/// llama-server's native `/completion` streams `prompt_progress` too (with
/// `time_ms` since reading began: 0 at the first report, never going
/// back), each report with the prompt's `timings` so far under
/// `timings_per_token`; the text's chunks follow.
#[test]
fn the_native_completion_reports_progress_with_its_timings() {
    let engine = EngineOptions { parallel: 1, queue: 4, prefill_chunk: 8, ..EngineOptions::default() };
    let server =
        Server::start_engine(256, engine, ServerOptions { body_limit: BODY_LIMIT, ..ServerOptions::default() });
    let request = json!({
        "prompt": "islands sailed to the far shore of the long sea and back again", "n_predict": 3,
        "stream": true, "return_progress": true, "timings_per_token": true,
    });
    let (status, events) = server.stream("/completion", &request);
    assert_eq!(status, 200, "{events:?}");
    let chunks: Vec<Value> = events.iter().map(|e| serde_json::from_str(e).expect("JSON")).collect();
    let reports: Vec<&Value> = chunks.iter().filter(|c| c.get("prompt_progress").is_some()).collect();
    assert!(reports.len() > 2, "a report per chunk of 8 tokens: {chunks:?}");
    let first = reports[0];
    assert_eq!(first["prompt_progress"]["time_ms"], 0.0, "{first}");
    assert_eq!((first["timings"]["prompt_n"].as_u64(), first["timings"]["prompt_ms"].as_f64()), (Some(0), Some(0.0)));
    let times: Vec<f64> = reports.iter().map(|r| r["prompt_progress"]["time_ms"].as_f64().expect("time_ms")).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    for report in &reports {
        let (p, t) = (&report["prompt_progress"], &report["timings"]);
        let read = p["processed"].as_u64().expect("processed") - p["cache"].as_u64().expect("cache");
        assert_eq!((t["prompt_n"].as_u64(), t["prompt_ms"].as_f64()), (Some(read), p["time_ms"].as_f64()), "{report}");
        assert_eq!((report["content"].as_str(), report["stop"].as_bool()), (Some(""), Some(false)), "{report}");
    }
    let last = chunks.last().expect("the final object");
    assert_eq!((last["stop"].as_bool(), last["tokens_predicted"].as_u64()), (Some(true), Some(3)), "{last}");
    // Not asked: no report.
    let plain = json!({"prompt": "islands sailed", "n_predict": 2, "stream": true});
    let (_, events) = server.stream("/completion", &plain);
    assert!(events.iter().all(|e| !e.contains("prompt_progress")), "{events:?}");
}
