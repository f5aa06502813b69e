//! A layer's router and experts placed on another device than the rest of
//! the layer (`LoadOptions::expert_devices`, the CLI's `--cpu-moe`,
//! `--n-cpu-moe` and `-ot`): every step crosses to the experts' device and
//! back, and the logits are those of one device, bit for bit.

use baton_core::DType;
use baton_model::{LoadOptions, Logits, Model, ModelError};
use baton_synth::SynthShape;
use baton_testkit::synth::synth_model;

use super::batch::devices;

fn logits(model: &mut Model, prompt: &[u32]) -> Vec<u32> {
    let mut out: Vec<u32> = model.eval(prompt, 0, Logits::All).expect("prompt").iter().map(|x| x.to_bits()).collect();
    out.extend(model.eval(&[9], prompt.len(), Logits::Last).expect("decode").iter().map(|x| x.to_bits()));
    out
}

#[test]
fn experts_on_another_device_give_one_devices_bits() {
    let prompt: Vec<u32> = (0..11).map(|i| (i * 43 + 8) % 512).collect();
    for shape in [SynthShape::Qwen3Moe, SynthShape::GptOss, SynthShape::Qwen35Moe] {
        let (_dir, path) = synth_model("experts-placed", shape, DType::Q8_0, 5);
        let base = LoadOptions { context: Some(64), batch: 32, ..LoadOptions::default() };
        let want = logits(&mut Model::load(&path, devices(&["cpu"]).remove(0), &base).expect("one device"), &prompt);
        let layers = Model::load(&path, devices(&["cpu"]).remove(0), &base).expect("load").config().layers;
        // Every layer on cpu:0 with its experts on cpu:1; then only the
        // first layer's experts (`--n-cpu-moe 1`); then layers split over
        // both with each one's experts on the other device.
        let cases: [(Vec<f32>, Vec<Option<usize>>); 3] = [
            (vec![1.0, 0.0], vec![Some(1); layers]),
            (vec![1.0, 0.0], vec![Some(1)]),
            (vec![1.0, 1.0], (0..layers).map(|l| Some(usize::from(l < layers / 2))).collect()),
        ];
        for (split, experts) in cases {
            let options = LoadOptions { tensor_split: split.clone(), expert_devices: experts.clone(), ..base.clone() };
            let mut model = Model::load_split(&path, devices(&["cpu:0", "cpu:1"]), &options).expect("experts placed");
            let placed: Vec<usize> =
                (0..layers).map(|l| experts.get(l).copied().flatten().unwrap_or(model.placement().1[l])).collect();
            assert_eq!(model.expert_placement(), placed.as_slice());
            assert_eq!(logits(&mut model, &prompt), want, "{shape}: split {split:?}, experts on {experts:?}");
        }
    }
}

#[test]
fn experts_placed_on_a_model_without_them_or_no_device_are_errors() {
    let (_dir, path) = synth_model("experts-placed-bad", SynthShape::Qwen3, DType::Q8_0, 5);
    let options = LoadOptions { expert_devices: vec![Some(1)], ..LoadOptions::default() };
    let err = Model::load_split(&path, devices(&["cpu:0", "cpu:1"]), &options).err().expect("refused");
    assert!(matches!(err, ModelError::Config(_)) && err.to_string().contains("no experts"), "{err}");
    let (_dir, path) = synth_model("experts-placed-bad", SynthShape::Qwen3Moe, DType::Q8_0, 5);
    let options = LoadOptions { expert_devices: vec![Some(2)], ..LoadOptions::default() };
    let err = Model::load_split(&path, devices(&["cpu:0", "cpu:1"]), &options).err().expect("refused");
    assert!(err.to_string().contains("device 2 of 2"), "{err}");
}
