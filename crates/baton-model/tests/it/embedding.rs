//! Hidden states and embeddings: each token's hidden state times the output
//! matrix gives that token's logits (the model's own, `Logits::All`), and
//! an embedding is the pooled, normalised hidden states, whatever the batch
//! size cuts the text into.

use baton_core::DType;
use baton_gguf::GgufFile;
use baton_model::{normalize, LoadOptions, Logits, Model, Pooling};
use baton_testkit::synth::tiny_model;

const TOKENS: [u32; 11] = [3, 41, 7, 260, 19, 5, 99, 140, 2, 77, 31];

fn load(path: &std::path::Path, batch: usize) -> Model {
    let options = LoadOptions { context: Some(32), batch, slots: 2, ..LoadOptions::default() };
    let device = baton_cpu::open(&["cpu:0"]).expect("device").remove(0);
    Model::load(path, device, &options).expect("load")
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

#[test]
fn hidden_states_times_the_output_matrix_are_the_logits() {
    let (_dir, path) = tiny_model("hidden-states", DType::F32, 17);
    let file = GgufFile::open(&path).expect("open");
    let out = file.tensor("output.weight").or_else(|| file.tensor("token_embd.weight")).expect("output matrix");
    assert_eq!(out.ggml_type(), baton_gguf::GgmlType::F32, "the tiny F32 model's output is f32");
    let w = f32s(out.data());
    let mut model = load(&path, 16);
    let (dim, vocab) = (model.config().dim, model.config().vocab);
    assert_eq!(w.len(), dim * vocab);
    let logits = model.eval(&TOKENS, 0, Logits::All).expect("logits").to_vec();
    let hidden = model.eval_hidden(0, &TOKENS).expect("hidden states");
    assert_eq!(hidden.len(), TOKENS.len() * dim);
    for (t, row) in hidden.chunks_exact(dim).enumerate() {
        for v in 0..vocab {
            let want = f64::from(logits[t * vocab + v]);
            let got: f64 = row.iter().zip(&w[v * dim..][..dim]).map(|(&h, &x)| f64::from(h) * f64::from(x)).sum();
            assert!((got - want).abs() <= 1e-4 * (1.0 + want.abs()), "token {t}, logit {v}: {got} against {want}");
        }
    }
}

#[test]
fn an_embedding_does_not_depend_on_the_batch_or_the_slot() {
    let (_dir, path) = tiny_model("embeddings", DType::Q8_0, 23);
    let mut whole = load(&path, 16);
    let mut cut = load(&path, 4);
    for pooling in [Pooling::Mean, Pooling::Last] {
        let mut a = whole.embed(0, &TOKENS, pooling).expect("embed");
        let mut b = cut.embed(1, &TOKENS, pooling).expect("embed in batches of 4, slot 1");
        assert_eq!(a.len(), whole.config().dim);
        normalize(&mut a);
        normalize(&mut b);
        let norm: f64 = a.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "normalised: {norm}");
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() <= 1e-5, "{pooling:?}: {x} against {y}");
        }
    }
    let mean = whole.embed(0, &TOKENS, Pooling::Mean).expect("embed");
    let last = whole.embed(0, &TOKENS, Pooling::Last).expect("embed");
    assert_ne!(mean, last, "the poolings differ");
    assert!(whole.embed(0, &[], Pooling::Mean).is_err(), "an empty text is an error");
    assert!(whole.embed(5, &TOKENS, Pooling::Mean).is_err(), "a slot that does not exist is an error");
}

/// A step that carries an embedding's tokens beside a decoding sequence
/// (`submit_batch_hidden`): the hidden states are those of the text alone,
/// bit for bit, and the other sequence's logits keep their bits.
#[test]
fn hidden_states_batched_into_a_step_are_the_texts_alone() {
    let (_dir, path) = tiny_model("hidden-batched", DType::F32, 19);
    let options = LoadOptions { context: Some(32), batch: 16, slots: 3, ..LoadOptions::default() };
    let device = || baton_cpu::open(&["cpu:0"]).expect("device").remove(0);
    let mut alone = Model::load(&path, device(), &options).expect("load");
    let want_hidden = alone.eval_hidden(2, &TOKENS).expect("hidden states");
    let prompt = [5u32, 6, 7];
    let want_logits = alone.eval_slot(0, &prompt, 0, Logits::Last).expect("logits").to_vec();
    let mut batched = Model::load(&path, device(), &options).expect("load");
    // The text in two chunks, beside the other sequence's prompt.
    let dim = batched.config().dim;
    let mut hidden = Vec::new();
    let steps = [
        baton_model::SeqStep { slot: 0, past: 0, tokens: &prompt },
        baton_model::SeqStep { slot: 2, past: 0, tokens: &TOKENS[..6] },
    ];
    let ticket = batched.submit_batch_hidden(&steps, &[false, true]).expect("submit");
    hidden.extend(batched.batch_hidden(&ticket).expect("hidden"));
    let logits = batched.batch_logits(ticket).expect("logits");
    assert!(logits[..want_logits.len()] == want_logits[..], "the other sequence's logits changed");
    let rest = [baton_model::SeqStep { slot: 2, past: 6, tokens: &TOKENS[6..] }];
    let ticket = batched.submit_batch_hidden(&rest, &[true]).expect("submit");
    hidden.extend(batched.batch_hidden(&ticket).expect("hidden"));
    assert_eq!(hidden.len(), TOKENS.len() * dim);
    assert!(hidden == want_hidden, "batched hidden states differ from the text's alone");
    assert!(batched.submit_batch_hidden(&rest, &[true, false]).is_err(), "a flag per sequence");
}
