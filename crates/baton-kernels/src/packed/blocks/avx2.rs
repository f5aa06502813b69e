//! The AVX2 and AVX-VNNI tiles of the packed 32-value formats: per step,
//! one 256-bit vector of 8 rows' weights against the activations' 4 bytes
//! broadcast; AVX2 `maddubs` into i16 pairs (summed over as many steps as
//! an i16 holds) and `madd` into i32 lanes, AVX-VNNI `vpdpbusd` straight
//! into the i32 lanes. Q8_0 takes the sign trick (`|w| · sign(x, w)`);
//! MXFP4's codes become its unsigned integers through a byte shuffle.

use std::arch::x86_64::*;

use super::layout::{Blocks, CHUNK, STEP, STEPS};
use crate::activation::ActBlock;
use crate::packed::format::{PackedFormat, GROUP_ROWS};
use crate::quant::{BlockFormat, Offset, Quants, Scale};
use crate::simd::{e8m0_half_ps, prefetch_lines, vnni, PREFETCH_AHEAD};

/// The 8 rows' scales, and the offsets they add per unit of `sum_x` (`-c d`
/// with `c = centre`, or the stored minimums; `None` without offset).
///
/// # Safety
/// The CPU has AVX2, FMA and F16C; `p` is a readable packed block of `F`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) unsafe fn scales<F: BlockFormat>(p: *const u8, centre: Option<f32>) -> (__m256, Option<__m256>) {
    // SAFETY: the scales (16 bytes of f16 or 8 of E8M0) and minimums (16
    // bytes) lie inside the block.
    unsafe {
        let d = match F::SCALE {
            Scale::F16 => _mm256_cvtph_ps(_mm_loadu_si128(p.cast())),
            Scale::E8M0 => e8m0_half_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(p.cast()))),
        };
        let offset = match (F::OFFSET, centre) {
            (Offset::StoredMin, _) => Some(_mm256_cvtph_ps(_mm_loadu_si128(p.add(Blocks::<F>::MINS).cast()))),
            (_, Some(c)) => Some(_mm256_mul_ps(d, _mm256_set1_ps(-c))),
            (_, None) => None,
        };
        (d, offset)
    }
}

/// `acc[0] = fma(dot, d_w d_x, acc[0])` and `acc[1] = fma(offset, sum_x,
/// acc[1])`: the f32 operations of every level's tile, once per block and
/// row, in two chains (so a lone row does not wait on one chain of two
/// dependent FMAs per block); the output is `acc[0] + acc[1]` ([`finish`]).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) fn accumulate(acc: &mut [__m256; 2], dot: __m256i, d: __m256, offset: Option<__m256>, a: &ActBlock) {
    acc[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(d, _mm256_set1_ps(a.d)), acc[0]);
    if let Some(offset) = offset {
        acc[1] = _mm256_fmadd_ps(offset, _mm256_set1_ps(a.sum), acc[1]);
    }
}

/// Prefetches the packed block [`PREFETCH_AHEAD`] bytes after `p`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) fn prefetch<F: BlockFormat>(p: *const u8) {
    prefetch_lines(p.wrapping_add(PREFETCH_AHEAD), Blocks::<F>::PACKED_BYTES);
}

/// Stores each row's `acc[0] + acc[1]` into `out`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) fn finish<const MR: usize>(acc: &[[__m256; 2]; MR], out: &mut [[f32; GROUP_ROWS]; MR]) {
    for (out, acc) in out.iter_mut().zip(acc) {
        // SAFETY: `out` is 8 f32s.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), _mm256_add_ps(acc[0], acc[1])) };
    }
}

/// Moves the fifth bits of step `s` to bit 4 of each byte (see the layout:
/// bit `s` of each byte), other bits cleared.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn fifth_bits(high: __m256i, s: usize) -> __m256i {
    // 16-bit shifts by at most 4 places: bit 4 of every byte comes from the
    // same byte, and the mask drops what crossed over.
    let moved = match s {
        0 => _mm256_slli_epi16::<4>(high),
        1 => _mm256_slli_epi16::<3>(high),
        2 => _mm256_slli_epi16::<2>(high),
        3 => _mm256_slli_epi16::<1>(high),
        4 => high,
        5 => _mm256_srli_epi16::<1>(high),
        6 => _mm256_srli_epi16::<2>(high),
        _ => _mm256_srli_epi16::<3>(high),
    };
    _mm256_and_si256(moved, _mm256_set1_epi8(0x10))
}

