//! A mixture of experts split over devices by its experts
//! (`LoadOptions::expert_split`, `--split-mode expert`): each device holds
//! its share of every layer's experts, each token's chosen experts run
//! where they are held. Exact (`tensor_exact`), the logits are bit for bit
//! one device's, batched steps included; otherwise each device's weighted
//! outputs are summed apart and the logits are close.

use baton_core::DType;
use baton_model::{ExpertSplit, GraphShape, LoadOptions, Logits, Model, ModelError, Placement};
use baton_sched::LeafSource;
use baton_synth::SynthShape;
use baton_testkit::argmax;
use baton_testkit::synth::synth_model;

use super::batch::{alone, batched, devices, options, prompts};

const SHAPES: [SynthShape; 3] = [SynthShape::Qwen3Moe, SynthShape::GptOss, SynthShape::Qwen35Moe];

fn logits(model: &mut Model, prompt: &[u32]) -> Vec<f32> {
    let mut out = model.eval(prompt, 0, Logits::All).expect("prompt").to_vec();
    out.extend_from_slice(model.eval(&[9], prompt.len(), Logits::Last).expect("decode"));
    out
}

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|x| x.to_bits()).collect()
}

fn split(path: &std::path::Path, names: &[&str], exact: bool, base: &LoadOptions) -> Model {
    let options = LoadOptions { expert_split: true, tensor_exact: exact, ..base.clone() };
    Model::load_split(path, devices(names), &options).expect("experts split")
}

#[test]
fn an_exact_expert_split_gives_one_devices_bits() {
    let prompt: Vec<u32> = (0..11).map(|i| (i * 43 + 8) % 512).collect();
    for shape in SHAPES {
        for dtype in [DType::F32, DType::Q8_0, DType::Q4_K] {
            let (_dir, path) = synth_model("expert-split", shape, dtype, 5);
            let base = LoadOptions { context: Some(64), batch: 32, ..LoadOptions::default() };
            let mut one = Model::load(&path, devices(&["cpu"]).remove(0), &base).expect("one device");
            let want = bits(&logits(&mut one, &prompt));
            for names in [&["cpu:0", "cpu:1"][..], &["cpu:0", "cpu:1", "cpu:2"][..]] {
                let mut model = split(&path, names, true, &base);
                assert_eq!(model.placed(), Placement::ExpertShares);
                assert_eq!(model.expert_split(), Some(ExpertSplit { devices: names.len(), exact: true }));
                assert!(
                    bits(&logits(&mut model, &prompt)) == want,
                    "{shape} {dtype} over {names:?}: not one device's bits"
                );
            }
        }
    }
}

/// Each device holds its share of the experts' bytes (16 experts: 8 and 8,
/// or 6, 5 and 5), and nothing of the others'.
#[test]
fn each_device_holds_only_its_share_of_the_experts() {
    let (_dir, path) = synth_model("expert-split-bytes", SynthShape::Qwen3Moe, DType::Q8_0, 5);
    let base = LoadOptions { context: Some(64), batch: 32, ..LoadOptions::default() };
    let one = Model::load(&path, devices(&["cpu"]).remove(0), &base).expect("one device");
    let whole = one.expert_bytes_by_device()[0];
    let count = one.config().experts.expect("experts").count;
    assert!(whole > 0);
    for names in [&["cpu:0", "cpu:1"][..], &["cpu:0", "cpu:1", "cpu:2"][..]] {
        let model = split(&path, names, false, &base);
        let shares = ExpertSplit { devices: names.len(), exact: false }.shares(count);
        let want: Vec<usize> = shares.iter().map(|r| whole / count * r.len()).collect();
        assert_eq!(model.expert_bytes_by_device(), want, "over {names:?}");
        // The whole layer's experts are still counted once.
        assert_eq!((0..model.config().layers).map(|l| model.expert_bytes(l).0).sum::<usize>(), whole);
    }
}

