//! Mixed devices give the CPU's results: synthetic models (tiny: f32, q8_0,
//! q4_1; tiny256: q4_k) on `vulkan:0` alone, layer-split over
//! `cpu:0,vulkan:0`, and (f32, q4_1) tensor-split over `cpu:0,vulkan:0`
//! (gates that copy: the GPU cannot bind the CPU's memory), against the
//! same model on one CPU device, in
//! teacher-forced logits (every position of a 48-token text), perplexity
//! (12 chunks of 32 tokens) and greedy tokens.
//!
//! Bounds (NMSE = squared error over squared norm, per evaluation). The
//! shaders compute what the CPU computes: float weights meet f32
//! activations, quantized weights meet activations rounded to 8 bits per
//! block exactly as the CPU rounds them (`Op::MatMul`, `act_q8.wgsl`), so
//! only the order of f32 sums differs. With f32 weights that is all,
//! bounded by 1e-9. With quantized weights a difference in the last bit now
//! and then lands an activation on the other side of a rounding step, and
//! from there on that position (and, through the KV cache, later ones)
//! carries one 8-bit step of difference; which positions tip depends on
//! the order of the sums, so it changes with the shaders. So the closest
//! position is bounded by 1e-9, the whole by 1e-3. Perplexity within 0.1%;
//! greedy tokens equal (asserted). The measured errors behind these bounds
//! are in docs/measurements.md.
//!
//! SmolLM2 is checked by `scripts/vulkan-smollm2.sh` (minutes on lavapipe).

use baton_model::EncodeOptions;
use std::path::Path;
use std::sync::Arc;

use baton_composite::CompositeDevice;
use baton_core::backend::{Device, IntoDevice};
use baton_core::sync::WaitPolicy;
use baton_core::DType;
use baton_gen::{perplexity, PerplexityOptions};
use baton_model::{LoadOptions, Logits, Model};
use baton_synth::SynthShape;
use baton_testkit::argmax;
use baton_testkit::synth::synth_model;

use crate::vulkan;

fn cpu(name: &str) -> Arc<dyn Device> {
    baton_cpu::open_with(&[name], &baton_cpu::OpenOptions::default().with_threads(1))
        .expect("cpu")
        .remove(0)
        .into_device()
}

fn options() -> LoadOptions {
    LoadOptions { context: Some(64), cache_type: DType::F32, batch: 64, ..Default::default() }
}

/// Squared error over the reference's squared norm.
fn nmse(got: &[f32], want: &[f32]) -> f64 {
    assert_eq!(got.len(), want.len());
    let err: f64 = got.iter().zip(want).map(|(&x, &y)| (f64::from(x) - f64::from(y)).powi(2)).sum();
    let norm: f64 = want.iter().map(|&y| f64::from(y).powi(2)).sum();
    err / norm.max(1e-30)
}

const TEXT: &str = "the quick brown fox jumps over the lazy dog; ";

/// What is compared: teacher-forced logits of every position, perplexity,
/// and greedy tokens after a prompt.
struct Scores {
    logits: Vec<f32>,
    ppl: f64,
    greedy: Vec<u32>,
}

/// `path` layer-split over `devices` (each holds layers).
fn layer_split(path: &Path, devices: Vec<Arc<dyn Device>>, options: &LoadOptions) -> Model {
    let n = devices.len();
    let model = Model::load_split(path, devices, options).expect("load");
    let (_, layers) = model.placement();
    assert!(layers.contains(&(n - 1)) && layers.contains(&0), "every device holds layers: {layers:?}");
    model
}

fn score(model: &mut Model, text: &str, teacher: usize, ppl: PerplexityOptions, steps: usize) -> Scores {
    let ids =
        model.tokenizer().encode(text, EncodeOptions { add_special: true, parse_special: false }).expect("encode");
    assert!(ids.len() >= teacher, "the text has {} tokens, fewer than {teacher}", ids.len());
    let logits = model.eval(&ids[..teacher], 0, Logits::All).expect("teacher-forced logits").to_vec();
    let ppl = perplexity(model, text, &ppl, &mut |_, _| {}).expect("perplexity").ppl;
    let prompt = &ids[..8];
    let mut next = argmax(model.eval(prompt, 0, Logits::Last).expect("prompt"));
    let mut greedy = vec![next];
    for past in prompt.len()..prompt.len() + steps {
        next = argmax(model.eval(&[next], past, Logits::Last).expect("decode"));
        greedy.push(next);
    }
    Scores { logits, ppl, greedy }
}

/// What a comparison checks besides the logits and perplexity.
struct Also {
    /// Greedy tokens equal to the CPU's.
    same_greedy: bool,
    /// A tensor split over `cpu:0,vulkan:0` too.
    tensor: bool,
}

/// Loads the model on one set-up.
type Loader<'a> = Box<dyn FnOnce() -> Model + 'a>;

