//! Small AVX2 and AVX-512 helpers shared by the kernels (x86_64 only).

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

/// Bytes ahead of the block being read that the packed tiles prefetch:
/// decode streams the packed weights from memory once per token, and the
/// hardware prefetcher alone leaves gaps (at page boundaries, and between
/// the short streams of a group).
///
/// Measured on an AMD EPYC Zen 4 (2 threads, tg64 of a Llama 3.2 1B shape
/// in Q4_K_M): 2 KiB ahead into L1 (`T0`) gave 32 t/s, 8 KiB ahead into L2
/// (`T1`) 44-46 t/s, at the AVX-512 and AVX2 levels alike; 4 KiB and 16 KiB
/// were no better. A `T0` prefetch holds one of the core's few L1 miss
/// buffers until its line arrives, so far-ahead `T0` prefetches stall the
/// loads they should hide; `T1` ones are tracked by L2, which keeps many
/// more misses in flight. The Q6_K tile, whose blocks are the largest,
/// gained most: 1.5 KiB of a 1.8 KiB block in flight was too little.
pub(crate) const PREFETCH_AHEAD: usize = 8192;

/// Prefetches into L2 the cache lines of `bytes` bytes from `start` (one per 64
/// bytes from `start`: calls over consecutive ranges cover every line of a
/// stream). Only `wrapping_add` arithmetic on the address, and a prefetch
/// never faults, so `start` may lie past the end of any allocation.
/// Callable as [`hsum`].
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(crate) fn prefetch_lines(start: *const u8, bytes: usize) {
    for line in 0..bytes.div_ceil(64) {
        _mm_prefetch::<_MM_HINT_T1>(start.wrapping_add(64 * line).cast());
    }
}

/// The f16 with these bits, widened with F16C (callable as [`hsum`]).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(crate) fn f16_bits_to_f32(bits: u16) -> f32 {
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(bits))))
}

/// `2^(e - 128)` of each 32-bit lane `e` (0..=255), as
/// [`e8m0_half`](crate::quant::e8m0_half): the bits `(e - 1) << 23`
/// for `e >= 2`, the subnormals `0x0020_0000 << e` for `e` 0 and 1. Both
/// at once as the larger of `(e - 1) << 23` (negative for `e = 0`, 0 for
/// `e = 1`) and `(e + 1) << 21` (which is `0x0020_0000 << e` for those two,
/// and below `(e - 1) << 23` from `e = 2` on): no blend (callable as
/// [`hsum`]).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(crate) fn e8m0_half_ps(e: __m256i) -> __m256 {
    let normal = _mm256_slli_epi32::<23>(_mm256_sub_epi32(e, _mm256_set1_epi32(1)));
    let subnormal = _mm256_slli_epi32::<21>(_mm256_add_epi32(e, _mm256_set1_epi32(1)));
    _mm256_castsi256_ps(_mm256_max_epi32(normal, subnormal))
}

/// The AVX-512 register of two 256-bit halves: `low` in bits 0..256,
/// `high` in 256..512. Callable from code compiled with the kernels'
/// AVX-512 feature set (`Isa::Avx512`).
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
#[inline]
pub(crate) fn join256(low: __m256i, high: __m256i) -> __m512i {
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(low), high)
}

/// 16 f32 lanes: `low` in lanes 0..8, `high` in lanes 8..16 (callable as
/// [`join256`]).
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
#[inline]
pub(crate) fn halves_ps(low: f32, high: f32) -> __m512 {
    _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(low), _mm512_set1_ps(high))
}

/// The AVX-VNNI (VEX, 256-bit) dot products of the `Isa::AvxVnni` tiles.
/// Callable from code compiled with `avx2,fma,f16c,avxvnni`; elsewhere
/// the caller must know the CPU has AVX-VNNI.
pub(crate) mod vnni {
    use std::arch::x86_64::*;

    /// `acc + Σ u·s` over each i32 lane's 4 unsigned bytes of `u` times the
    /// signed bytes of `s` (`vpdpbusd`, no saturation: exact while the
    /// lane's total fits an i32).
    #[target_feature(enable = "avx2,fma,f16c,avxvnni")]
    #[inline]
    pub(crate) fn dpbusd(acc: __m256i, u: __m256i, s: __m256i) -> __m256i {
        _mm256_dpbusd_avx_epi32(acc, u, s)
    }

    /// `acc + Σ a·b` over each i32 lane's two i16 pairs (`vpdpwssd`),
    /// written as the instruction itself (as the AVX-512 tile's): LLVM may
    /// split the intrinsic into `vpmaddwd` + `vpaddd`. `{vex}` picks the
    /// AVX-VNNI encoding, which CPUs without AVX-512 run.
    #[target_feature(enable = "avx2,fma,f16c,avxvnni")]
    #[inline]
    pub(crate) fn dpwssd(mut acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: a register-only instruction of AVX-VNNI, which this
        // function's target features include; no memory, stack or flags.
        unsafe {
            std::arch::asm!(
                "{{vex}} vpdpwssd {acc}, {a}, {b}",
                acc = inout(ymm_reg) acc,
                a = in(ymm_reg) a,
                b = in(ymm_reg) b,
                options(pure, nomem, nostack, preserves_flags)
            );
        }
        acc
    }
}
