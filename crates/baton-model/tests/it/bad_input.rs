//! Bad input gets a clear error, never a panic: damaged files, a foreign
//! architecture, out-of-range tokens, a full context.

use std::sync::Arc;

use baton_core::backend::Device;
use baton_core::DType;
use baton_model::{LoadOptions, Logits, Model, ModelError};
use baton_synth::SynthShape;
use baton_testkit::synth::tiny_model;

fn device() -> Arc<dyn Device> {
    baton_cpu::open_with(&["cpu"], &baton_cpu::OpenOptions::default().with_threads(1)).expect("cpu").remove(0)
}

pub(super) fn load(path: &std::path::Path) -> Result<Model, ModelError> {
    Model::load(path, device(), &LoadOptions { context: Some(32), batch: 16, ..LoadOptions::default() })
}

#[test]
fn a_missing_file_is_a_read_error() {
    let err = load("/nonexistent/model.gguf".as_ref()).err().expect("must fail");
    assert!(matches!(err, ModelError::Read(_)), "{err}");
    assert!(err.to_string().contains("/nonexistent/model.gguf"), "the error names the file: {err}");
}

#[test]
fn truncated_models_are_errors_at_every_cut() {
    let (dir, tiny) = tiny_model("bad-truncated", DType::Q8_0, 3);
    let bytes = std::fs::read(tiny).expect("read");
    let cut = dir.file("cut.gguf");
    for len in [0, 3, 4, 24, 100, 1000, bytes.len() / 2, bytes.len() - 1] {
        std::fs::write(&cut, &bytes[..len]).expect("write");
        assert!(load(&cut).is_err(), "a file cut at {len} of {} bytes loaded", bytes.len());
    }
}

#[test]
fn a_foreign_architecture_is_named_in_the_error() {
    let (dir, tiny) = tiny_model("bad-arch", DType::Q8_0, 3);
    let mut bytes = std::fs::read(tiny).expect("read");
    // Rename "llama" in general.architecture to "lxama" (same length).
    let at = bytes.windows(5).position(|w| w == b"llama").expect("the architecture string");
    bytes[at + 1] = b'x';
    let path = dir.file("other.gguf");
    std::fs::write(&path, &bytes).expect("write");
    match load(&path) {
        Err(ModelError::Architecture(a)) => assert_eq!(a, "lxama"),
        Err(other) => panic!("expected an architecture error, got {other}"),
        Ok(_) => panic!("loaded a non-llama model"),
    }
}

/// Loads `bytes` (a GGUF file) with each `(key, value, named)` of `cases`
/// patched in turn (the u32 after `key`), asserting an error that contains
/// `named`.
pub(super) fn assert_patched_keys_named(dir: &baton_testkit::TempDir, bytes: &[u8], cases: &[(&str, u32, &str)]) {
    for &(key, value, named) in cases {
        let at = bytes.windows(key.len()).position(|w| w == key.as_bytes()).expect("the key") + key.len() + 4;
        let mut changed = bytes.to_vec();
        changed[at..at + 4].copy_from_slice(&value.to_le_bytes());
        let file = dir.file("changed.gguf");
        std::fs::write(&file, &changed).expect("write");
        let err = load(&file).err().unwrap_or_else(|| panic!("{key} = {value} loaded"));
        assert!(err.to_string().contains(named), "{key} = {value}: {err}");
    }
}

