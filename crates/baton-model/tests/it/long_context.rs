//! Long contexts against the NumPy float64 reference: the logits of the
//! last positions of 4,096 tokens (16,384 with `BATON_LONG_CONTEXT=1`,
//! `scripts/check-long-context.sh`), evaluated in prompt batches of 512 as
//! `baton run` does, so every batch streams its attention over thousands
//! of cached positions (and Gemma's local layers over their window only).
//! Bounds as in `reference.rs`: f32 weights with an f32 cache `<= 1e-6`;
//! an 8-bit (q8_0) cache rounds every key and value to 8 bits per block of
//! 32, `<= 5e-4` (5.6e-5 measured at 4,096 positions).
#![cfg(feature = "reference-tests")]

use baton_core::DType;
use baton_model::{LoadOptions, Logits, Model};
use baton_synth::SynthShape;
use baton_testkit::synth::synth_model;

use super::reference::reference_logits_of;

/// Positions compared at the end of the context.
const LAST: usize = 4;

/// Tokens of the context: a fixed pseudo-random sequence.
fn tokens(n: usize, vocab: usize) -> Vec<u32> {
    (0..n as u64).map(|i| ((i.wrapping_mul(0x9E37_79B9) ^ (i >> 3)) % vocab as u64) as u32).collect()
}

fn long_case(shape: SynthShape, n: usize, cache: DType, bound: f64) {
    let (_dir, path) = synth_model(&format!("long-{shape}-{n}"), shape, DType::F32, 9);
    let options = LoadOptions { context: Some(n), batch: 512, cache_type: cache, ..LoadOptions::default() };
    let device = baton_cpu::open(&["cpu"]).expect("cpu").remove(0);
    let mut model = Model::load(&path, device, &options).expect("load");
    let vocab = model.config().vocab;
    let ids = tokens(n, vocab);
    let (head, tail) = ids.split_at(n - LAST);
    for (i, batch) in head.chunks(512).enumerate() {
        model.eval(batch, i * 512, Logits::Last).expect("eval");
    }
    let ours = model.eval(tail, n - LAST, Logits::All).expect("eval").to_vec();
    let reference = reference_logits_of(&path, &ids, Some(LAST));
    let (mut err, mut norm) = (0f64, 0f64);
    for (p, row) in reference.iter().enumerate() {
        for (a, b) in ours[p * vocab..(p + 1) * vocab].iter().zip(row) {
            err += (f64::from(*a) - b).powi(2);
            norm += b * b;
        }
    }
    let nmse = err / norm;
    println!("{shape}, {cache} cache, last {LAST} of {n} positions: NMSE {nmse:.3e}");
    assert!(nmse <= bound, "{shape} {cache} at {n} positions: NMSE {nmse:.3e} above {bound:e}");
}

/// The context of the long cases: 4,096, or 16,384 when asked for.
fn context() -> usize {
    if std::env::var_os("BATON_LONG_CONTEXT").is_some() {
        16_384
    } else {
        4096
    }
}

#[test]
fn tiny_logits_at_long_context_match_the_reference() {
    long_case(SynthShape::Tiny, context(), DType::F32, 1e-6);
}

#[test]
fn gemma3_logits_at_long_context_match_the_reference() {
    long_case(SynthShape::Gemma3, context(), DType::F32, 1e-6);
}

#[test]
fn gemma3_logits_at_long_context_with_a_q8_0_cache_match_the_reference() {
    long_case(SynthShape::Gemma3, context(), DType::Q8_0, 5e-4);
}
