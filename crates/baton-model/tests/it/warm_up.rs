//! `Model::warm_up`: the first step's one-time work (the CPU packing the
//! weights) happens in it, and nothing a caller sees changes: the logits of
//! a prompt and of the decode steps after it are bit for bit those of a
//! model without the warm-up, and the count of evaluated tokens is untouched.

use baton_core::DType;
use baton_model::{LoadOptions, Logits, Model};
use baton_testkit::synth::tiny_model;

fn bits(x: &[f32]) -> Vec<u32> {
    x.iter().map(|v| v.to_bits()).collect()
}

/// A prompt, then two decode steps: every step's logits, as bits.
fn steps(model: &mut Model) -> Vec<Vec<u32>> {
    let prompt = [3u32, 41, 7, 260, 19];
    let mut out = vec![bits(model.eval_prompt(&prompt, 0).expect("prompt"))];
    for (i, t) in [11u32, 300].into_iter().enumerate() {
        out.push(bits(model.eval(&[t], prompt.len() + i, Logits::Last).expect("decode")));
    }
    out
}

#[test]
fn warm_up_packs_the_weights_and_changes_no_result() {
    let (_dir, path) = tiny_model("warm-up", DType::Q4_K, 41);
    let options = LoadOptions { context: Some(32), batch: 8, ..LoadOptions::default() };
    let load = || {
        let device = baton_cpu::open(&["cpu:0"]).expect("device").remove(0);
        let model = Model::load(&path, device.clone(), &options).expect("load");
        (device, model)
    };
    let (_cold_device, mut cold) = load();
    let want = steps(&mut cold);

    let (device, mut warm) = load();
    assert_eq!(device.packed_bytes(), 0, "nothing is packed before the first step");
    warm.warm_up().expect("warm-up");
    if baton_cpu::repack_enabled() {
        assert!(device.packed_bytes() > 0, "the warm-up packed the weights");
    }
    assert_eq!(warm.evaluated_tokens(), 0, "the warm-up is not counted");
    let packed = device.packed_bytes();
    assert_eq!(steps(&mut warm), want, "same logits with and without the warm-up");
    assert_eq!(device.packed_bytes(), packed, "nothing more to pack after the warm-up");
    assert_eq!(warm.evaluated_tokens(), cold.evaluated_tokens());
}
