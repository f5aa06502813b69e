//! The log-probabilities the engine sends (`logprobs`, `top_logprobs`)
//! against the NumPy float64 reference (tests/reference/llama_ref.py): the
//! log-softmax of the reference's logits over the whole vocabulary, at each
//! generated position, for greedy and sampled tokens.
//!
//! Enabled by the `reference-tests` feature; needs `BATON_PYTHON` (the
//! interpreter `scripts/setup-python.sh` prints), as `scripts/test.sh` sets.

#![cfg(feature = "reference-tests")]

mod kit;

use std::process::Command;

use baton_core::DType;
use baton_gen::SamplingParams;
use baton_model::{LoadOptions, Model};
use baton_serve::engine::{Engine, EngineOptions, GenerateRequest, TokenLogprobs};
use baton_testkit::env::{python, reference_script};
use baton_testkit::synth::tiny_model;

/// Most a log-probability may differ from the float64 reference's, with
/// an F32 model and an f32 cache (f32 arithmetic: 9.3e-7 measured at worst,
/// Intel Xeon).
const TOLERANCE: f64 = 1e-5;

/// The reference's log-softmax (float64) at every position of `tokens`.
fn reference_log_softmax(model: &std::path::Path, tokens: &[u32]) -> Vec<Vec<f64>> {
    let ids: Vec<String> = tokens.iter().map(u32::to_string).collect();
    let out = Command::new(python())
        .arg(reference_script("llama_ref.py"))
        .arg("logits")
        .arg(model)
        .args(["--tokens", &ids.join(",")])
        .output()
        .expect("run llama_ref.py");
    assert!(out.status.success(), "llama_ref.py failed: {}", String::from_utf8_lossy(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON from llama_ref.py");
    let rows = json["logits"].as_array().expect("logits");
    rows.iter()
        .map(|row| {
            let logits: Vec<f64> = row.as_array().expect("row").iter().map(|v| v.as_f64().expect("number")).collect();
            let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let log_sum = logits.iter().map(|l| (l - max).exp()).sum::<f64>().ln() + max;
            logits.iter().map(|l| l - log_sum).collect()
        })
        .collect()
}

/// The tokens and log-probabilities (`top` alternatives) of a generation.
fn generate(engine: &Engine, prompt: Vec<u32>, sampling: SamplingParams, top: usize) -> (Vec<u32>, Vec<TokenLogprobs>) {
    let request = GenerateRequest { logprobs: Some(top), sampling, ..GenerateRequest::greedy(prompt, 12) };
    let (tokens, entries, _) = kit::drain(engine.submit(request).expect("submit"));
    (tokens, entries)
}

#[test]
fn logprobs_match_the_float64_reference() {
    let (_dir, path) = tiny_model("serve-logprobs-ref", DType::F32, 21);
    // An f32 cache: the values checked are the model's arithmetic, not f16 rounding.
    let options = LoadOptions { context: Some(128), slots: 2, cache_type: DType::F32, ..LoadOptions::default() };
    let device = baton_cpu::open(&["cpu"]).expect("cpu").remove(0);
    let model = Model::load(&path, device, &options).expect("load");
    let engine = Engine::start(
        model,
        "tiny",
        EngineOptions { parallel: 2, queue: 4, prefill_chunk: 16, ..EngineOptions::default() },
    )
    .expect("engine");
    let prompt: Vec<u32> = vec![1, 17, 42, 99, 7, 63, 250, 3];
    let sampled =
        SamplingParams { temperature: 1.0, top_k: 0, top_p: 1.0, min_p: 0.0, seed: 7, ..SamplingParams::greedy() };
    let mut worst: f64 = 0.0;
    for (what, sampling) in [("greedy", SamplingParams::greedy()), ("sampled", sampled)] {
        let (tokens, entries) = generate(&engine, prompt.clone(), sampling, 20);
        assert_eq!(tokens.len(), entries.len(), "{what}: one entry per token");
        let mut all = prompt.clone();
        all.extend(&tokens);
        let reference = reference_log_softmax(&path, &all);
        for (i, entry) in entries.iter().enumerate() {
            let row = &reference[prompt.len() - 1 + i];
            assert_eq!(entry.token, tokens[i]);
            let diff = (f64::from(entry.logprob) - row[entry.token as usize]).abs();
            worst = worst.max(diff);
            assert!(diff <= TOLERANCE, "{what} token {i}: {} against {}", entry.logprob, row[entry.token as usize]);
            // The alternatives: the reference's most likely, in order,
            // where the reference tells them apart by more than the
            // tolerance.
            let mut order: Vec<usize> = (0..row.len()).collect();
            order.sort_by(|&a, &b| row[b].total_cmp(&row[a]));
            assert_eq!(entry.top.len(), 20);
            for (k, &(id, logprob)) in entry.top.iter().enumerate() {
                let diff = (f64::from(logprob) - row[id as usize]).abs();
                worst = worst.max(diff);
                assert!(diff <= TOLERANCE, "{what} token {i} alternative {k}: {logprob} against {}", row[id as usize]);
                let apart = |j: usize| (row[order[k]] - row[order[j]]).abs() > 2.0 * TOLERANCE;
                if (k == 0 || apart(k - 1)) && (k + 1 == order.len() || apart(k + 1)) {
                    assert_eq!(id as usize, order[k], "{what} token {i}: alternative {k}");
                }
            }
        }
        if what == "sampled" {
            let argmaxes = entries.iter().filter(|e| e.token == e.top[0].0).count();
            assert!(argmaxes < entries.len(), "the sampled run drew some token that is not the likeliest");
        }
    }
    eprintln!("largest log-probability difference from the float64 reference: {worst:.2e}");
}
