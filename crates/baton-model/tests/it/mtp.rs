//! Qwen 3.5's multi-token-prediction head ([`MtpHead`]) on the qwen35 and
//! qwen35moe toys (which `baton model synth` writes with one prediction
//! block): its logits against the NumPy reference
//! (tests/reference/mtp_ref.py, float64), a rewind, and bad input; and the
//! hidden states the model's steps give beside their logits.

use std::path::Path;
use std::sync::Arc;

use baton_core::backend::Device;
use baton_core::DType;
use baton_model::{LoadOptions, Logits, Model, MtpHead};
use baton_synth::SynthShape;
use baton_testkit::synth::synth_model;

fn device() -> Arc<dyn Device> {
    baton_cpu::open(&["cpu"]).expect("cpu").remove(0)
}

const TOKENS: [u32; 10] = [1, 17, 300, 42, 7, 99, 256, 3, 480, 12];

/// The model's final hidden states of `tokens` (after the output norm).
fn hidden_states(path: &Path, tokens: &[u32]) -> Vec<f32> {
    let options = LoadOptions { context: Some(64), batch: 16, ..LoadOptions::default() };
    let mut model = Model::load(path, device(), &options).expect("load");
    model.eval_hidden(0, tokens).expect("hidden states")
}

/// The head's logits of every row `p` (hidden state at `p`, token `p + 1`).
fn head_logits(head: &mut MtpHead, hidden: &[f32], tokens: &[u32]) -> Vec<Vec<f32>> {
    let dim = head.config().dim;
    (0..tokens.len() - 1)
        .map(|p| head.forward(&hidden[p * dim..(p + 1) * dim], tokens[p + 1], p).expect("head row"))
        .collect()
}

/// A head is given only its own model's output matrix: another type (a
/// file of other weights) is an error naming both.
#[test]
fn a_head_refuses_another_models_output_matrix() {
    let (_dir, f32_path) = synth_model("mtp-share", SynthShape::Qwen35, DType::F32, 3);
    let (_dir8, q8_path) = synth_model("mtp-share-q8", SynthShape::Qwen35, DType::Q8_0, 3);
    let options = LoadOptions { context: Some(64), batch: 8, ..LoadOptions::default() };
    let other = Model::load(&f32_path, device(), &options).expect("load");
    let (weights, on) = other.output_weights().expect("one device holds it");
    let mut head = MtpHead::open(&q8_path).expect("open").expect("head");
    let refused = head.share_output(weights.clone(), on.clone()).expect_err("f32 weights for a q8_0 head");
    assert!(refused.to_string().contains("q8_0") || refused.to_string().contains("Q8_0"), "{refused}");
}

/// A step's final hidden states ride its logits (what a drafter that
/// reads them gets): `eval_prompt_hidden` and `eval_slot_hidden` give the
/// bits of `eval_prompt`'s and `eval_slot`'s logits, and the hidden states
/// `eval_hidden` gives the same tokens, however the prompt is split.
#[test]
fn steps_give_their_hidden_states_beside_the_same_logits() {
    for shape in [SynthShape::Qwen35, SynthShape::Qwen35Moe, SynthShape::Qwen3] {
        let (_dir, path) = synth_model("mtp-hidden", shape, DType::F32, 3);
        let options = LoadOptions { context: Some(64), batch: 8, ..LoadOptions::default() };
        let load = || Model::load(&path, device(), &options).expect("load");
        let tokens: Vec<u32> = (0..20).map(|i| (i * 37 + 5) % 500).collect();
        let expected = load().eval_hidden(0, &tokens).expect("hidden states");
        let mut plain = load();
        let prompt_logits = plain.eval_prompt(&tokens[..12], 0).expect("prompt").to_vec();
        let step_logits = plain.eval_slot(0, &tokens[12..16], 12, Logits::All).expect("step").to_vec();
        let last_logits = plain.eval_slot(0, &tokens[16..17], 16, Logits::Last).expect("step").to_vec();
        let mut model = load();
        let dim = model.config().dim;
        let (hidden, logits) = model.eval_prompt_hidden(&tokens[..12], 0).expect("prompt");
        assert!(logits == prompt_logits.as_slice(), "{shape}: the prompt's logits differ");
        assert!(hidden == expected[..12 * dim], "{shape}: the prompt's hidden states differ");
        let (hidden, logits) = model.eval_slot_hidden(0, &tokens[12..16], 12, Logits::All).expect("step");
        assert!(logits == step_logits.as_slice(), "{shape}: a step's logits differ");
        assert!(hidden == expected[12 * dim..16 * dim], "{shape}: a step's hidden states differ");
        let (hidden, logits) = model.eval_slot_hidden(0, &tokens[16..17], 16, Logits::Last).expect("step");
        assert!(logits == last_logits.as_slice(), "{shape}: a one-row step's logits differ");
        assert!(hidden == expected[16 * dim..17 * dim], "{shape}: a one-row step's hidden state differs");
    }
}

