//! Small AVX2 helpers shared by the kernels (x86_64 only).

use std::arch::x86_64::*;

/// Sum of the eight lanes of `v`. Safe to call from code compiled with the
/// same features (the kernels' AVX2 paths); elsewhere the caller must know
/// the CPU has them.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(crate) fn hsum(v: __m256) -> f32 {
    let pair = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let quad = _mm_add_ps(pair, _mm_movehl_ps(pair, pair));
    _mm_cvtss_f32(_mm_add_ss(quad, _mm_movehdup_ps(quad)))
}

/// The f16 with these bits, widened with F16C (callable as [`hsum`]).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(crate) fn f16_bits_to_f32(bits: u16) -> f32 {
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(bits))))
}
