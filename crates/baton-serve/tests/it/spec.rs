//! Speculative decoding through the server: a request with
//! `speculative.n_max` (or a server whose default drafts) gets the text and
//! log-probabilities it gets without drafts, byte for byte, with several
//! clients at once (each sequence's drafts verified in the shared step),
//! greedy and seeded with penalties, stop strings and a JSON object's
//! constraint; `/metrics` counts
//! the drafted and accepted tokens.

use baton_core::DType;
use baton_gen::speculative::{SpecParams, SpecType, StepCost};
use baton_serve::engine::EngineOptions;
use baton_serve::http::ServerOptions;
use baton_synth::SynthShape;
use serde_json::{json, Value};

use crate::server::*;

/// The requests: prompts that repeat and one that does not, greedy and
/// sampled, with penalties, stop strings and log-probabilities.
pub(super) fn requests() -> Vec<Value> {
    let repeating = "one two three four five six seven ".repeat(5);
    let other = "a b c d e f g h i j k l m n o p q r s t";
    let mut all = Vec::new();
    for prompt in [repeating.as_str(), other] {
        all.push(json!({"prompt": prompt, "max_tokens": 40, "ignore_eos": true, "temperature": 0}));
        all.push(json!({"prompt": prompt, "max_tokens": 40, "ignore_eos": true, "temperature": 0.9,
            "top_k": 40, "seed": 5, "repeat_penalty": 1.1, "repeat_last_n": 16, "frequency_penalty": 0.2}));
        all.push(json!({"prompt": prompt, "max_tokens": 40, "ignore_eos": true, "temperature": 0.7, "seed": 9,
            "logprobs": 2}));
        all.push(json!({"prompt": prompt, "max_tokens": 40, "ignore_eos": true, "temperature": 0, "stop": ["ee"]}));
        // Held to a JSON object: the constraint's state and its redraws
        // per position.
        all.push(json!({"prompt": prompt, "max_tokens": 40, "temperature": 0.8, "seed": 3,
            "response_format": {"type": "json_object"}}));
    }
    all
}

/// What must not change: the text, the finish reason, the usage and the
/// log-probabilities.
pub(super) fn answer(body: &Value) -> Value {
    let choice = &body["choices"][0];
    json!([choice["text"], choice["finish_reason"], choice["logprobs"], body["usage"]["completion_tokens"]])
}

pub(super) fn metric(server: &Server, name: &str) -> f64 {
    let (status, text) = server.call("GET", "/metrics", b"");
    assert_eq!(status, 200);
    text.lines()
        .find_map(|line| line.strip_prefix(name).and_then(|rest| rest.trim().parse().ok()))
        .unwrap_or_else(|| panic!("{name} missing: {text}"))
}

/// The server's drafted and accepted tokens so far (`/metrics`).
pub(super) fn draft_counts(server: &Server) -> (f64, f64) {
    (metric(server, "baton_drafted_tokens_total"), metric(server, "baton_draft_accepted_tokens_total"))
}

/// Asserts each answer is the one wanted, naming the request and `what`.
fn assert_answers(got: &[Value], want: &[Value], bodies: &[Value], what: &str) {
    for (i, (got, want)) in got.iter().zip(want).enumerate() {
        assert_eq!(got, want, "request {i} ({}) changed {what}", bodies[i]);
    }
}

pub(super) fn post_all(server: &Server, bodies: &[Value]) -> Vec<Value> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = bodies
            .iter()
            .map(|body| {
                scope.spawn(move || {
                    let (status, answer) = server.post("/v1/completions", body);
                    assert_eq!(status, 200, "{answer}");
                    answer
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("client")).collect()
    })
}

/// A server whose drafts are all verified (rows that cost nothing: the
/// budget's rule, which drafts little beside other sequences, is tested
/// in baton-gen), drafting by default as `kind` says.
fn server(parallel: usize, kind: SpecType, draft_max: usize) -> Server {
    let spec = SpecParams { kind, draft_max, cost: StepCost::FREE, ..SpecParams::default() };
    let engine = EngineOptions { parallel, queue: 16, prefill_chunk: 32, spec, ..EngineOptions::default() };
    Server::start_engine(512, engine, ServerOptions { body_limit: BODY_LIMIT, ..Default::default() })
}

#[test]
fn drafting_requests_get_the_answers_of_plain_ones_with_clients_at_once() {
    let server = server(4, SpecType::None, 8);
    let plain: Vec<Value> = requests().iter().map(|r| answer(&server.post("/v1/completions", r).1)).collect();
    assert_eq!(metric(&server, "baton_drafted_tokens_total"), 0.0, "no drafts unless asked");
    let drafting: Vec<Value> = requests()
        .into_iter()
        .map(|mut r| {
            r["speculative.n_max"] = json!(6);
            r
        })
        .collect();
    // All at once, four running together and the rest queued.
    let got: Vec<Value> = post_all(&server, &drafting).iter().map(answer).collect();
    assert_answers(&got, &plain, &drafting, "with drafts");
    let (drafted, accepted) = draft_counts(&server);
    eprintln!("{drafted} drafted tokens, {accepted} accepted");
    assert!(accepted > 0.0 && accepted < drafted, "drafts both accepted and rejected: {accepted} of {drafted}");
    // Plain and drafting requests side by side.
    let mixed: Vec<Value> =
        requests().into_iter().zip(drafting).enumerate().map(|(i, (p, d))| if i % 2 == 0 { p } else { d }).collect();
    let got: Vec<Value> = post_all(&server, &mixed).iter().map(answer).collect();
    assert_eq!(got, plain, "mixed plain and drafting clients");
}

