//! Drafting with the model's own prediction head through the server
//! (`--spec-type mtp`, [`Engine::start_mtp`]) on the qwen35 and qwen35moe
//! toys, whose files hold an MTP block: three clients at once get the text
//! and log-probabilities they get from a server without drafts, byte for
//! byte, greedy and seeded (each sequence drafting with its own head, its
//! hidden states read with the step's logits); `/metrics` counts the
//! head's drafts; `speculative.n_max: 0` turns it off. A request that asks
//! for the head on a server without one, and a server started with it on a
//! file without the block, are refused by name. Over a paged cache too small
//! for the load (steps retried, sequences preempted and read again with
//! their heads), every request still gets its tokens. The toys' heads are
//! random weights: their drafts are rarely accepted (printed, not asserted).

use baton_core::sync::WaitPolicy;
use baton_core::DType;
use baton_gen::speculative::{SpecError, SpecParams, SpecType, StepCost};
use baton_gen::SamplingParams;
use baton_model::{LoadOptions, Model};
use baton_serve::engine::{Engine, EngineError, EngineOptions, GenerateRequest};
use baton_serve::http::ServerOptions;
use baton_synth::SynthShape;
use baton_testkit::devices::cpus;
use baton_testkit::synth::{synth_model, tiny_model};
use serde_json::{json, Value};

use super::spec::{answer, metric, post_all, requests};
use crate::kit::{drain, paged};
use crate::server::*;

fn engine(spec: SpecParams) -> EngineOptions {
    EngineOptions { parallel: 3, queue: 16, prefill_chunk: 32, spec, ..EngineOptions::default() }
}

fn options() -> ServerOptions {
    ServerOptions { body_limit: BODY_LIMIT, ..Default::default() }
}

fn drafted(server: &Server) -> f64 {
    metric(server, "baton_drafted_tokens_total")
}

/// The head drafting by default for three clients at once, every draft
/// verified (rows that cost nothing) and as the measured cost allows (the
/// budget stops drafting and starts again: steps without hidden states
/// between), on both hybrid toys: the answers of a server without drafts.
#[test]
fn the_models_head_drafts_for_clients_at_once_and_changes_no_answer() {
    for shape in [(SynthShape::Qwen35, DType::F32), (SynthShape::Qwen35Moe, DType::F32)] {
        let plain = Server::start_shape_engine(shape, 512, engine(SpecParams::default()), options());
        let want: Vec<Value> = requests().iter().map(|r| answer(&plain.post("/v1/completions", r).1)).collect();
        for cost in [StepCost::FREE, StepCost::MEASURED] {
            let spec = SpecParams { kind: SpecType::Mtp, draft_max: 4, cost, ..SpecParams::default() };
            let server = Server::start_shape_with(shape, 512, (engine(spec), Drafter::Head), options());
            let got: Vec<Value> = post_all(&server, &requests()).iter().map(answer).collect();
            for (i, (got, want)) in got.iter().zip(&want).enumerate() {
                assert_eq!(got, want, "{} ({cost:?}): request {i} changed with the head's drafts", shape.0);
            }
            let accepted = metric(&server, "baton_draft_accepted_tokens_total");
            eprintln!("{} mtp ({cost:?}): {} drafted tokens, {accepted} accepted", shape.0, drafted(&server));
            if cost == StepCost::FREE {
                assert!(drafted(&server) > 0.0, "{}: the head drafted nothing", shape.0);
                // Plain and drafting requests side by side; n_max 0 drafts
                // nothing.
                let before = drafted(&server);
                let mut off = requests().remove(0);
                off["speculative.n_max"] = json!(0);
                assert_eq!(answer(&server.post("/v1/completions", &off).1), want[0]);
                assert_eq!(drafted(&server), before, "speculative.n_max 0 drafts nothing");
                let mixed: Vec<Value> = requests()
                    .into_iter()
                    .enumerate()
                    .map(|(i, mut r)| {
                        if i % 2 == 0 {
                            r["speculative.n_max"] = json!(0);
                        }
                        r
                    })
                    .collect();
                let got: Vec<Value> = post_all(&server, &mixed).iter().map(answer).collect();
                assert_eq!(got, want, "{}: plain and drafting clients at once", shape.0);
            }
        }
    }
}

