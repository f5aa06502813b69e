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

/// The paged cache (the default here) through the other cache types at
/// long context: f16 and bf16 round each key and value to 11 and 8 bits of
/// mantissa (1.9e-8 and 3.0e-6 measured at 4,096 positions), q4_0 to 4
/// bits per block of 32 (8.8e-3 measured, on the heads of the 256-token
/// toy).
#[test]
fn logits_at_long_context_through_every_cache_type_match_the_reference() {
    for (shape, cache, bound) in [
        (SynthShape::Tiny, DType::F16, 2e-7),
        (SynthShape::Tiny, DType::BF16, 3e-5),
        (SynthShape::Tiny256, DType::Q4_0, 5e-2),
    ] {
        long_case(shape, context(), cache, bound);
    }
}