/// A mixture of experts whose metadata does not fit its tensors, or is
/// out of bounds, and a YaRN factor that is not one at least, are refused
/// with an error that names the key or tensor.
#[test]
fn expert_metadata_that_does_not_fit_is_named_in_the_error() {
    let (dir, path) = baton_testkit::synth::synth_model("bad-experts", SynthShape::Qwen3Moe, DType::Q8_0, 3);
    let bytes = std::fs::read(&path).expect("read");
    // The u32 value after a key (GGUF: key string, type u32 = 4, value).
    assert_patched_keys_named(
        &dir,
        &bytes,
        &[
            ("qwen3moe.expert_count", 0u32, "qwen3moe.expert_count"),
            ("qwen3moe.expert_count", 100_000, "qwen3moe.expert_count"),
            ("qwen3moe.expert_used_count", 17, "qwen3moe.expert_used_count"),
            ("qwen3moe.expert_used_count", 0, "qwen3moe.expert_used_count"),
            // 8 experts declared, 16 stacked: the router's shape is wrong.
            ("qwen3moe.expert_count", 8, "ffn_gate_inp"),
            ("qwen3moe.expert_feed_forward_length", 32, "ffn_gate_exps"),
        ],
    );
    // gpt-oss: a YaRN factor below one (or not a number) is named.
    let (dir, path) = baton_testkit::synth::synth_model("bad-yarn", SynthShape::GptOss, DType::Q8_0, 3);
    let bytes = std::fs::read(&path).expect("read");
    let key = "gpt-oss.rope.scaling.factor";
    let at = bytes.windows(key.len()).position(|w| w == key.as_bytes()).expect("the key") + key.len() + 4;
    for factor in [0.5f32, f32::NAN, 0.0] {
        let mut changed = bytes.clone();
        changed[at..at + 4].copy_from_slice(&factor.to_le_bytes());
        let file = dir.file("changed.gguf");
        std::fs::write(&file, &changed).expect("write");
        let err = load(&file).err().unwrap_or_else(|| panic!("a YaRN factor of {factor} loaded"));
        assert!(err.to_string().contains(key), "{factor}: {err}");
    }
}

/// A hybrid model's recurrent-layer metadata out of bounds or not fitting
/// its tensors is refused with an error that names the key or tensor; and
/// a split by tensor, which its recurrent layers do not have yet, is
/// refused saying so.
#[test]
fn recurrent_metadata_that_does_not_fit_is_named_in_the_error() {
    let (dir, path) = baton_testkit::synth::synth_model("bad-hybrid", SynthShape::Qwen35, DType::Q8_0, 3);
    let bytes = std::fs::read(&path).expect("read");
    assert_patched_keys_named(
        &dir,
        &bytes,
        &[
            ("qwen35.ssm.conv_kernel", 1u32, "ssm.conv_kernel"),
            ("qwen35.ssm.conv_kernel", 1000, "ssm.conv_kernel"),
            ("qwen35.ssm.conv_kernel", 3, "ssm_conv1d"),
            ("qwen35.ssm.group_count", 3, "ssm.group_count"),
            ("qwen35.ssm.time_step_rank", 0, "ssm.time_step_rank"),
            ("qwen35.ssm.inner_size", 60, "ssm.inner_size"),
            ("qwen35.ssm.state_size", 1 << 20, "ssm.state_size"),
            ("qwen35.full_attention_interval", 0, "full_attention_interval"),
            // Every layer attends: layer 0 has no attn_q.
            ("qwen35.full_attention_interval", 1, "attn_q"),
        ],
    );
    let cpus = super::batch::devices(&["cpu:0", "cpu:1"]);
    let composite = Arc::new(
        baton_composite::CompositeDevice::new(cpus, baton_core::sync::WaitPolicy::default()).expect("composite"),
    );
    let err = Model::load_tensor_parallel(&path, composite, &LoadOptions::default()).err().expect("refused");
    assert!(err.to_string().contains("hybrid model's recurrent layers"), "{err}");
}

#[test]
fn bad_evaluations_are_errors_and_the_model_stays_usable() {
    let (_dir, tiny) = tiny_model("bad-eval", DType::Q8_0, 3);
    let mut model = load(&tiny).expect("load");
    let vocab = model.config().vocab as u32;
    assert!(matches!(model.eval(&[vocab], 0, Logits::Last), Err(ModelError::Input(_))), "token out of range");
    assert!(matches!(model.eval(&[], 0, Logits::Last), Err(ModelError::Input(_))), "no tokens");
    assert!(matches!(model.eval(&[1; 17], 0, Logits::Last), Err(ModelError::Input(_))), "more than a batch");
    assert!(matches!(model.eval(&[1], 32, Logits::Last), Err(ModelError::ContextFull { .. })), "past the context");
    let logits = model.eval(&[1, 2, 3], 0, Logits::Last).expect("a good evaluation still works");
    assert!(logits.iter().all(|l| l.is_finite()));
}
