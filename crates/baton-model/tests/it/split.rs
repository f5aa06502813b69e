//! Layer split over two CPU devices gives the single device's logits, bit
//! for bit (the kernels' results do not depend on thread counts), in every
//! mode: one batch, incremental decode, pipelined micro-batches with 1, 2
//! and 4 runs in flight, synchronous copies, uneven splits. (Each is compared
//! with one device evaluating the same micro-batches.)

use std::sync::Arc;

use baton_core::backend::{Device, IntoDevice};
use baton_core::DType;
use baton_model::{LoadOptions, Logits, Model};
use baton_synth::SynthShape;
use baton_testkit::argmax;
use baton_testkit::synth::{synth_model, tiny_model};

fn devices(names: &[&str]) -> Vec<Arc<dyn Device>> {
    baton_cpu::open(names).expect("devices").into_iter().map(IntoDevice::into_device).collect()
}

fn options(batch: usize, n_copies: usize, sync_copies: bool, split: &[f32]) -> LoadOptions {
    LoadOptions {
        context: Some(64),
        cache_type: DType::F32,
        batch,
        tensor_split: split.to_vec(),
        n_copies,
        sync_copies,
        ..LoadOptions::default()
    }
}

const PROMPT: [u32; 13] = [3, 17, 300, 42, 7, 99, 256, 3, 480, 12, 77, 5, 200];

/// Last-token logits after the prompt, then 6 greedy decode steps' logits.
fn transcript(model: &mut Model) -> Vec<Vec<f32>> {
    let mut out = vec![model.eval_prompt(&PROMPT, 0).expect("prompt").to_vec()];
    for past in PROMPT.len()..PROMPT.len() + 6 {
        let last = out.last().expect("logits");
        out.push(model.eval(&[argmax(last)], past, Logits::Last).expect("decode").to_vec());
    }
    out
}

#[test]
fn layer_split_matches_one_device_bit_for_bit() {
    for dtype in [DType::F32, DType::Q4_1] {
        let (_dir, path) = tiny_model("split-bits", dtype, 11);
        let cases: [(usize, usize, bool, &[f32]); 6] = [
            (64, 1, false, &[]),
            (4, 1, false, &[]),
            (4, 2, false, &[]),
            (4, 4, false, &[]),
            (4, 2, true, &[]),
            (3, 2, false, &[4.0, 1.0]),
        ];
        for (batch, copies, sync, split) in cases {
            // The same micro-batches on one device (tile shapes, and so the
            // rounding, depend on the batch, not on the devices).
            let mut one =
                Model::load_split(&path, devices(&["cpu"]), &options(batch, 1, false, &[])).expect("one device");
            let reference = transcript(&mut one);
            let mut two = Model::load_split(&path, devices(&["cpu:0", "cpu:1"]), &options(batch, copies, sync, split))
                .expect("two devices");
            let (_, layers) = two.placement();
            assert!(layers.contains(&0) && layers.contains(&1), "both devices hold layers: {layers:?}");
            let got = transcript(&mut two);
            assert_eq!(got, reference, "{dtype}: batch {batch}, {copies} copies, sync {sync}, split {split:?}");
            assert_eq!(two.runner_stats().runs as usize, 7 + PROMPT.len().div_ceil(batch) - 1);
            assert_eq!(two.implicit_waits(), 0, "the scheduler ordered every access itself");
        }
    }
}

/// Every architecture's blocks (biases, Q/K norms, post norms, sliding
/// windows: the prompt and decode pass Gemma's window of 8) split by layers
/// as one device computes them, pipelined with 2 runs in flight.
#[test]
fn every_architecture_layer_split_matches_one_device_bit_for_bit() {
    for shape in [SynthShape::Gemma3, SynthShape::Qwen2, SynthShape::Qwen3] {
        let (_dir, path) = synth_model("split-arch", shape, DType::Q8_0, 11);
        let mut one = Model::load_split(&path, devices(&["cpu"]), &options(4, 1, false, &[])).expect("one device");
        let reference = transcript(&mut one);
        let mut two =
            Model::load_split(&path, devices(&["cpu:0", "cpu:1"]), &options(4, 2, false, &[])).expect("two devices");
        assert_eq!(transcript(&mut two), reference, "{shape}: layer split");
        assert_eq!(two.implicit_waits(), 0, "{shape}: the scheduler ordered every access itself");
    }
}

#[test]
fn decode_needs_one_host_wait_per_token_and_reuses_plans() {
    let (_dir, path) = tiny_model("split-waits", DType::F32, 11);
    let mut model = Model::load_split(&path, devices(&["cpu:0", "cpu:1"]), &options(16, 2, false, &[])).expect("load");
    model.eval_prompt(&PROMPT, 0).expect("prompt");
    let before = model.host_waits();
    let plans_before = model.cached_plans();
    for i in 0..8 {
        model.eval(&[5], PROMPT.len() + i, Logits::Last).expect("decode");
    }
    let waits = model.host_waits() - before;
    assert!(waits <= 8, "{waits} host waits for 8 tokens (the goal is one each: the logits read)");
    assert!(model.cached_plans() >= plans_before, "plans are cached per shape");
    assert_eq!(model.runner_stats().host_waits, 0, "the scheduler itself never blocked the host");
}
