//! Several sequences in one model (`LoadOptions::slots`,
//! `Model::eval_batch`): a sequence's logits do not depend on which others
//! share its steps. Each sequence's logits under a staggered, chunked
//! schedule of batched steps equal, bit for bit, those of the same sequence
//! evaluated alone by a one-slot model (whole prompt, then one token a
//! step), on one device and over a layer split.

use std::sync::Arc;

use baton_core::backend::{Device, IntoDevice};
use baton_core::DType;
use baton_model::{LoadOptions, Logits, Model, ModelError, SeqStep};
use baton_synth::SynthShape;
use baton_testkit::argmax;
use baton_testkit::synth::{synth_model, tiny_model};

pub(super) fn devices(names: &[&str]) -> Vec<Arc<dyn Device>> {
    baton_cpu::open(names).expect("devices").into_iter().map(IntoDevice::into_device).collect()
}

pub(super) fn options(slots: usize) -> LoadOptions {
    LoadOptions { context: Some(64), cache_type: DType::F16, batch: 32, slots, ..LoadOptions::default() }
}

const DECODE: usize = 6;

/// Prompts of different lengths (a 1-token one too).
pub(super) fn prompts() -> Vec<Vec<u32>> {
    (0..5u32).map(|s| (0..[9, 1, 17, 4, 12][s as usize]).map(|i| (s * 97 + i * 31 + 5) % 512).collect()).collect()
}

/// One sequence alone: its prompt's last logits, then `DECODE` greedy steps'.
pub(super) fn alone(model: &mut Model, prompt: &[u32]) -> Vec<Vec<u32>> {
    let mut out = vec![model.eval_prompt(prompt, 0).expect("prompt").iter().map(|x| x.to_bits()).collect::<Vec<_>>()];
    for past in prompt.len()..prompt.len() + DECODE {
        let logits: Vec<f32> = out.last().expect("logits").iter().map(|&b| f32::from_bits(b)).collect();
        let next = argmax(&logits);
        out.push(model.eval(&[next], past, Logits::Last).expect("decode").iter().map(|x| x.to_bits()).collect());
    }
    out
}

struct Seq {
    slot: usize,
    prompt: Vec<u32>,
    /// Step at which it joins.
    start: usize,
    read: usize,
    next: Option<u32>,
    logits: Vec<Vec<u32>>,
}

/// Every sequence through batched steps: they join at different steps, read
/// their prompts `chunk` tokens a step, and decode one token a step.
pub(super) fn batched(model: &mut Model, prompts: &[Vec<u32>], chunk: usize) -> Vec<Vec<Vec<u32>>> {
    let mut seqs: Vec<Seq> = prompts
        .iter()
        .enumerate()
        .map(|(i, p)| Seq {
            slot: (i * 3) % prompts.len(),
            prompt: p.clone(),
            start: i,
            read: 0,
            next: None,
            logits: vec![],
        })
        .collect();
    let vocab = model.config().vocab;
    for step in 0.. {
        let active: Vec<usize> =
            (0..seqs.len()).filter(|&i| seqs[i].start <= step && seqs[i].logits.len() < DECODE + 1).collect();
        if active.is_empty() {
            if seqs.iter().all(|s| s.logits.len() == DECODE + 1) {
                break;
            }
            continue;
        }
        let steps: Vec<SeqStep<'_>> = active
            .iter()
            .map(|&i| {
                let s = &seqs[i];
                let tokens = match &s.next {
                    Some(next) => std::slice::from_ref(next),
                    None => &s.prompt[s.read..(s.read + chunk).min(s.prompt.len())],
                };
                let past = s.read + s.logits.len().saturating_sub(1);
                SeqStep { slot: s.slot, past, tokens }
            })
            .collect();
        let counts: Vec<usize> = steps.iter().map(|s| s.tokens.len()).collect();
        let logits = model.eval_batch(&steps).expect("batched step").to_vec();
        for (row, (&i, n)) in active.iter().zip(counts).enumerate() {
            let s = &mut seqs[i];
            let row = &logits[row * vocab..(row + 1) * vocab];
            if s.next.is_none() {
                s.read += n;
                if s.read < s.prompt.len() {
                    continue;
                }
            }
            s.logits.push(row.iter().map(|x| x.to_bits()).collect());
            s.next = Some(argmax(row));
        }
    }
    seqs.into_iter().map(|s| s.logits).collect()
}

#[test]
fn batched_sequences_match_each_sequence_alone_bit_for_bit() {
    for dtype in [DType::F32, DType::Q4_1, DType::Q8_0] {
        let (_dir, path) = tiny_model("batch-bits", dtype, 23);
        assert_batched_match_alone(&path, &format!("tiny {dtype}"));
    }
}

