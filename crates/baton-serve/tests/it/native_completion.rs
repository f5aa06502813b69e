//! llama-server's native `POST /completion`: its answer's fields, whole
//! and streamed, `n_probs`, `response_fields`, its prompt forms, and bad
//! input (a 400 JSON error, and the server serves on).

use serde_json::{json, Value};

use crate::server::{error_of, Server};

#[test]
fn a_whole_answer_has_llama_servers_fields() {
    let server = Server::start(1, 4, 64);
    let (status, body) = server.post(
        "/completion",
        &json!({"prompt": "hi", "n_predict": 5, "ignore_eos": true, "temperature": 0, "return_tokens": true}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["stop"], true, "{body}");
    assert_eq!(body["stop_type"], "limit", "{body}");
    assert_eq!(body["tokens_predicted"], 5, "{body}");
    assert_eq!(body["tokens"].as_array().map(Vec::len), Some(5), "{body}");
    assert_eq!(body["timings"]["predicted_n"], 5, "{body}");
    let evaluated = body["tokens_evaluated"].as_u64().expect("tokens_evaluated");
    let timings = &body["timings"];
    assert_eq!(timings["prompt_n"].as_u64().unwrap() + timings["cache_n"].as_u64().unwrap(), evaluated, "{body}");
    assert!(timings["predicted_ms"].as_f64().is_some_and(|ms| ms >= 0.0), "{body}");
    assert_eq!(body["generation_settings"]["n_predict"], 5, "{body}");
    assert_eq!(body["generation_settings"]["temperature"], 0.0, "{body}");
    assert_eq!(body["has_new_line"], body["content"].as_str().expect("content").contains('\n'), "{body}");
    assert_eq!(body["prompt"], "hi", "{body}");
    assert_eq!(body["model"], "tiny", "{body}");
    assert!(body.get("completion_probabilities").is_none(), "only with n_probs: {body}");
    // The same text as the OpenAI route draws, greedily.
    let (_, openai) =
        server.post("/v1/completions", &json!({"prompt": "hi", "max_tokens": 5, "ignore_eos": true, "temperature": 0}));
    assert_eq!(body["content"], openai["choices"][0]["text"], "{openai}");
    assert_eq!(body["generation_settings"]["logit_bias"], json!([]), "{body}");
    let (_, banned) =
        server.post("/completion", &json!({"prompt": "hi", "n_predict": 1, "logit_bias": [[7, false], [9, 2.5]]}));
    let bias = json!([{"token": 7, "bias": null}, {"token": 9, "bias": 2.5}]);
    assert_eq!(banned["generation_settings"]["logit_bias"], bias, "a ban is null: {banned}");
    // Without return_tokens, `tokens` is empty.
    let (_, body) = server.post("/completion", &json!({"prompt": "hi", "n_predict": 2, "temperature": 0}));
    assert_eq!(body["tokens"], json!([]), "{body}");
}

#[test]
fn a_stream_sends_pieces_then_the_whole_answers_fields() {
    let server = Server::start(1, 4, 64);
    let request =
        json!({"prompt": "hi", "n_predict": 6, "ignore_eos": true, "temperature": 0, "stream": true, "n_probs": 3});
    let (status, events) = server.stream("/completion", &request);
    assert_eq!(status, 200, "{events:?}");
    let events: Vec<Value> = events.iter().map(|e| serde_json::from_str(e).expect("json event")).collect();
    let (last, pieces) = events.split_last().expect("events");
    assert_eq!(last["stop"], true, "{last}");
    assert_eq!(last["stop_type"], "limit", "{last}");
    assert_eq!(last["timings"]["predicted_n"], 6, "{last}");
    let mut text = String::new();
    let mut tokens = 0;
    for piece in pieces {
        assert_eq!(piece["stop"], false, "{piece}");
        let ids = piece["tokens"].as_array().expect("tokens");
        assert!(!ids.is_empty(), "{piece}");
        tokens += ids.len();
        let probs = piece["completion_probabilities"].as_array().expect("completion_probabilities");
        assert_eq!(probs.len(), ids.len(), "{piece}");
        text.push_str(piece["content"].as_str().expect("content"));
    }
    assert_eq!(tokens, 6);
    // The final object carries only what the decoder held at the end.
    text.push_str(last["content"].as_str().expect("content"));
    let (_, whole) =
        server.post("/completion", &json!({"prompt": "hi", "n_predict": 6, "ignore_eos": true, "temperature": 0}));
    assert_eq!(whole["content"], json!(text), "{whole}");
}

#[test]
fn n_probs_gives_each_tokens_alternatives() {
    let server = Server::start(1, 4, 64);
    let (status, body) = server.post(
        "/completion",
        &json!({"prompt": "hi", "n_predict": 3, "ignore_eos": true, "temperature": 0, "n_probs": 4}),
    );
    assert_eq!(status, 200, "{body}");
    let probs = body["completion_probabilities"].as_array().expect("completion_probabilities");
    assert_eq!(probs.len(), 3, "{body}");
    for token in probs {
        assert!(token["logprob"].as_f64().is_some_and(|l| l <= 0.0), "{token}");
        assert!(token["token"].is_string() && token["bytes"].is_array(), "{token}");
        let top = token["top_logprobs"].as_array().expect("top_logprobs");
        assert_eq!(top.len(), 4, "{token}");
        // Greedy: the drawn token is the most likely one.
        assert_eq!(top[0]["id"], token["id"], "{token}");
        let logprobs: Vec<f64> = top.iter().map(|t| t["logprob"].as_f64().expect("logprob")).collect();
        assert!(logprobs.windows(2).all(|w| w[0] >= w[1]), "most likely first: {logprobs:?}");
    }
}

/// Each generated token's entry of `/completion` with `n_probs`: its id,
/// and its alternatives' ids and values (`prob` or `logprob`).
fn probs_of(server: &Server, request: Value, value: &str) -> Vec<(u64, Vec<(u64, f64)>)> {
    let (status, body) = server.post("/completion", &request);
    assert_eq!(status, 200, "{body}");
    let entries = body["completion_probabilities"].as_array().unwrap_or_else(|| panic!("{body}"));
    let top_key = if value == "prob" { "top_probs" } else { "top_logprobs" };
    entries
        .iter()
        .map(|e| {
            let top = e[top_key].as_array().unwrap_or_else(|| panic!("{top_key}: {e}"));
            let top = top.iter().map(|t| (t["id"].as_u64().expect("id"), t[value].as_f64().expect("value"))).collect();
            (e["id"].as_u64().expect("id"), top)
        })
        .collect()
}

#[test]
fn post_sampling_probs_are_the_draws_distribution() {
    let server = Server::start(1, 4, 64);
    let base = json!({"prompt": "hi", "n_predict": 4, "ignore_eos": true, "seed": 7, "n_probs": 10});
    let with = |extra: Value| {
        let mut request = base.clone();
        request.as_object_mut().expect("object").extend(extra.as_object().expect("object").clone());
        request
    };
    // Top-k 3 at temperature 1: at most 3 alternatives, summing to 1, the
    // drawn token among them.
    let kept = probs_of(&server, with(json!({"temperature": 1.0, "top_k": 3, "post_sampling_probs": true})), "prob");
    assert_eq!(kept.len(), 4);
    for (id, top) in &kept {
        assert!(!top.is_empty() && top.len() <= 3, "{top:?}");
        assert!(top.iter().all(|&(_, p)| p > 0.0 && p <= 1.0), "{top:?}");
        assert!((top.iter().map(|&(_, p)| p).sum::<f64>() - 1.0).abs() < 1e-4, "{top:?}");
        assert!(top.iter().any(|&(t, _)| t == *id), "the drawn token {id} in {top:?}");
    }
    // No filter at temperature 1: the model's probabilities (the same
    // seed draws the same tokens).
    let open = json!({"temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0});
    let mut post = open.clone();
    post["post_sampling_probs"] = json!(true);
    let after = probs_of(&server, with(post), "prob");
    let before = probs_of(&server, with(open), "logprob");
    for ((id_a, top_a), (id_b, top_b)) in after.iter().zip(&before) {
        assert_eq!(id_a, id_b);
        assert_eq!(top_a.len(), 10);
        for (&(ta, pa), &(tb, lb)) in top_a.iter().zip(top_b) {
            assert!(ta == tb && (pa - lb.exp()).abs() < 1e-4, "{top_a:?} vs {top_b:?}");
        }
    }
    // Greedy: the drawn token has it all.
    let greedy = probs_of(&server, with(json!({"temperature": 0, "post_sampling_probs": true})), "prob");
    assert!(
        greedy.iter().all(|(id, top)| top.len() == 1 && top[0].0 == *id && (top[0].1 - 1.0).abs() < 1e-6),
        "{greedy:?}"
    );
}

#[test]
fn response_fields_keep_only_the_paths_asked() {
    let server = Server::start(1, 4, 64);
    let fields = json!(["content", "generation_settings/n_predict", "prompt", "no/such"]);
    let (status, body) =
        server.post("/completion", &json!({"prompt": "hi", "n_predict": 3, "response_fields": fields}));
    assert_eq!(status, 200, "{body}");
    let object = body.as_object().expect("object");
    assert_eq!(object.len(), 3, "{body}");
    assert_eq!(body["generation_settings/n_predict"], 3, "{body}");
    assert_eq!(body["prompt"], "hi", "{body}");
    assert!(body["content"].is_string(), "{body}");
}

#[test]
fn prompts_as_ids_mixed_lists_objects_and_several() {
    let server = Server::start(2, 4, 64);
    let (_, tokens) = server.post("/tokenize", &json!({"content": "hello", "add_special": true}));
    let ids = tokens["tokens"].clone();
    let greedy = |prompt: Value| json!({"prompt": prompt, "n_predict": 3, "ignore_eos": true, "temperature": 0});
    let (status, by_text) = server.post("/completion", &greedy(json!("hello")));
    assert_eq!(status, 200, "{by_text}");
    let (status, by_ids) = server.post("/completion", &greedy(ids.clone()));
    assert_eq!((status, &by_ids["content"]), (200, &by_text["content"]), "{by_ids}");
    let (status, by_object) = server.post("/completion", &greedy(json!({"prompt_string": "hello"})));
    assert_eq!((status, &by_object["content"]), (200, &by_text["content"]), "{by_object}");
    // Several prompts: a list of answers, in order.
    let (status, several) = server.post("/completion", &greedy(json!([ids, "hello"])));
    assert_eq!(status, 200, "{several}");
    let answers = several.as_array().expect("a list");
    assert_eq!(answers.len(), 2, "{several}");
    assert_eq!((&answers[0]["index"], &answers[1]["index"]), (&json!(0), &json!(1)), "{several}");
    assert!(answers.iter().all(|a| a["content"] == by_text["content"]), "{several}");
    // Ids and text in one prompt.
    let mut mixed = ids.as_array().expect("ids").clone();
    mixed.push(json!(" world"));
    let (status, body) = server.post("/completion", &greedy(Value::Array(mixed)));
    assert_eq!(status, 200, "{body}");
    assert!(body["tokens_evaluated"].as_u64().expect("evaluated") > ids.as_array().unwrap().len() as u64, "{body}");
}

#[test]
fn a_stop_string_ends_the_answer_as_a_word() {
    let server = Server::start(1, 4, 64);
    let (_, free) =
        server.post("/completion", &json!({"prompt": "hi", "n_predict": 8, "ignore_eos": true, "temperature": 0}));
    let text = free["content"].as_str().expect("content");
    let stop: String = text.chars().skip(2).take(2).collect();
    assert!(!stop.is_empty(), "the free answer is too short: {free}");
    let (status, body) = server.post(
        "/completion",
        &json!({"prompt": "hi", "n_predict": 8, "ignore_eos": true, "temperature": 0, "stop": [stop]}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!((&body["stop_type"], &body["stopping_word"]), (&json!("word"), &json!(stop)), "{body}");
    assert!(!body["content"].as_str().expect("content").contains(&stop), "{body}");
}

#[test]
fn bad_input_gets_a_400_and_the_server_goes_on() {
    let server = Server::start(1, 4, 64);
    for (body, what) in [
        (json!({}), "no prompt"),
        (json!({"prompt": true}), "prompt a boolean"),
        (json!({"prompt": [1, -5]}), "a negative id"),
        (json!({"prompt": [1, 999999]}), "an id outside the vocabulary"),
        (
            json!({"prompt": {"prompt_string": "hi", "multimodal_data": ["aGk="]}}),
            "an image for a model without vision",
        ),
        (json!({"prompt": "hi", "n_probs": 500}), "too many alternatives"),
        (json!({"prompt": ["a", "b"], "stream": true}), "several prompts streamed"),
        (json!({"prompt": "hi", "response_fields": "content"}), "response_fields not a list"),
    ] {
        let (status, body) = server.post("/completion", &body);
        error_of(status, &body, 400, what);
    }
    let (status, body) = server.post("/completion", &json!({"prompt": "still here", "n_predict": 1}));
    assert_eq!(status, 200, "{body}");
}

/// `/metrics` under llama-server's names (`llamacpp:*`) counts what the
/// answers' `timings` say: prompt tokens evaluated and taken from the
/// cache, tokens generated; with its `Process-Start-Time-Unix` header, a
/// type and a help line for each, and rates over the tokens after the
/// first (one token: no rate).
#[test]
fn llama_servers_metrics_count_what_the_timings_say() {
    let server = Server::start(1, 4, 128);
    let (mut prompt_n, mut cache_n, mut predicted_n) = (0, 0, 0);
    for n_predict in [1, 6, 6] {
        let request = json!({"prompt": "the quick brown fox jumps", "n_predict": n_predict, "ignore_eos": true});
        let (status, body) = server.post("/completion", &request);
        assert_eq!(status, 200, "{body}");
        let t = &body["timings"];
        let count = |key: &str| t[key].as_u64().unwrap_or_else(|| panic!("{key}: {t}"));
        (prompt_n, cache_n, predicted_n) =
            (prompt_n + count("prompt_n"), cache_n + count("cache_n"), predicted_n + count("predicted_n"));
        if n_predict == 1 {
            assert_eq!(
                (t["predicted_per_second"].as_f64(), t["predicted_per_token_ms"].as_f64()),
                (Some(0.0), Some(0.0)),
                "{t}"
            );
        }
    }
    assert!(cache_n > 0, "the same prompt again comes from the prefix cache");
    let (status, head, text) = server.call_with("GET", "/metrics", &[], b"");
    assert_eq!(status, 200, "{text}");
    let started =
        head.lines().find_map(|l| l.to_ascii_lowercase().strip_prefix("process-start-time-unix: ").map(str::to_string));
    let started: u64 = started.and_then(|s| s.trim().parse().ok()).unwrap_or_else(|| panic!("no start time: {head}"));
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs();
    assert!(started <= now && now - started < 600, "started at {started}, now {now}");
    let value = |name: &str| {
        let full = format!("llamacpp:{name}");
        assert!(text.contains(&format!("# HELP {full} ")) && text.contains(&format!("# TYPE {full} ")), "{full}");
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{full} ")).and_then(|v| v.parse::<f64>().ok()))
            .unwrap_or_else(|| panic!("{full} missing: {text}"))
    };
    assert_eq!(value("prompt_tokens_total"), prompt_n as f64, "{text}");
    assert_eq!(value("prompt_tokens_cached_total"), cache_n as f64, "{text}");
    assert_eq!(value("tokens_predicted_total"), predicted_n as f64, "{text}");
    assert!(value("n_decode_total") > 0.0 && value("requests_processing") == 0.0, "{text}");
    assert!(value("prompt_seconds_total") > 0.0 && value("tokens_predicted_seconds_total") > 0.0, "{text}");
    assert!(value("n_tokens_max") >= 5.0 + 6.0 && value("n_busy_slots_per_decode") == 1.0, "{text}");
    assert_eq!(value("spec_decode_num_drafts_total"), 0.0, "no drafts");
}
