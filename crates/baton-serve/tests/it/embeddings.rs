//! `POST /v1/embeddings` on the tiny synthetic model: OpenAI's shape, unit
//! vectors, the same text the same vector however it is sent, bad input a
//! 4xx, and a generation's text unchanged by embeddings computed beside it.

use serde_json::{json, Value};

use crate::server::*;

fn vectors(body: &Value) -> Vec<Vec<f64>> {
    let data = body["data"].as_array().expect("data");
    data.iter()
        .enumerate()
        .map(|(i, d)| {
            assert_eq!((d["object"].as_str(), d["index"].as_u64()), (Some("embedding"), Some(i as u64)));
            d["embedding"].as_array().expect("embedding").iter().map(|x| x.as_f64().expect("a number")).collect()
        })
        .collect()
}

#[test]
fn embeddings_have_openais_shape_and_unit_length() {
    let server = Server::start(2, 8, 256);
    let (status, one) = server.post("/v1/embeddings", &json!({"model": "tiny", "input": "hello there"}));
    assert_eq!(status, 200, "{one}");
    assert_eq!(one["object"], "list");
    assert_eq!(one["model"], "tiny");
    let single = vectors(&one);
    assert_eq!(single.len(), 1);
    let norm: f64 = single[0].iter().map(|x| x * x).sum::<f64>().sqrt();
    assert!((norm - 1.0).abs() < 1e-5, "unit length: {norm}");
    let tokens = one["usage"]["prompt_tokens"].as_u64().expect("usage");
    assert!(tokens > 0 && one["usage"]["total_tokens"].as_u64() == Some(tokens));

    let (status, many) =
        server.post("/v1/embeddings", &json!({"input": ["hello there", "something else", "hello there"]}));
    assert_eq!(status, 200, "{many}");
    let many = vectors(&many);
    assert_eq!(many.len(), 3);
    assert_eq!(many[0], single[0], "the same text, the same vector, alone or in a list");
    assert_eq!(many[2], single[0]);
    assert_ne!(many[1], single[0]);
    assert_eq!(many[1].len(), single[0].len());

    let (status, ids) = server.post("/v1/embeddings", &json!({"input": [[5, 6, 7], [8, 9]]}));
    assert_eq!(status, 200, "{ids}");
    assert_eq!(vectors(&ids).len(), 2);
    assert_eq!(ids["usage"]["prompt_tokens"], 5);
}

#[test]
fn bad_embedding_requests_get_4xx_and_the_server_goes_on() {
    let server = Server::start(1, 4, 64);
    let cases = [
        (json!({"input": []}), 400, "input"),
        (json!({"input": 5}), 400, ""),
        (json!({}), 400, ""),
        (json!({"input": "x", "encoding_format": "hex"}), 400, "encoding_format"),
        (json!({"input": "x", "dimensions": 3}), 400, "dimensions"),
        (json!({"input": [[1, 2, 999_999]]}), 400, "prompt"),
        (json!({"input": [[]]}), 400, "prompt"),
        (json!({"input": "word ".repeat(200)}), 400, ""),
    ];
    for (body, want, param) in cases {
        let (status, answer) = server.post("/v1/embeddings", &body);
        assert_eq!(status, want, "{body}: {answer}");
        assert!(answer["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{answer}");
        if !param.is_empty() {
            assert_eq!(answer["error"]["param"], param, "{answer}");
        }
    }
    let (status, _) = server.post("/v1/embeddings", &json!({"input": "still serving"}));
    assert_eq!(status, 200);
}

#[test]
fn a_generation_beside_embeddings_keeps_its_text() {
    let server = Server::start(2, 16, 256);
    let request = json!({"prompt": [1, 2, 3, 4, 5], "max_tokens": 40, "temperature": 0, "ignore_eos": true});
    let (status, alone) = server.post("/v1/completions", &request);
    assert_eq!(status, 200, "{alone}");
    let (status, beside) = std::thread::scope(|scope| {
        let generation = scope.spawn(|| server.post("/v1/completions", &request));
        for i in 0..8 {
            let (status, body) = server.post("/v1/embeddings", &json!({"input": format!("text number {i}")}));
            assert_eq!(status, 200, "{body}");
        }
        generation.join().expect("the generation's thread")
    });
    assert_eq!(status, 200, "{beside}");
    assert_eq!(beside["choices"][0]["text"], alone["choices"][0]["text"]);
}

/// One request of up to 256 inputs (the README's limit) is admitted on an
/// idle server whatever its queue's limit: the request takes one place in
/// the queue, not one per input, and nothing of it holds a place after.
#[test]
fn a_request_of_256_inputs_is_admitted_on_an_idle_server() {
    let server = Server::start(2, 1, 64);
    let inputs: Vec<String> = (0..256).map(|i| format!("text {i}")).collect();
    for round in 0..2 {
        let (status, body) = server.post("/v1/embeddings", &json!({"input": inputs}));
        assert_eq!(status, 200, "round {round}: {body}");
        assert_eq!(vectors(&body).len(), 256, "round {round}");
        server.wait_for("the queue to empty", |s| s.queued == 0);
    }
}
