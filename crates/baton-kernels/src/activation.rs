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

use crate::isa::{multiversion, Isa};
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

/// Quantizes `src` (whole blocks) into `dst` (`src.len() / 32` blocks), at
/// `isa` (the same bits at every level).
pub(crate) fn quantize_activations(isa: Isa, src: &[f32], dst: &mut [ActBlock]) {
    #[cfg(target_arch = "x86_64")]
    if let Some(round) = simd_round_block(isa) {
        debug_assert_eq!(src.len(), dst.len() * BLOCK_ELEMS);
        for (x, block) in src.chunks_exact(BLOCK_ELEMS).zip(dst.iter_mut()) {
            let mut sums = [0i32; BLOCK_ELEMS / 16];
            // SAFETY: `round` is the level's own (`simd_round_block`).
            block.d = unsafe { round(x, &mut block.q, &mut sums) };
            block.sum = block.d * sums.iter().sum::<i32>() as f32;
        }
        return;
    }
    quantize_activations_portable(isa, src, dst)
}

/// A SIMD quantizer of one block: `(x, q, sums) -> d`.
#[cfg(target_arch = "x86_64")]
type RoundBlock = unsafe fn(&[f32], &mut [i8], &mut [i32]) -> f32;

/// A SIMD [`round_block`] for `isa`, if it has one: `(x, q, sums) -> d`
/// with `sums[i]` the sum of `q[16 i..16 i + 16]`.
///
/// Calling it is sound whenever `isa` came from `Isa::current()` (which
/// returns a level only when the CPU has its extensions): the AVX-512
/// quantizer needs AVX-512 F, BW, VL and DQ, the AVX2 one (every level
/// from AVX2 up) AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
fn simd_round_block(isa: Isa) -> Option<RoundBlock> {
    match isa {
        Isa::Avx512 => Some(avx512::round_block),
        isa if isa.has_avx2() => Some(avx2::round_block),
        _ => None,
    }
}