/// A decode step's plan: every split on a device past the first reads only
/// that device's share of the experts (no weight crosses), and the bytes
/// it copies between devices are the traffic `baton plan` states, per
/// token and layer.
#[test]
fn a_decode_step_moves_only_the_activations_the_split_states() {
    for (shape, exact) in [(SynthShape::Qwen3Moe, false), (SynthShape::Qwen3Moe, true), (SynthShape::GptOss, true)] {
        let (_dir, path) = synth_model("expert-split-plan", shape, DType::Q8_0, 5);
        let base = LoadOptions { context: Some(64), batch: 32, ..LoadOptions::default() };
        let mut model = split(&path, &["cpu:0", "cpu:1"], exact, &base);
        let split = model.expert_split().expect("split");
        let c = model.config().clone();
        let plan = model.plan(GraphShape::new(1, 0, Logits::Last, 64)).expect("plan");
        let per_token = split.traffic_bytes_per_token(c.dim, c.experts.expect("experts"));
        assert_eq!(plan.bytes_per_run(), per_token * c.layers, "{shape} exact {exact}: {plan}");
        let on_second: Vec<_> = plan.splits.iter().filter(|s| s.device == 1).collect();
        assert_eq!(on_second.len(), c.layers, "{shape}: one split a layer on cpu:1");
        for s in on_second {
            for leaf in &s.leaves {
                if let LeafSource::Bound(original) = leaf.source {
                    let name = plan.graph.node(original).name.clone().unwrap_or_default();
                    assert!(name.ends_with("@1"), "{shape}: {name} read on cpu:1");
                }
            }
        }
    }
}

/// Each device sums its own experts' weighted outputs: the same sums in
/// another order, so close to one device's and the same greedy tokens.
#[test]
fn an_expert_split_with_partial_sums_is_close_to_one_device() {
    let prompt: Vec<u32> = (0..11).map(|i| (i * 43 + 8) % 512).collect();
    for shape in SHAPES {
        let (_dir, path) = synth_model("expert-split-sums", shape, DType::F32, 5);
        let base = LoadOptions { context: Some(64), batch: 32, ..LoadOptions::default() };
        let mut one = Model::load(&path, devices(&["cpu"]).remove(0), &base).expect("one device");
        let want = logits(&mut one, &prompt);
        let got = logits(&mut split(&path, &["cpu:0", "cpu:1"], false, &base), &prompt);
        let worst = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0.0f32, f32::max);
        assert!(worst < 1e-3, "{shape}: logits differ by {worst}");
        let vocab = one.config().vocab;
        for (g, w) in got.chunks(vocab).zip(want.chunks(vocab)) {
            assert_eq!(argmax(g), argmax(w), "{shape}: the greedy token moved");
        }
    }
}

/// Batched steps through an exact expert split: each sequence gets the
/// bits it gets alone on one device, whichever others share its steps.
#[test]
fn batched_steps_through_an_exact_expert_split_stay_batch_invariant() {
    let prompts = prompts();
    for shape in [SynthShape::Qwen3Moe, SynthShape::GptOss] {
        let (_dir, path) = synth_model("expert-split-batch", shape, DType::Q8_0, 23);
        let mut one = Model::load(&path, devices(&["cpu"]).remove(0), &options(1)).expect("one slot");
        let expected: Vec<_> = prompts.iter().map(|p| alone(&mut one, p)).collect();
        for chunk in [3, 32] {
            let mut many = split(&path, &["cpu:0", "cpu:1"], true, &options(prompts.len()));
            let got = batched(&mut many, &prompts, chunk);
            assert!(got == expected, "{shape}, chunk {chunk}: batched logits differ from alone on one device");
        }
    }
}

#[test]
fn an_expert_split_of_a_dense_model_one_device_placed_experts_or_shares_is_an_error() {
    let base = LoadOptions { context: Some(64), batch: 32, expert_split: true, ..LoadOptions::default() };
    let (_dir, path) = synth_model("expert-split-bad", SynthShape::Qwen3, DType::Q8_0, 5);
    let err = Model::load_split(&path, devices(&["cpu:0", "cpu:1"]), &base).err().expect("refused");
    assert!(matches!(err, ModelError::Config(_)) && err.to_string().contains("has none"), "{err}");
    let (_dir, path) = synth_model("expert-split-bad", SynthShape::Qwen3Moe, DType::Q8_0, 5);
    let err = Model::load_split(&path, devices(&["cpu"]), &base).err().expect("refused");
    assert!(err.to_string().contains("from 2 devices"), "{err}");
    let placed = LoadOptions { expert_devices: vec![Some(1)], ..base.clone() };
    let err = Model::load_split(&path, devices(&["cpu:0", "cpu:1"]), &placed).err().expect("refused");
    assert!(err.to_string().contains("not both"), "{err}");
    let uneven = LoadOptions { tensor_split: vec![3.0, 1.0], ..base.clone() };
    let err = Model::load_split(&path, devices(&["cpu:0", "cpu:1"]), &uneven).err().expect("refused");
    assert!(err.to_string().contains("--tensor-split is not read"), "{err}");
}
