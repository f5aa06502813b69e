//! `n` > 1 on both generation endpoints: `n` choices, each its own
//! sequence (the prompt read once, the others copying its positions),
//! indexed, with the usage summed as OpenAI sums it; streamed as chunks
//! tagged by index; `n` outside 1 to 16 or of another type gets 400.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::server::*;

/// Per choice index, its streamed text and finish reason.
type Streamed = BTreeMap<u64, (String, Option<String>)>;

/// Each index's streamed text and finish reason, and the usage chunk's.
fn by_index(events: &[String]) -> (Streamed, Option<Value>) {
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"), "{events:?}");
    let (mut texts, mut usage) = (BTreeMap::new(), None);
    for event in &events[..events.len() - 1] {
        let chunk: Value = serde_json::from_str(event).expect("a chunk is JSON");
        if chunk["usage"].is_object() {
            usage = Some(chunk["usage"].clone());
        }
        for choice in chunk["choices"].as_array().expect("choices") {
            let entry: &mut (String, Option<String>) =
                texts.entry(choice["index"].as_u64().expect("index")).or_default();
            let piece = choice["text"].as_str().or(choice["delta"]["content"].as_str()).unwrap_or("");
            entry.0.push_str(piece);
            if let Some(reason) = choice["finish_reason"].as_str() {
                assert!(entry.1.is_none(), "one finish per choice: {events:?}");
                entry.1 = Some(reason.to_string());
            }
        }
    }
    (texts, usage)
}

#[test]
fn n_choices_are_indexed_and_counted_as_openai_counts_them() {
    let server = Server::start(4, 8, 1024);
    let prompt = "the quick brown fox jumps over the lazy dog ".repeat(6);
    let ask = |n: u64| {
        let request = json!({"prompt": prompt, "n": n, "max_tokens": 8, "ignore_eos": true, "temperature": 1.0,
            "seed": 11});
        let (status, body) = server.post("/v1/completions", &request);
        assert_eq!(status, 200, "{body}");
        body
    };
    let one = ask(1);
    let evaluated_once = server.engine.stats().prompt_tokens;
    let four = ask(4);
    let choices = four["choices"].as_array().expect("choices");
    assert_eq!(choices.len(), 4, "{four}");
    for (i, choice) in choices.iter().enumerate() {
        assert_eq!(choice["index"], i, "{four}");
        assert_eq!(choice["finish_reason"], "length", "{four}");
    }
    assert_eq!(choices[0]["text"], one["choices"][0]["text"], "the first choice is the request's alone");
    let texts: std::collections::BTreeSet<&str> = choices.iter().filter_map(|c| c["text"].as_str()).collect();
    assert!(texts.len() > 1, "each choice draws with its own seed: {four}");
    let prompt_tokens = one["usage"]["prompt_tokens"].as_u64().expect("prompt tokens");
    assert_eq!(four["usage"]["prompt_tokens"], prompt_tokens, "the prompt counts once");
    assert_eq!(four["usage"]["completion_tokens"], 32, "the completions are summed");
    assert_eq!(four["usage"]["total_tokens"], prompt_tokens + 32);
    // The first choice reused the first request's slot; the others
    // copied the first's positions: far fewer than 4 prompts evaluated.
    let evaluated = server.engine.stats().prompt_tokens - evaluated_once;
    assert!(evaluated < prompt_tokens, "{evaluated} prompt tokens evaluated for 4 choices of {prompt_tokens}");
}

#[test]
fn n_choices_stream_as_chunks_tagged_by_index_as_whole() {
    let server = Server::start(2, 8, 1024);
    for (path, extra) in [
        ("/v1/completions", json!({"prompt": "once upon a time"})),
        ("/v1/chat/completions", json!({"messages": [{"role": "user", "content": "hi"}]})),
    ] {
        let mut request = json!({"n": 3, "max_tokens": 6, "ignore_eos": true, "temperature": 1.0, "seed": 3});
        request.as_object_mut().expect("object").extend(extra.as_object().expect("object").clone());
        let (status, whole) = server.post(path, &request);
        assert_eq!(status, 200, "{whole}");
        request["stream"] = json!(true);
        request["stream_options"] = json!({"include_usage": true});
        let (status, events) = server.stream(path, &request);
        assert_eq!(status, 200);
        let (texts, usage) = by_index(&events);
        assert_eq!(texts.len(), 3, "{path}: {events:?}");
        for (i, choice) in whole["choices"].as_array().expect("choices").iter().enumerate() {
            let text = choice["text"].as_str().or(choice["message"]["content"].as_str()).expect("text");
            let streamed = &texts[&(i as u64)];
            assert_eq!((streamed.0.as_str(), streamed.1.as_deref()), (text, Some("length")), "{path} choice {i}");
        }
        let usage = usage.expect("a usage chunk");
        assert_eq!(usage["completion_tokens"], 18, "{path}: {usage}");
        assert_eq!(usage["prompt_tokens"], whole["usage"]["prompt_tokens"], "{path}");
    }
}

#[test]
fn n_outside_its_range_or_of_another_type_gets_400() {
    let server = Server::start(1, 4, 512);
    for n in [json!(0), json!(17), json!(1000), json!("2"), json!(-1), json!(2.5), json!([2]), json!(u64::MAX)] {
        for path in ["/v1/completions", "/v1/chat/completions"] {
            let request = json!({"prompt": "a", "messages": [{"role": "user", "content": "a"}], "n": n,
                "max_tokens": 2});
            let (status, body) = server.post(path, &request);
            error_of(status, &body, 400, &format!("{path} n = {n}"));
        }
    }
    let (status, body) = server.post("/v1/completions", &json!({"prompt": "a", "n": null, "max_tokens": 2}));
    assert_eq!((status, body["choices"].as_array().map(Vec::len)), (200, Some(1)), "{body}");
}