multiversion! {
    /// [`quantize_activations`] in portable code, vectorized by the compiler.
    fn quantize_activations_portable(src: &[f32], dst: &mut [ActBlock]) {
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

/// Quantizes `src` (whole super-blocks) into `dst` (`src.len() / 256`
/// blocks), at `isa` (the same bits at every level).
pub(crate) fn quantize_super_activations(isa: Isa, src: &[f32], dst: &mut [SuperActBlock]) {
    #[cfg(target_arch = "x86_64")]
    if let Some(round) = simd_round_block(isa) {
        debug_assert_eq!(src.len(), dst.len() * SUPER_ELEMS);
        for (x, block) in src.chunks_exact(SUPER_ELEMS).zip(dst.iter_mut()) {
            let mut sums = [0i32; GROUPS];
            // SAFETY: as in `quantize_activations`.
            block.d = unsafe { round(x, &mut block.q, &mut sums) };
            for (out, &sum) in block.sums.iter_mut().zip(&sums) {
                // 16 values of -127..=127: the sum fits.
                *out = sum as i16;
            }
        }
        return;
    }
    quantize_super_activations_portable(isa, src, dst)
}

multiversion! {
    /// [`quantize_super_activations`] in portable code.
    fn quantize_super_activations_portable(src: &[f32], dst: &mut [SuperActBlock]) {
        debug_assert_eq!(src.len(), dst.len() * SUPER_ELEMS);
        for (x, block) in src.chunks_exact(SUPER_ELEMS).zip(dst.iter_mut()) {
            block.d = round_block(x, &mut block.q);
            for (sum, q) in block.sums.iter_mut().zip(block.q.chunks_exact(GROUP_ELEMS)) {
                *sum = q.iter().map(|&v| i16::from(v)).sum();
            }
        }
    }
}

/// [`round_block`] written for AVX-512, which the compiler's version of the
/// portable one leaves to scalar steps per block (the horizontal maximum and
/// sum). The same bits: the maximum ignores NaN as `f32::max` does, values
/// round half to even, and a NaN value becomes 0 as its `as` cast makes it.
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    /// Quantizes `x` (16 values per `sums` entry) into `q` and returns `d`;
    /// `sums[i]` is the sum of `q[16 i..16 i + 16]`.
    ///
    /// # Safety
    /// The CPU must support AVX-512 F, BW, VL and DQ.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
    pub(super) unsafe fn round_block(x: &[f32], q: &mut [i8], sums: &mut [i32]) -> f32 {
        assert!(x.len() == q.len() && x.len() == sums.len() * 16, "round_block: 16 values per sum");
        let mut top = _mm512_setzero_ps();
        for c in x.chunks_exact(16) {
            // SAFETY: `c` is 16 f32s.
            let v = unsafe { _mm512_loadu_ps(c.as_ptr()) };
            // Where `|v|` (the first operand) is NaN, `top` stays.
            top = _mm512_max_ps(_mm512_abs_ps(v), top);
        }
        let amax = _mm512_reduce_max_ps(top);
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let (scale, lo, hi) = (_mm512_set1_ps(id), _mm512_set1_ps(-127.0), _mm512_set1_ps(127.0));
        for ((c, out), sum) in x.chunks_exact(16).zip(q.chunks_exact_mut(16)).zip(sums.iter_mut()) {
            // SAFETY: `c` is 16 f32s.
            let v = unsafe { _mm512_loadu_ps(c.as_ptr()) };
            let r = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm512_mul_ps(v, scale));
            // A NaN `r` (the second operand) passes both, as through `clamp`.
            let r = _mm512_max_ps(lo, _mm512_min_ps(hi, r));
            let ordered = _mm512_cmp_ps_mask::<_CMP_ORD_Q>(r, r);
            let qi = _mm512_maskz_mov_epi32(ordered, _mm512_cvttps_epi32(r));
            // SAFETY: `out` is 16 bytes, written unaligned.
            unsafe { _mm_storeu_si128(out.as_mut_ptr().cast(), _mm512_cvtepi32_epi8(qi)) };
            *sum = _mm512_reduce_add_epi32(qi);
        }
        d
    }
}

