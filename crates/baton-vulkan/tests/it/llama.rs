//! The llama path on Vulkan: a synthetic model, loaded once on a CPU device
//! and once on a Vulkan device, gives the same logits for a prompt and for
//! the decode steps after it (every op of the llama graph, the KV cache
//! written in place, weights of each type).

use baton_core::backend::IntoDevice;
use baton_core::DType;
use baton_model::{LoadOptions, Model};
use baton_synth::SynthShape;
use baton_testkit::synth::synth_model;

use crate::vulkan;

/// Relative RMS difference of two logit vectors.
fn relative_rms(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len());
    let err: f64 = a.iter().zip(b).map(|(&x, &y)| (f64::from(x) - f64::from(y)).powi(2)).sum();
    let norm: f64 = b.iter().map(|&y| f64::from(y).powi(2)).sum();
    (err / norm.max(1e-30)).sqrt()
}

fn same_logits(shape: SynthShape, dtype: DType, bound: f64) {
    same_logits_with(shape, dtype, bound, &Default::default());
}

/// As [`same_logits`], both models loaded with `options` (a cache type).
fn same_logits_with(shape: SynthShape, dtype: DType, bound: f64, options: &LoadOptions) {
    let Some(gpu) = vulkan() else { return };
    let (_dir, path) = synth_model("vulkan-llama", shape, dtype, 7);
    let cpu = baton_cpu::open_with(&["cpu"], &baton_cpu::OpenOptions::default().with_threads(1))
        .expect("cpu")
        .remove(0)
        .into_device();
    let mut on_cpu = Model::load(&path, cpu, options).expect("load on cpu");
    let mut on_gpu = Model::load(&path, gpu, options).expect("load on vulkan");
    let prompt: Vec<u32> = vec![1, 17, 42, 99, 7, 256, 3];
    let expected = on_cpu.eval_prompt(&prompt, 0).expect("cpu prompt").to_vec();
    let got = on_gpu.eval_prompt(&prompt, 0).expect("vulkan prompt").to_vec();
    let e = relative_rms(&got, &expected);
    eprintln!("{dtype} prompt ({} cache): relative RMS difference {e:e}", options.cache_type);
    assert!(e < bound, "{dtype} prompt: relative RMS difference {e:e} (bound {bound:e})");
    for (past, token) in (prompt.len()..).zip([5u32, 300, 11]) {
        let expected = on_cpu.eval_prompt(&[token], past).expect("cpu decode").to_vec();
        let got = on_gpu.eval_prompt(&[token], past).expect("vulkan decode").to_vec();
        let e = relative_rms(&got, &expected);
        assert!(e < bound, "{dtype} decode at {past}: relative RMS difference {e:e} (bound {bound:e})");
    }
    drop((on_gpu, on_cpu));
    baton_vulkan::validation::assert_clean();
}

#[test]
fn f32_model_matches_the_cpu() {
    same_logits(SynthShape::Tiny, DType::F32, 1e-4);
}

#[test]
fn f16_model_matches_the_cpu() {
    same_logits(SynthShape::Tiny, DType::F16, 1e-3);
}

/// With quantized weights the CPU quantizes activations to 8 bits before
/// its integer dot products, and the shaders keep them in f32: the logits
/// differ by that error (about 3%; the shaders' own error is checked
/// against f64 references by the op cases).
const QUANTIZED: f64 = 6e-2;

#[test]
fn q4_1_model_matches_the_cpu() {
    same_logits(SynthShape::Tiny, DType::Q4_1, QUANTIZED);
}

#[test]
fn q8_0_model_matches_the_cpu() {
    same_logits(SynthShape::Tiny, DType::Q8_0, QUANTIZED);
}

#[test]
fn q4_k_model_matches_the_cpu() {
    same_logits(SynthShape::Tiny256, DType::Q4_K, QUANTIZED);
}

/// KV caches of Q8_0 and Q4_0 blocks (`-ctk q8_0 -ctv q8_0`, and q4_0) on
/// shapes whose heads are whole blocks (Qwen 3's of 32; Gemma 3's, with its
/// sliding-window rings): the shaders quantize each new key and value row as
/// the CPU does and attend over the blocks, so the logits differ by the
/// order of the f32 sums, and by a rounding step where a value lands on a
/// tie (a device may fuse a product and a sum that the CPU rounds apart).
#[test]
fn block_caches_match_the_cpu() {
    for (cache_type, bound) in [(DType::Q8_0, 1e-3), (DType::Q4_0, 1e-2)] {
        let options = LoadOptions { cache_type, ..Default::default() };
        for shape in [SynthShape::Qwen3, SynthShape::Gemma3] {
            same_logits_with(shape, DType::F32, bound, &options);
        }
    }
}