#[test]
fn a_file_without_a_prediction_block_has_no_head() {
    let (_dir, path) = synth_model("mtp-none", SynthShape::Qwen3, DType::F32, 3);
    assert!(MtpHead::open(&path).expect("open").is_none(), "qwen3 toy: no head expected");
    let model = Model::load(&path, device(), &LoadOptions::default()).expect("load");
    assert!(!model.has_mtp(), "qwen3 toy: the model reports no head");
}

#[test]
fn a_rewound_head_gives_the_same_bits_again() {
    let (_dir, path) = synth_model("mtp-rewind", SynthShape::Qwen35, DType::Q8_0, 3);
    let hidden = hidden_states(&path, &TOKENS);
    let options = LoadOptions { context: Some(64), batch: 16, ..LoadOptions::default() };
    let model = Model::load(&path, device(), &options).expect("load");
    assert!(model.has_mtp(), "the qwen35 toy's model reports its head");
    drop(model);
    let mut head = MtpHead::open(&path).expect("open").expect("qwen35 toy has a head");
    assert_eq!(head.block(), head.config().layers, "the head is the block after the model's own");
    let first = head_logits(&mut head, &hidden, &TOKENS);
    assert_eq!(head.len(), TOKENS.len() - 1);
    // Back to position 3 with other rows (a rejected draft), then the
    // original rows again: the same logits, bit for bit.
    let dim = head.config().dim;
    head.forward(&hidden[..dim], 5, 3).expect("another row at 3");
    assert_eq!(head.len(), 4, "a row at 3 drops the later positions");
    for (p, row) in first.iter().enumerate().skip(3) {
        let again = head.forward(&hidden[p * dim..(p + 1) * dim], TOKENS[p + 1], p).expect("row");
        assert!(again == *row, "position {p}: the rewound head's logits differ");
    }
}

#[test]
fn bad_rows_are_typed_errors() {
    let (_dir, path) = synth_model("mtp-bad", SynthShape::Qwen35, DType::F32, 3);
    let mut head = MtpHead::open(&path).expect("open").expect("head");
    let dim = head.config().dim;
    let vocab = head.config().vocab as u32;
    let hidden = vec![0.5; dim];
    let short = head.forward(&hidden[1..], 1, 0).expect_err("a short hidden state");
    assert!(short.to_string().contains("hidden state"), "{short}");
    let token = head.forward(&hidden, vocab, 0).expect_err("a token past the vocabulary");
    assert!(token.to_string().contains("vocabulary"), "{token}");
    let gap = head.forward(&hidden, 1, 2).expect_err("a position past the rows held");
    assert!(gap.to_string().contains("holds positions 0..0"), "{gap}");
    assert!(head.is_empty(), "failed rows store nothing");
    // A head restarted at 3 holds nothing before it.
    head.restart_at(3);
    let before = head.forward(&hidden, 1, 2).expect_err("a position before the restart");
    assert!(before.to_string().contains("holds positions 3..3"), "{before}");
    head.forward(&hidden, 1, 3).expect("the row at the restart");
    assert_eq!((head.start(), head.len()), (3, 4));
}

#[cfg(feature = "reference-tests")]
mod reference {
    use super::*;
    use baton_testkit::env::{python, reference_script};
    use std::process::Command;

    /// The float64 head's logits of `tokens`, on the reference model's own
    /// hidden states, or on `hidden` (the rows of every token) where given.
    fn reference_logits(path: &Path, tokens: &[u32], hidden: Option<&Path>) -> Vec<Vec<f64>> {
        let ids: Vec<String> = tokens.iter().map(u32::to_string).collect();
        let mut command = Command::new(python());
        command.arg(reference_script("mtp_ref.py")).arg(path).args(["--tokens", &ids.join(",")]);
        if let Some(hidden) = hidden {
            command.arg("--hidden").arg(hidden);
        }
        let out = command.output().expect("run mtp_ref.py");
        assert!(out.status.success(), "mtp_ref.py failed: {}", String::from_utf8_lossy(&out.stderr));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON from mtp_ref.py");
        let rows = json["logits"].as_array().expect("logits");
        rows.iter().map(|r| r.as_array().expect("row").iter().map(|v| v.as_f64().expect("number")).collect()).collect()
    }

    /// NMSE of `ours` against `reference`, over every row.
    fn nmse(ours: &[Vec<f32>], reference: &[Vec<f64>]) -> f64 {
        assert_eq!(reference.len(), ours.len(), "rows");
        let (mut err, mut norm) = (0f64, 0f64);
        for (mine, theirs) in ours.iter().zip(reference) {
            assert_eq!(mine.len(), theirs.len(), "logits a row");
            for (a, b) in mine.iter().zip(theirs) {
                err += (f64::from(*a) - b).powi(2);
                norm += b * b;
            }
        }
        err / norm
    }