fn compare(
    path: &Path,
    what: &str,
    options: &LoadOptions,
    text: &str,
    (teacher, ppl): (usize, PerplexityOptions),
    bound: f64,
    also: Also,
) {
    let Some(gpu) = vulkan() else { return };
    let steps = 12;
    let mut alone = Model::load(path, cpu("cpu"), options).expect("load on cpu");
    let want = score(&mut alone, text, teacher, ppl, steps);
    drop(alone);
    let mut runs: Vec<(&str, Loader<'_>)> = vec![
        ("vulkan:0", Box::new(move || layer_split(path, vec![gpu], options))),
        ("cpu:0,vulkan:0", Box::new(|| layer_split(path, vec![cpu("cpu:0"), vulkan().expect("vulkan:0")], options))),
    ];
    if also.tensor {
        runs.push((
            "cpu:0,vulkan:0 -sm tensor",
            Box::new(|| {
                let devices = vec![cpu("cpu:0"), vulkan().expect("vulkan:0")];
                let composite = CompositeDevice::new(devices, WaitPolicy::Block).expect("composite");
                Model::load_tensor_parallel(path, Arc::new(composite), options).expect("load tensor parallel")
            }),
        ));
    }
    for (names, load) in runs {
        let mut model = load();
        let got = score(&mut model, text, teacher, ppl, steps);
        drop(model);
        let e = nmse(&got.logits, &want.logits);
        let closest = closest_position_nmse(&got.logits, &want.logits, teacher);
        let apart = positions_apart(&got.logits, &want.logits, teacher);
        let delta = (got.ppl - want.ppl) / want.ppl;
        eprintln!(
            "{what} on {names}: teacher-forced NMSE {e:.3e} over {teacher} positions (closest position {closest:.1e}, {apart} apart beyond {ROUNDING:e}); perplexity {:.4} against {:.4} ({:+.4}%); greedy {}",
            got.ppl,
            want.ppl,
            delta * 100.0,
            if got.greedy == want.greedy { "equal" } else { "differs" }
        );
        assert!(e <= bound, "{what} on {names}: NMSE {e:e} (bound {bound:e})");
        assert!(closest <= ROUNDING, "{what} on {names}: closest position NMSE {closest:e} (bound {ROUNDING:e})");
        assert!(delta.abs() < 1e-3, "{what} on {names}: perplexity {} against {}", got.ppl, want.ppl);
        if also.same_greedy {
            assert_eq!(got.greedy, want.greedy, "{what} on {names}: greedy tokens");
        }
    }
    baton_vulkan::validation::assert_clean();
}

/// Positions whose logits differ only by the order of f32 sums stay under this.
const ROUNDING: f64 = 1e-9;

/// Bound on the whole comparison: one quantization step that an f32
/// difference tipped over (see the crate docs) stays at the scale of the
/// 8-bit rounding itself.
const BOUND: f64 = 1e-3;

/// NMSE of each position's logits (rows of `got.len() / positions`).
fn position_nmse(got: &[f32], want: &[f32], positions: usize) -> Vec<f64> {
    let v = got.len() / positions;
    (0..positions).map(|t| nmse(&got[t * v..][..v], &want[t * v..][..v])).collect()
}

/// The closest position: one evaluated before any rounding step was tipped
/// (a tipped step reaches later positions through the KV cache).
fn closest_position_nmse(got: &[f32], want: &[f32], positions: usize) -> f64 {
    position_nmse(got, want, positions).into_iter().fold(f64::INFINITY, f64::min)
}

fn positions_apart(got: &[f32], want: &[f32], positions: usize) -> usize {
    position_nmse(got, want, positions).iter().filter(|&&e| e > ROUNDING).count()
}

fn synth(shape: SynthShape, dtype: DType) {
    let (_dir, file) = synth_model("vulkan-mixed", shape, dtype, 7);
    let text = TEXT.repeat(40);
    let ppl = PerplexityOptions { context: 32, chunks: Some(12) };
    let bound = if dtype.is_quantized() { BOUND } else { ROUNDING };
    // Tensor parallelism over the CPU and the GPU too, for the float and a
    // block-quantized type (the gates copy between the devices: the GPU
    // cannot bind the CPU's memory).
    let tensor = matches!(dtype, DType::F32 | DType::Q4_1);
    compare(
        &file,
        &format!("{} {dtype}", shape.name()),
        &options(),
        &text,
        (48, ppl),
        bound,
        Also { same_greedy: true, tensor },
    );
}

#[test]
fn f32_model_on_vulkan_and_cpu_vulkan_gives_the_cpus_results() {
    synth(SynthShape::Tiny, DType::F32);
}

#[test]
fn q8_0_model_on_vulkan_and_cpu_vulkan_gives_the_cpus_results() {
    synth(SynthShape::Tiny, DType::Q8_0);
}

#[test]
fn q4_1_model_on_vulkan_and_cpu_vulkan_gives_the_cpus_results() {
    synth(SynthShape::Tiny, DType::Q4_1);
}

#[test]
fn q4_k_model_on_vulkan_and_cpu_vulkan_gives_the_cpus_results() {
    synth(SynthShape::Tiny256, DType::Q4_K);
}

/// SmolLM2-135M-Instruct (Q4_1) with a short text: the first 3000 bytes of
/// the GPL-3 (teacher-forced logits of 32 positions, perplexity over 2
/// chunks of 64). Minutes on lavapipe, so run by `scripts/vulkan-smollm2.sh`
/// rather than CI; the model comes from `BATON_SMOLLM2`.
///
/// It fails today, on the perplexity: over 30 layers every position has
/// tipped a rounding step somewhere, and two CPU computations that differ
/// only in the order of their sums differ by as much on two short chunks,
/// so no backend that does not match the CPU bit for bit passes this on a
/// short text (figures: docs/measurements.md). `scripts/gpu-check.sh`
/// compares over the whole GPL-3.
#[test]
#[ignore = "minutes on lavapipe: scripts/vulkan-smollm2.sh runs it"]
fn smollm2_on_vulkan_and_cpu_vulkan_gives_the_cpus_results() {
    let path = baton_testkit::env::smollm2();
    let text = std::fs::read_to_string("/usr/share/common-licenses/GPL-3").expect("the GPL-3 text");
    let text = &text[..3000];
    let options = LoadOptions { context: Some(64), batch: 64, ..Default::default() };
    let ppl = PerplexityOptions { context: 64, chunks: Some(2) };
    compare(&path, "SmolLM2-135M Q4_1", &options, text, (32, ppl), BOUND, Also { same_greedy: false, tensor: false });
}