/// A request naming the head on a server started without it gets a 400
/// naming `speculative.type` (as does an unknown type); a request naming
/// n-grams on a server drafting with the head drafts by n-grams, with the
/// same answer; an engine started with the head on a file without the
/// block is refused by name.
#[test]
fn asking_for_the_head_where_there_is_none_is_refused_by_name() {
    let plain = Server::start(2, 16, 512);
    let mut body = requests().remove(0);
    let want = answer(&plain.post("/v1/completions", &body).1);
    for (kind, wanted) in [("mtp", "--spec-type mtp"), ("eagle", "none, ngram, mtp")] {
        body["speculative.type"] = json!(kind);
        let (status, error) = plain.post("/v1/completions", &body);
        assert_eq!(status, 400, "speculative.type {kind}: {error}");
        assert_eq!(error["error"]["param"], "speculative.type", "{error}");
        let message = error["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(wanted), "speculative.type {kind}: {message}");
    }
    body["speculative.type"] = json!("ngram");
    assert_eq!(answer(&plain.post("/v1/completions", &body).1), want, "n-grams asked by type");

    let shape = (SynthShape::Qwen35, DType::F32);
    let spec = SpecParams { kind: SpecType::Mtp, draft_max: 4, cost: StepCost::FREE, ..SpecParams::default() };
    let heads = Server::start_shape_with(shape, 512, (engine(spec), Drafter::Head), options());
    let plain = Server::start_shape_engine(shape, 512, engine(SpecParams::default()), options());
    let mut body = requests().remove(1);
    let want = answer(&plain.post("/v1/completions", &body).1);
    body["speculative.type"] = json!("ngram");
    assert_eq!(answer(&heads.post("/v1/completions", &body).1), want, "n-grams on a server with the head");

    let (_dir, path) = tiny_model("serve-no-mtp", DType::F32, 11);
    let load = LoadOptions { context: Some(256), slots: 2, ..LoadOptions::default() };
    let model = Model::load(&path, cpus(&["cpu"], WaitPolicy::Block).remove(0), &load).expect("load");
    let options = engine(spec);
    match Engine::start_mtp(model, &path, "tiny", EngineOptions { parallel: 2, ..options }) {
        Err(EngineError::Speculation(SpecError::NoMtp { arch })) => assert_eq!(arch, "llama"),
        Err(other) => panic!("a file without the block: refused for another reason: {other}"),
        Ok(_) => panic!("a file without the block started an engine drafting with its head"),
    }
}

/// A paged cache of 8 blocks of 64 positions for 4 sequences drafting with
/// the head (steps that find the pool full are tried again, drafted once;
/// sequences are preempted and read their history again with the head they
/// hold): every request gets the tokens and log-probabilities it gets
/// alone without drafts, greedy and seeded.
#[test]
fn the_heads_drafts_over_a_full_pool_change_no_token() {
    let (_dir, path) = synth_model("serve-mtp-pool", SynthShape::Qwen35, DType::F32, 47);
    let load = |parallel: usize, pool: Option<usize>| {
        Model::load(&path, cpus(&["cpu"], WaitPolicy::Block).remove(0), &paged(parallel, pool)).expect("load")
    };
    let requests: Vec<GenerateRequest> = (0..8u32)
        .map(|i| {
            let prompt = (0..[20, 90, 5, 130, 45, 70, 10, 110][i as usize]).map(|j| (i * 37 + j * 11 + 5) % 500);
            let request = GenerateRequest { logprobs: Some(2), ..GenerateRequest::greedy(prompt.collect(), 100) };
            match i % 3 {
                0 => GenerateRequest { sampling: SamplingParams { seed: 7 + i as u64, ..request.sampling }, ..request },
                _ => request,
            }
        })
        .collect();
    let plain = Engine::start(load(1, None), "toy", EngineOptions { parallel: 1, ..engine(SpecParams::default()) })
        .expect("engine");
    let want: Vec<_> = requests.iter().map(|r| drain(plain.submit(r.clone()).expect("submit"))).collect();
    let spec = SpecParams { kind: SpecType::Mtp, draft_max: 4, cost: StepCost::FREE, ..SpecParams::default() };
    let options = EngineOptions { parallel: 4, queue: 32, ..engine(spec) };
    let served = Engine::start_mtp(load(4, Some(8)), &path, "toy", options).expect("engine");
    let generations: Vec<_> = requests.iter().map(|r| served.submit(r.clone()).expect("submit")).collect();
    for (i, generation) in generations.into_iter().enumerate() {
        let (tokens, entries, _) = drain(generation);
        assert_eq!(tokens, want[i].0, "request {i}: its tokens");
        assert!(entries == want[i].1, "request {i}: its log-probabilities");
    }
    let metrics = served.metrics();
    eprintln!("pool: {} preemptions, {} drafted tokens", metrics.kv_preemptions, metrics.drafted_tokens);
    assert!(metrics.kv_preemptions > 0 && metrics.drafted_tokens > 0, "preempted and drafted");
}