/// [`round_block`] written for AVX2, as [`avx512`] is (the compiler leaves
/// the portable one's horizontal steps scalar): 32 values a step, the same
/// bits (`vroundps` to nearest even gives [`crate::ops::round_small`]'s
/// integers for every `|v| <= 127`, ±inf and NaN alike).
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    /// The sum of the 8 i32 lanes of `v`.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    fn sum_lanes(v: __m256i) -> i32 {
        let half = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
        let quarter = _mm_add_epi32(half, _mm_unpackhi_epi64(half, half));
        _mm_cvtsi128_si32(_mm_add_epi32(quarter, _mm_shuffle_epi32::<1>(quarter)))
    }

    /// Quantizes `x` (a multiple of 32 values, 16 per `sums` entry) into
    /// `q` and returns `d`; `sums[i]` is the sum of `q[16 i..16 i + 16]`.
    ///
    /// # Safety
    /// The CPU must support AVX2, FMA and F16C.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn round_block(x: &[f32], q: &mut [i8], sums: &mut [i32]) -> f32 {
        assert!(x.len() == q.len() && x.len() == sums.len() * 16 && x.len().is_multiple_of(32), "round_block");
        let sign = _mm256_set1_ps(-0.0);
        let mut top = _mm256_setzero_ps();
        for c in x.chunks_exact(8) {
            // SAFETY: `c` is 8 f32s.
            let v = unsafe { _mm256_loadu_ps(c.as_ptr()) };
            // Where `|v|` (the first operand) is NaN, `top` stays, as
            // `f32::max` ignores NaN.
            top = _mm256_max_ps(_mm256_andnot_ps(sign, v), top);
        }
        let mut lanes = [0.0f32; 8];
        // SAFETY: 8 f32s.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), top) };
        let amax = lanes.iter().fold(0.0f32, |a, &b| a.max(b));
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let (scale, lo, hi) = (_mm256_set1_ps(id), _mm256_set1_ps(-127.0), _mm256_set1_ps(127.0));
        // `packs` works within 128-bit halves; this puts the 8 dwords back
        // in element order.
        let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        for ((c, out), sums) in x.chunks_exact(32).zip(q.chunks_exact_mut(32)).zip(sums.chunks_exact_mut(2)) {
            let ints: [__m256i; 4] = std::array::from_fn(|j| {
                // SAFETY: `c` is 32 f32s, j < 4.
                let v = unsafe { _mm256_loadu_ps(c.as_ptr().add(8 * j)) };
                let r = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm256_mul_ps(v, scale));
                // A NaN `r` (the second operand) passes both, as through `clamp`.
                let r = _mm256_max_ps(lo, _mm256_min_ps(hi, r));
                let ordered = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_ORD_Q>(r, r));
                _mm256_and_si256(ordered, _mm256_cvttps_epi32(r))
            });
            let words = _mm256_packs_epi32(ints[0], ints[1]);
            let words_high = _mm256_packs_epi32(ints[2], ints[3]);
            let bytes = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(words, words_high), order);
            // SAFETY: `out` is 32 bytes, written unaligned.
            unsafe { _mm256_storeu_si256(out.as_mut_ptr().cast(), bytes) };
            sums[0] = sum_lanes(_mm256_add_epi32(ints[0], ints[1]));
            sums[1] = sum_lanes(_mm256_add_epi32(ints[2], ints[3]));
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values a row of activations may hold, the awkward ones included.
    fn rows() -> Vec<Vec<f32>> {
        let mut state = 7u64;
        let mut random = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 8.0
        };
        let plain: Vec<f32> = (0..512).map(|_| random()).collect();
        let mut awkward = plain.clone();
        for (i, v) in [f32::NAN, 0.0, -0.0, f32::INFINITY, 1e-40, -1e30, 3.5, -2.5, f32::NEG_INFINITY, 1e-39, -3e-39]
            .iter()
            .enumerate()
        {
            awkward[i * 37] = *v;
        }
        // A block of zeros, one of ties (x.5 after scaling), one of NaNs.
        awkward[256..288].fill(0.0);
        for (i, v) in awkward[288..320].iter_mut().enumerate() {
            *v = (i as f32 - 16.0) + 0.5;
        }
        awkward[320..352].fill(f32::NAN);
        // Blocks whose `d = amax / 127` is subnormal, with `1 / d` finite
        // (amax 1e-36) and infinite (amax 1e-38).
        for (block, amax) in [(352, 1e-36f32), (384, 1e-38)] {
            for (i, v) in awkward[block..block + 32].iter_mut().enumerate() {
                *v = amax * (i as f32 - 16.0) / 16.0;
            }
        }
        vec![plain, awkward]
    }

    #[test]
    fn every_level_quantizes_to_the_same_bits() {
        for row in rows() {
            let mut want = vec![ActBlock::default(); row.len() / BLOCK_ELEMS];
            quantize_activations(Isa::Scalar, &row, &mut want);
            let mut want_super = vec![SuperActBlock::default(); row.len() / SUPER_ELEMS];
            quantize_super_activations(Isa::Scalar, &row, &mut want_super);
            for isa in Isa::available().into_iter().filter(|&isa| isa > Isa::Scalar) {
                let mut got = vec![ActBlock::default(); want.len()];
                quantize_activations(isa, &row, &mut got);
                for (g, w) in got.iter().zip(&want) {
                    assert_eq!((g.d.to_bits(), g.sum.to_bits(), g.q), (w.d.to_bits(), w.sum.to_bits(), w.q), "{isa:?}");
                }
                let mut got = vec![SuperActBlock::default(); want_super.len()];
                quantize_super_activations(isa, &row, &mut got);
                for (g, w) in got.iter().zip(&want_super) {
                    assert_eq!((g.d.to_bits(), g.q, g.sums), (w.d.to_bits(), w.q, w.sums), "{isa:?}");
                }
            }
        }
    }
}