/// Every sequence of [`prompts`] in batched steps (chunks of 3 and 32,
/// attention in slots and per sequence, on one device and split by layer
/// over two) gets, bit for bit, the logits it gets alone in a one-slot
/// model.
pub(super) fn assert_batched_match_alone(path: &std::path::Path, label: &str) {
    assert_batched_match_alone_on(path, label, &[&["cpu"], &["cpu:0", "cpu:1"]]);
}

/// [`assert_batched_match_alone`] on each list of devices of `device_lists`.
pub(super) fn assert_batched_match_alone_on(path: &std::path::Path, label: &str, device_lists: &[&[&str]]) {
    let prompts = prompts();
    let mut one = Model::load(path, devices(&["cpu"]).remove(0), &options(1)).expect("one slot");
    let expected: Vec<_> = prompts.iter().map(|p| alone(&mut one, p)).collect();
    for &names in device_lists {
        for (chunk, per_sequence) in [(3, false), (32, false), (3, true)] {
            let opts = LoadOptions { attention_per_sequence: per_sequence, ..options(prompts.len()) };
            let mut many = Model::load_split(path, devices(names), &opts).expect("slots");
            assert_eq!(many.attends_in_slots(), !per_sequence);
            let got = batched(&mut many, &prompts, chunk);
            for (s, (got, want)) in got.iter().zip(&expected).enumerate() {
                assert_eq!(got.len(), want.len());
                for (k, (g, w)) in got.iter().zip(want).enumerate() {
                    assert!(
                        g == w,
                        "{label} on {names:?}, chunk {chunk} (one attention per sequence: {per_sequence}): \
                         sequence {s}, logits {k} differ from alone"
                    );
                }
            }
        }
    }
}

/// A mixture of experts (the qwen3moe and gpt-oss toys: 16 experts, 4 per
/// token): a sequence's tokens go to other experts beside other sequences'
/// than alone, and its logits keep the same bits, on one device and split
/// by layer over two.
#[test]
fn batched_sequences_through_experts_match_each_sequence_alone() {
    for dtype in [DType::F32, DType::Q8_0] {
        let (_dir, path) = synth_model("batch-experts", SynthShape::Qwen3Moe, dtype, 23);
        batched_through(&path, dtype);
        // gpt-oss: sinks, biases, a sliding window of 8 and YaRN besides.
        let (_dir, path) = synth_model("batch-oss", SynthShape::GptOss, dtype, 23);
        batched_through(&path, dtype);
    }
}

fn batched_through(path: &std::path::Path, dtype: DType) {
    let prompts = prompts();
    let mut one = Model::load(path, devices(&["cpu"]).remove(0), &options(1)).expect("one slot");
    let expected: Vec<_> = prompts.iter().map(|p| alone(&mut one, p)).collect();
    for names in [&["cpu"][..], &["cpu:0", "cpu:1"][..]] {
        for chunk in [3, 32] {
            let mut many = Model::load_split(path, devices(names), &options(prompts.len())).expect("slots");
            let got = batched(&mut many, &prompts, chunk);
            let file = path.display();
            assert!(got == expected, "{file} {dtype} on {names:?}, chunk {chunk}: batched logits differ from alone");
        }
    }
}

/// The same with a KV cache of 8-bit blocks (Qwen 3's heads of 32), and of
/// 4-bit keys with f16 values.
#[test]
fn batched_sequences_match_each_sequence_alone_with_quantized_caches() {
    let (_dir, path) = synth_model("batch-q-cache", SynthShape::Qwen3, DType::Q8_0, 23);
    let prompts = prompts();
    for (k, v) in [(DType::Q8_0, DType::Q8_0), (DType::Q4_0, DType::F16)] {
        let cache = |slots| LoadOptions { cache_type: k, cache_type_v: Some(v), ..options(slots) };
        let mut one = Model::load(&path, devices(&["cpu"]).remove(0), &cache(1)).expect("one slot");
        let expected: Vec<_> = prompts.iter().map(|p| alone(&mut one, p)).collect();
        for names in [&["cpu"][..], &["cpu:0", "cpu:1"][..]] {
            let mut many = Model::load_split(&path, devices(names), &cache(prompts.len())).expect("slots");
            let got = batched(&mut many, &prompts, 3);
            assert!(got == expected, "{k} keys, {v} values on {names:?}: batched logits differ from alone");
        }
    }
}

#[test]
fn windows_of_different_lengths_in_one_batch_keep_each_sequence_alone() {
    // A context of 320: windows of 64, 128, 192, 256 and 320 positions.
    // Prompts cross them in chunks, so a sequence's rows are evaluated with
    // other windows (other padding) batched than alone.
    let (_dir, path) = tiny_model("batch-windows", DType::Q4_1, 37);
    let prompts: Vec<Vec<u32>> = [70usize, 130, 5, 250, 61]
        .iter()
        .enumerate()
        .map(|(s, &n)| (0..n as u32).map(|i| (i * 13 + s as u32 * 7) % 512).collect())
        .collect();
    let opts = |slots| LoadOptions { context: Some(320), batch: 320, slots, ..LoadOptions::default() };
    let mut one = Model::load(&path, devices(&["cpu"]).remove(0), &opts(1)).expect("one slot");
    let expected: Vec<_> = prompts.iter().map(|p| alone(&mut one, p)).collect();
    let mut many = Model::load(&path, devices(&["cpu"]).remove(0), &opts(prompts.len())).expect("slots");
    let got = batched(&mut many, &prompts, 37);
    for (s, (got, want)) in got.iter().zip(&expected).enumerate() {
        assert!(got == want, "sequence {s} differs from alone");
    }
}