/// Chunk `c`'s weights: `[low, high]`, the steps `c` and `c + CHUNKS`
/// as unsigned bytes; Q8_0's chunk is one step of signed bytes (`low`; the
/// `high` half is unused).
///
/// # Safety
/// The CPU has AVX2, FMA and F16C; `p` is a readable packed block of `F`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn chunk<F: BlockFormat>(p: *const u8, c: usize) -> [__m256i; 2] {
    // SAFETY: chunk `c < CHUNKS` and the fifth bits lie inside the block.
    unsafe {
        let v = _mm256_loadu_si256(p.add(Blocks::<F>::QUANTS + c * CHUNK).cast());
        if F::QUANTS == Quants::Bytes {
            return [v, v];
        }
        let mask = _mm256_set1_epi8(0x0f);
        let mut low = _mm256_and_si256(v, mask);
        let mut high = _mm256_and_si256(_mm256_srli_epi16::<4>(v), mask);
        if Blocks::<F>::HAS_HIGH {
            let bits = _mm256_loadu_si256(p.add(Blocks::<F>::HIGH).cast());
            low = _mm256_or_si256(low, fifth_bits(bits, c));
            high = _mm256_or_si256(high, fifth_bits(bits, c + Blocks::<F>::CHUNKS));
        }
        if let Quants::Lookup(table) = F::QUANTS {
            // SAFETY: the table is 16 bytes.
            let table = _mm256_broadcastsi128_si256(_mm_loadu_si128(table.as_ptr().cast()));
            return [_mm256_shuffle_epi8(table, low), _mm256_shuffle_epi8(table, high)];
        }
        [low, high]
    }
}

/// The tile at AVX2 (`maddubs`) or AVX-VNNI (`vpdpbusd`, [`vnni`]): the
/// same exact i32 sums per lane, then the same f32 steps.
macro_rules! tile_fn {
    ($(#[$meta:meta])* $name:ident, $features:literal, $vnni:literal) => {
        $(#[$meta])*
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $name<F: BlockFormat, const MR: usize>(
            acts: &[ActBlock],
            blocks: usize,
            group: *const u8,
            out: &mut [[f32; GROUP_ROWS]; MR],
        ) {
            let ones = _mm256_set1_epi16(1);
            let signed = F::QUANTS == Quants::Bytes;
            // Steps per chunk: Q8_0's one, the nibbles' two (low, high).
            let halves = if signed { 1 } else { 2 };
            let centre = match F::OFFSET {
                Offset::Centred(c) => Some(c as f32),
                _ => None,
            };
            let mut acc = [[_mm256_setzero_ps(); 2]; MR];
            for b in 0..blocks {
                // SAFETY: block b < blocks of the group (caller's guarantee).
                let p = unsafe { group.add(b * Blocks::<F>::PACKED_BYTES) };
                prefetch::<F>(p);
                // SAFETY: as above.
                let (d, offset) = unsafe { scales::<F>(p, centre) };
                let x: [&ActBlock; MR] = std::array::from_fn(|i| &acts[i * blocks + b]);
                let mut dot = [_mm256_setzero_si256(); MR];
                let mut pairs = [_mm256_setzero_si256(); MR];
                // Plain counted loops over constants (no iterator state), so the
                // compiler unrolls them and the i16 flushes fall at fixed steps.
                for c in 0..Blocks::<F>::CHUNKS {
                    // SAFETY: c < CHUNKS, inside the block.
                    let w = unsafe { chunk::<F>(p, c) };
                    for (h, &w) in w.iter().enumerate().take(halves) {
                        let s = c + h * Blocks::<F>::CHUNKS;
                        let unsigned = if signed { _mm256_abs_epi8(w) } else { w };
                        for i in 0..MR {
                            let at = x[i].q.as_ptr().wrapping_add(s * STEP).cast::<i32>();
                            // SAFETY: bytes 4 s..4 s + 4 of the 32 in `q`.
                            let xs = _mm256_set1_epi32(unsafe { at.read_unaligned() });
                            let xs = if signed { _mm256_sign_epi8(xs, w) } else { xs };
                            if $vnni {
                                // SAFETY: only the AVX-VNNI tile takes this
                                // branch, and its target features include it.
                                dot[i] = unsafe { vnni::dpbusd(dot[i], unsigned, xs) };
                            } else {
                                pairs[i] = _mm256_add_epi16(pairs[i], _mm256_maddubs_epi16(unsigned, xs));
                            }
                        }
                        // Steps done so far, in the order taken.
                        let taken = c * halves + h + 1;
                        if !$vnni && (taken % Blocks::<F>::I16_STEPS == 0 || taken == STEPS) {
                            for i in 0..MR {
                                dot[i] = _mm256_add_epi32(dot[i], _mm256_madd_epi16(pairs[i], ones));
                                pairs[i] = _mm256_setzero_si256();
                            }
                        }
                    }
                }
                for i in 0..MR {
                    accumulate(&mut acc[i], dot[i], d, offset, x[i]);
                }
            }
            finish(&acc, out);
        }
    };
}

tile_fn!(
    /// # Safety
    /// The CPU has AVX2, FMA and F16C; `acts` holds `MR * blocks` blocks;
    /// `group` is readable for `blocks` packed blocks of `F`.
    tile,
    "avx2,fma,f16c",
    false
);

tile_fn!(
    /// [`tile`] with `vpdpbusd` (VEX) in place of `maddubs` and the i16
    /// flushes: 4 products summed straight into each i32 lane.
    ///
    /// # Safety
    /// As [`tile`], and the CPU has AVX-VNNI.
    #[allow(unused_unsafe)]
    tile_vnni,
    "avx2,fma,f16c,avxvnni",
    true
);
