//! Activations quantized once per matmul call: Q8_K super-blocks for K-quant
//! weights ([`SuperActBlock`]), and for the 32-value formats Q8 blocks with an f32 scale and
//! the sum of the block's quantized values, so that a weight block's integers
//! multiply against bytes and its offset term (`-8 d` or `m`) costs one
//! multiply.
//!
//! The sum is `d * Σ q`, not the exact `Σ x`: with the quantized sum the
//! rounding errors of the activations meet the decoded (centred) weight
//! values, while the exact sum would leave them multiplied by the raw,
//! uncentred nibbles, a larger error (docs/measurements.md).

use crate::isa::multiversion;
use crate::quant::kquant::{GROUPS, GROUP_ELEMS, SUPER_ELEMS};
use crate::quant::BLOCK_ELEMS;

/// Rounds the block `x` (a multiple of 8 values) to `q = round(x / d)` with
/// `d = amax / 127` (as `Op::MatMul` states: `x * (1 / d)`, halves to
/// even; `q = 0` where `d = 0`) and returns `d`. Inlined into each
/// multiversioned caller, so the lanes of `amax` vectorize there.
#[inline(always)]
fn round_block(x: &[f32], q: &mut [i8]) -> f32 {
    let mut amax = [0.0f32; 8];
    for lanes in x.chunks_exact(8) {
        for l in 0..8 {
            amax[l] = amax[l].max(lanes[l].abs());
        }
    }
    let amax = amax.iter().fold(0.0f32, |a, &b| a.max(b));
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    for (q, &v) in q.iter_mut().zip(x) {
        // In -127..=127 already (|v| <= amax); the clamp and the cast
        // through i32 are what vectorize: a float cast straight to i8
        // saturates element by element.
        *q = crate::ops::round_small(v * id).clamp(-127.0, 127.0) as i32 as i8;
    }
    d
}

/// 32 activations as `d * q` (`q` in -127..=127) plus `d * Σ q`.
///
/// An internal layout (not a GGUF one): the scale stays f32 to lose nothing
/// beyond the 8-bit rounding of the values themselves.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ActBlock {
    /// Scale: `amax / 127`.
    pub d: f32,
    /// `d * Σ q`: the sum of the 32 values as quantized.
    pub sum: f32,
    /// Rounded `x / d`.
    pub q: [i8; BLOCK_ELEMS],
}

multiversion! {
    /// Quantizes `src` (whole blocks) into `dst` (`src.len() / 32` blocks).
    pub(crate) fn quantize_activations(src: &[f32], dst: &mut [ActBlock]) {
        debug_assert_eq!(src.len(), dst.len() * BLOCK_ELEMS);
        for (x, block) in src.chunks_exact(BLOCK_ELEMS).zip(dst.iter_mut()) {
            block.d = round_block(x, &mut block.q);
            block.sum = block.d * block.q.iter().map(|&q| i32::from(q)).sum::<i32>() as f32;
        }
    }
}

/// 256 activations in GGML's Q8_K layout (`#[repr(C)]`: f32 `d`, 256 `i8`,
/// 16 `i16` sums of 16), the partner of K-quant weights. `d = amax / 127`,
/// so `q` stays in -127..=127 (the sign trick of Q8_K weights needs that),
/// and the sums are exact, so a weight group's offset costs one multiply.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct SuperActBlock {
    /// Scale: `amax / 127`.
    pub d: f32,
    /// Rounded `x / d`.
    pub q: [i8; SUPER_ELEMS],
    /// `Σ q` over each group of 16.
    pub sums: [i16; GROUPS],
}

impl Default for SuperActBlock {
    fn default() -> Self {
        SuperActBlock { d: 0.0, q: [0; SUPER_ELEMS], sums: [0; GROUPS] }
    }
}

multiversion! {
    /// Quantizes `src` (whole super-blocks) into `dst` (`src.len() / 256` blocks).
    pub(crate) fn quantize_super_activations(src: &[f32], dst: &mut [SuperActBlock]) {
        debug_assert_eq!(src.len(), dst.len() * SUPER_ELEMS);
        for (x, block) in src.chunks_exact(SUPER_ELEMS).zip(dst.iter_mut()) {
            block.d = round_block(x, &mut block.q);
            for (sum, q) in block.sums.iter_mut().zip(block.q.chunks_exact(GROUP_ELEMS)) {
                *sum = q.iter().map(|&v| i16::from(v)).sum();
            }
        }
    }
}