/// Gemma 3's sliding-window layers with rings (a context longer than the
/// window and a batch): sequences in slots write and read their own rings
/// (rows `slot × ring + position mod ring`), over many turns of them.
#[test]
fn batched_sequences_with_rings_match_each_sequence_alone() {
    let (_dir, path) = synth_model("batch-rings", SynthShape::Gemma3, DType::Q8_0, 31);
    let prompts: Vec<Vec<u32>> = [90usize, 7, 140, 66]
        .iter()
        .enumerate()
        .map(|(s, &n)| (0..n as u32).map(|i| (i * 29 + s as u32 * 11 + 3) % 512).collect())
        .collect();
    for cache in [DType::F16, DType::Q8_0] {
        let opts =
            |slots| LoadOptions { context: Some(256), batch: 16, slots, cache_type: cache, ..LoadOptions::default() };
        let mut one = Model::load(&path, devices(&["cpu"]).remove(0), &opts(1)).expect("one slot");
        let expected: Vec<_> = prompts.iter().map(|p| alone(&mut one, p)).collect();
        let mut many = Model::load(&path, devices(&["cpu"]).remove(0), &opts(prompts.len())).expect("slots");
        assert!(many.attends_in_slots());
        let got = batched(&mut many, &prompts, 4);
        for (s, (got, want)) in got.iter().zip(&expected).enumerate() {
            assert!(got == want, "{cache} cache: sequence {s} differs from alone");
        }
    }
}

#[test]
fn bad_batches_are_errors() {
    let (_dir, path) = tiny_model("batch-bad", DType::F32, 5);
    let mut model = Model::load(&path, devices(&["cpu"]).remove(0), &options(2)).expect("load");
    let t = [1u32, 2, 3];
    let cases: [(&[SeqStep<'_>], &str); 5] = [
        (&[], "at least one sequence"),
        (&[SeqStep { slot: 2, past: 0, tokens: &t }], "slot 2 does not exist"),
        (&[SeqStep { slot: 1, past: 0, tokens: &t }, SeqStep { slot: 1, past: 3, tokens: &t }], "twice"),
        (&[SeqStep { slot: 0, past: 0, tokens: &[] }], "at least one per sequence"),
        (&[SeqStep { slot: 0, past: 0, tokens: &[9999] }], "outside the vocabulary"),
    ];
    for (steps, why) in cases {
        let err = model.eval_batch(steps).expect_err(why).to_string();
        assert!(err.contains(why), "{err:?} should say {why:?}");
    }
    let full = model.eval_batch(&[SeqStep { slot: 1, past: 63, tokens: &t }]).expect_err("past the context");
    assert!(matches!(full, ModelError::ContextFull { needed: 66, context: 64 }), "{full:?}");
    // Still usable after the errors.
    assert_eq!(model.eval_batch(&[SeqStep { slot: 1, past: 0, tokens: &t }]).expect("a good batch").len(), 512);
}

fn tensor_parallel(path: &std::path::Path, options: &LoadOptions) -> Model {
    let inner = devices(&["cpu:0", "cpu:1"]);
    let device = Arc::new(
        baton_composite::CompositeDevice::new(inner, baton_core::sync::WaitPolicy::default()).expect("composite"),
    );
    Model::load_tensor_parallel(path, device, options).expect("tensor-parallel model")
}

#[test]
fn batched_sequences_under_tensor_parallelism_match_each_sequence_alone() {
    let (_dir, path) = tiny_model("batch-tensor", DType::Q8_0, 29);
    let prompts = prompts();
    for exact in [true, false] {
        // Exact sums: alone on one device. Partial sums: alone on the same
        // split (their rounding is the split's, the same for every batch).
        let alone_options = LoadOptions { tensor_exact: exact, ..options(1) };
        let mut one = if exact {
            Model::load(&path, devices(&["cpu"]).remove(0), &alone_options).expect("one device")
        } else {
            tensor_parallel(&path, &alone_options)
        };
        let expected: Vec<_> = prompts.iter().map(|p| alone(&mut one, p)).collect();
        let mut many = tensor_parallel(&path, &LoadOptions { tensor_exact: exact, ..options(prompts.len()) });
        let got = batched(&mut many, &prompts, 5);
        for (s, (got, want)) in got.iter().zip(&expected).enumerate() {
            assert!(got == want, "tensor split (exact sums: {exact}): sequence {s} differs from alone");
        }
    }
}