#[test]
fn a_server_that_drafts_by_default_gives_the_same_answers_and_a_request_may_opt_out() {
    let drafting = server(3, SpecType::Ngram, 4);
    let plain = Server::start(3, 16, 512);
    let want: Vec<Value> = requests().iter().map(|r| answer(&plain.post("/v1/completions", r).1)).collect();
    let got: Vec<Value> = post_all(&drafting, &requests()).iter().map(answer).collect();
    assert_eq!(got, want);
    let drafted = metric(&drafting, "baton_drafted_tokens_total");
    assert!(drafted > 0.0, "the server's default drafts");
    let mut off = requests().remove(0);
    off["speculative.n_max"] = json!(0);
    assert_eq!(answer(&drafting.post("/v1/completions", &off).1), want[0]);
    assert_eq!(metric(&drafting, "baton_drafted_tokens_total"), drafted, "n_max 0 drafts nothing");
}

/// A server drafting with a draft model (`-md`) for four clients at once
/// (their drafts made together, a slot each): the answers without drafts,
/// with the served model's own weights as the draft (drafts accepted) and
/// with other weights (drafts rejected).
#[test]
fn a_draft_model_drafts_for_clients_at_once_and_changes_no_answer() {
    let plain = Server::start(4, 16, 512);
    let want: Vec<Value> = requests().iter().map(|r| answer(&plain.post("/v1/completions", r).1)).collect();
    for (seed, itself) in [(11, true), (12, false)] {
        let spec = SpecParams { kind: SpecType::Ngram, draft_max: 4, cost: StepCost::FREE, ..SpecParams::default() };
        let engine = EngineOptions { parallel: 4, queue: 16, prefill_chunk: 32, spec, ..EngineOptions::default() };
        let options = ServerOptions { body_limit: BODY_LIMIT, ..Default::default() };
        let server = Server::start_drafting(512, engine, options, Some(seed));
        let got: Vec<Value> = post_all(&server, &requests()).iter().map(answer).collect();
        assert_eq!(got, want, "draft model seeded {seed}");
        let (drafted, accepted) = draft_counts(&server);
        eprintln!("draft model seeded {seed}: {drafted} drafted, {accepted} accepted");
        assert!(drafted > 0.0, "seeded {seed}: the draft model drafted");
        if itself {
            assert!(accepted > 0.0, "the model's own drafts are accepted: {accepted} of {drafted}");
        }
    }
}

/// A hybrid model (qwen35moe: Gated DeltaNet layers beside attention)
/// drafting by default for three clients at once: each sequence's
/// recurrent state is cut back to its accepted drafts from the states the
/// shared step kept after each of its rows, and the answers are those
/// without drafts. The toy's text never repeats, so half the requests bias
/// three tokens (`logit_bias`): their text is made of them and n-grams find
/// drafts that hold.
#[test]
fn a_hybrid_model_verifies_drafts_for_clients_at_once_and_changes_no_answer() {
    let shape = (SynthShape::Qwen35Moe, DType::Q8_0);
    let engine = |spec: SpecParams| EngineOptions {
        parallel: 3,
        queue: 16,
        prefill_chunk: 32,
        spec,
        ..EngineOptions::default()
    };
    let options = || ServerOptions { body_limit: BODY_LIMIT, ..Default::default() };
    let bodies: Vec<Value> = requests()
        .into_iter()
        .enumerate()
        .map(|(i, mut r)| {
            if i % 2 == 0 {
                r["logit_bias"] = json!({"3": 20, "7": 20, "11": 20});
            }
            r
        })
        .collect();
    let plain = Server::start_shape_engine(shape, 512, engine(SpecParams::default()), options());
    let want: Vec<Value> = bodies.iter().map(|r| answer(&plain.post("/v1/completions", r).1)).collect();
    let spec = SpecParams { kind: SpecType::Ngram, draft_max: 4, cost: StepCost::FREE, ..SpecParams::default() };
    let drafting = Server::start_shape_engine(shape, 512, engine(spec), options());
    let got: Vec<Value> = post_all(&drafting, &bodies).iter().map(answer).collect();
    assert_answers(&got, &want, &bodies, "with drafts");
    let (drafted, accepted) = draft_counts(&drafting);
    eprintln!("qwen35moe: {drafted} drafted tokens, {accepted} accepted");
    assert!(accepted > 0.0 && accepted < drafted, "drafts both accepted and rejected: {accepted} of {drafted}");
    // Hybrid draft models (`-md`), a slot each, their recurrent states
    // back to their checkpoints after rejected drafts: the served model's
    // own weights (drafts accepted) and a qwen35 of other weights.
    for (draft, itself) in
        [((SynthShape::Qwen35Moe, DType::Q8_0, 11), true), ((SynthShape::Qwen35, DType::F32, 12), false)]
    {
        let spec = SpecParams { kind: SpecType::Ngram, draft_max: 4, cost: StepCost::FREE, ..SpecParams::default() };
        let drafter = Drafter::ModelOf(draft.0, draft.1, draft.2);
        let server = Server::start_shape_with(shape, 512, (engine(spec), drafter), options());
        let got: Vec<Value> = post_all(&server, &bodies).iter().map(answer).collect();
        assert_answers(&got, &want, &bodies, &format!("with the draft model {draft:?}"));
        let (drafted, accepted) = draft_counts(&server);
        eprintln!("qwen35moe, draft model {draft:?}: {drafted} drafted tokens, {accepted} accepted");
        assert!(drafted > 0.0 && (!itself || accepted > 0.0), "draft model {draft:?}: {accepted} of {drafted}");
    }
}