    /// NMSE of the head's logits over every row against float64, model
    /// and head: f32 weights (the trunk's hidden states and the head in
    /// f32) stay `<= 1e-6`, the bound of the model's own f32 logits.
    fn head_matches_the_reference(shape: SynthShape) {
        let (_dir, path) = synth_model("mtp-ref", shape, DType::F32, 5);
        let hidden = hidden_states(&path, &TOKENS);
        let mut head = MtpHead::open(&path).expect("open").expect("head");
        let ours = head_logits(&mut head, &hidden, &TOKENS);
        let nmse = nmse(&ours, &reference_logits(&path, &TOKENS, None));
        println!("{shape} head: NMSE {nmse:.3e} over {} rows", ours.len());
        assert!(nmse <= 1e-6, "{shape} head: logits NMSE {nmse:.3e} against the reference (bound 1e-6)");
    }

    /// The head alone against its float64 definition, both reading the
    /// hidden states Baton's model gave: the kernels' products (f32 sums;
    /// for Q8_0 weights, the activations quantized to Q8 blocks as the
    /// CPU backend's matmuls do) within `bound` of the logits' NMSE, its
    /// large products split over a CPU device's threads.
    fn kernel_head_matches_its_definition(shape: SynthShape, dtype: DType, bound: f64) {
        let (dir, path) = synth_model("mtp-kernels", shape, dtype, 5);
        let hidden = hidden_states(&path, &TOKENS);
        let rows = dir.path().join("hidden.f32");
        let bytes: Vec<u8> = hidden.iter().flat_map(|v| v.to_le_bytes()).collect();
        std::fs::write(&rows, bytes).expect("write the hidden states");
        let mut head = MtpHead::open(&path).expect("open").expect("head");
        head.compute_on(device());
        let ours = head_logits(&mut head, &hidden, &TOKENS);
        // On the calling thread alone: the same bits (an f32 toy's output
        // product, 128 KiB, is split over the device's threads).
        let mut alone = MtpHead::open(&path).expect("open").expect("head");
        assert!(head_logits(&mut alone, &hidden, &TOKENS) == ours, "{shape} {dtype}: threads changed the logits");
        let reference = reference_logits(&path, &TOKENS, Some(&rows));
        let error = nmse(&ours, &reference);
        println!("{shape} {dtype} head on its definition: NMSE {error:.3e} over {} rows", ours.len());
        assert!(error <= bound, "{shape} {dtype} head: logits NMSE {error:.3e} against float64 (bound {bound:e})");
        // Multiplying by the loaded model's own copy of the output matrix
        // (packed for the kernels where its type has a packed form; its
        // file pages given back): within the same bound, and the file's
        // bits where the type is not packed.
        let model =
            Model::load(&path, device(), &LoadOptions { context: Some(64), batch: 16, ..LoadOptions::default() })
                .expect("load");
        let (weights, on) = model.output_weights().expect("one device holds the output");
        let mut shared = MtpHead::open(&path).expect("open").expect("head");
        shared.compute_on(on.clone());
        assert!(shared.share_output(weights.clone(), on.clone()).expect("its own model's"), "{shape}: shared");
        let derived = || on.memory().expect("a CPU keeps count").derived;
        let before = derived();
        let shared_logits = head_logits(&mut shared, &hidden, &TOKENS);
        if baton_kernels::packed::packable(dtype) {
            // No step ran yet: the head's first product packed the model's
            // matrix, through its device, once.
            let packed = derived() - before;
            assert!(packed as usize >= weights.bytes(), "{shape} {dtype}: the model's matrix packed ({packed} bytes)");
        } else {
            assert_eq!(derived(), before, "{shape} {dtype}: nothing to pack");
            assert!(shared_logits == ours, "{shape} {dtype}: the same bytes through the same kernel");
        }
        let error = nmse(&shared_logits, &reference);
        println!("{shape} {dtype} head on the model's output matrix: NMSE {error:.3e}");
        assert!(
            error <= bound,
            "{shape} {dtype} shared head: logits NMSE {error:.3e} against float64 (bound {bound:e})"
        );
    }

    #[test]
    fn kernel_heads_match_their_float64_definition() {
        for shape in [SynthShape::Qwen35, SynthShape::Qwen35Moe] {
            kernel_head_matches_its_definition(shape, DType::F32, 1e-9);
            kernel_head_matches_its_definition(shape, DType::Q8_0, 1e-3);
        }
    }

    #[test]
    fn qwen35_head_logits_match_the_reference() {
        head_matches_the_reference(SynthShape::Qwen35);
    }

    #[test]
    fn qwen35moe_head_logits_match_the_reference() {
        head_matches_the_reference(SynthShape::Qwen35Moe);
    }
}
