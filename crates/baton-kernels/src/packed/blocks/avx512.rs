//! The AVX-512 (VNNI) tile of the packed 32-value formats: two steps per
//! 512-bit register. For several activation rows the weights are permuted
//! once per pair so that i32 lane `2r + h` is row `r`'s step `h`, and
//! `vpdpbusd` takes each row's 8 bytes of both steps broadcast to every
//! 64-bit lane; a lone row instead permutes its activations to the two
//! halves (i32 lanes 0..8 step `h = 0`, 8..16 `h = 1`). Either way a row's
//! step sums are added at the block's end (exact integers), then the AVX2
//! tile's f32 operations. Q8_0 weights enter as `w + 128` (unsigned), so
//! their offset is `-128 d` times the activation sum; MXFP4's codes are
//! looked up in its table (`vpshufb`).

use std::arch::x86_64::*;

use super::avx2::{accumulate, finish, prefetch, scales};
use super::layout::{Blocks, CHUNK};
use crate::activation::ActBlock;
use crate::packed::format::{PackedFormat, GROUP_ROWS};
use crate::quant::{BlockFormat, Offset, Quants};

/// Lanes 0..8 `low`, 8..16 `high`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
#[inline]
fn halves_epi32(low: i32, high: i32) -> __m512i {
    _mm512_mask_blend_epi32(0xff00, _mm512_set1_epi32(low), _mm512_set1_epi32(high))
}

/// The step pairs of a packed block: `(weights, first step, second step)`,
/// unsigned bytes (Q8_0's plus 128), 4 pairs.
///
/// # Safety
/// The CPU has the `Isa::Avx512` features; `p` is a readable packed block
/// of `F`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
#[inline]
unsafe fn step_pairs<F: BlockFormat>(p: *const u8) -> [(__m512i, usize, usize); 4] {
    let q = Blocks::<F>::QUANTS;
    // SAFETY: every load is inside the block's integers or fifth bits.
    unsafe {
        if F::QUANTS == Quants::Bytes {
            let load = |pair: usize| {
                _mm512_xor_si512(_mm512_loadu_si512(p.add(q + 2 * pair * CHUNK).cast()), _mm512_set1_epi8(i8::MIN))
            };
            return [(load(0), 0, 1), (load(1), 2, 3), (load(2), 4, 5), (load(3), 6, 7)];
        }
        let mask = _mm512_set1_epi8(0x0f);
        let (v0, v1) = (_mm512_loadu_si512(p.add(q).cast()), _mm512_loadu_si512(p.add(q + 2 * CHUNK).cast()));
        let low = |v: __m512i| _mm512_and_si512(v, mask);
        let high = |v: __m512i| _mm512_and_si512(_mm512_srli_epi16::<4>(v), mask);
        let mut pairs = [(low(v0), 0, 1), (low(v1), 2, 3), (high(v0), 4, 5), (high(v1), 6, 7)];
        if let Quants::Lookup(table) = F::QUANTS {
            let table = _mm512_broadcast_i32x4(_mm_loadu_si128(table.as_ptr().cast()));
            for (w, _, _) in &mut pairs {
                *w = _mm512_shuffle_epi8(table, *w);
            }
        }
        if Blocks::<F>::HAS_HIGH {
            // Row r's fifth bits in both halves' lane r: rotating the lane
            // left by 4 - s (mod 32) brings bit s of each byte to bit 4.
            let bits = _mm512_broadcast_i64x4(_mm256_loadu_si256(p.add(Blocks::<F>::HIGH).cast()));
            for (w, s0, s1) in &mut pairs {
                let counts = halves_epi32((4 - *s0 as i32).rem_euclid(32), (4 - *s1 as i32).rem_euclid(32));
                // w | (rotated & 0x10): the nibbles' bit 4 is clear.
                *w = _mm512_ternarylogic_epi32::<0xf8>(*w, _mm512_rolv_epi32(bits, counts), _mm512_set1_epi8(0x10));
            }
        }
        pairs
    }
}

/// # Safety
/// The CPU has the `Isa::Avx512` features; `acts` holds `MR * blocks`
/// blocks; `group` is readable for `blocks` packed blocks of `F`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
pub(super) unsafe fn tile<F: BlockFormat, const MR: usize>(
    acts: &[ActBlock],
    blocks: usize,
    group: *const u8,
    out: &mut [[f32; GROUP_ROWS]; MR],
) {
    let centre = match F::OFFSET {
        Offset::Centred(c) => Some(c as f32),
        Offset::Zero => Some(128.0),
        Offset::StoredMin => None,
    };
    let mut acc = [[_mm256_setzero_ps(); 2]; MR];
    // Lane 2r + h of a pair's weights after this permutation is row r of
    // its step h (the packed block holds step 0's rows in lanes 0..8 and
    // step 1's in 8..16), so one 64-bit word of activation bytes (steps s0
    // and s0 + 1 are 8 consecutive bytes) broadcast to every lane meets
    // both: the permutation is once per pair, not once per row.
    let interleave = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
    for b in 0..blocks {
        // SAFETY: block b < blocks of the group (caller's guarantee).
        let p = unsafe { group.add(b * Blocks::<F>::PACKED_BYTES) };
        prefetch::<F>(p);
        // SAFETY: as above.
        let (d, offset) = unsafe { scales::<F>(p, centre) };
        let x: [&ActBlock; MR] = std::array::from_fn(|i| &acts[i * blocks + b]);
        let mut dot = [_mm512_setzero_si512(); MR];
        if MR == 1 {
            // One row: its activations permuted to the two steps' halves
            // cost what permuting the weights would, and the halves add
            // in one instruction fewer.
            // SAFETY: `q` is 32 bytes.
            let xq = _mm512_castsi256_si512(unsafe { _mm256_loadu_si256(x[0].q.as_ptr().cast()) });
            // SAFETY: `p` is a whole packed block.
            for (w, s0, s1) in unsafe { step_pairs::<F>(p) } {
                let index = halves_epi32(s0 as i32, s1 as i32);
                dot[0] = _mm512_dpbusd_epi32(dot[0], w, _mm512_permutexvar_epi32(index, xq));
            }
            let sum = _mm256_add_epi32(_mm512_castsi512_si256(dot[0]), _mm512_extracti64x4_epi64::<1>(dot[0]));
            accumulate(&mut acc[0], sum, d, offset, x[0]);
            continue;
        }
        // SAFETY: `p` is a whole packed block.
        for (w, s0, s1) in unsafe { step_pairs::<F>(p) } {
            debug_assert_eq!(s1, s0 + 1, "a pair's steps are neighbours");
            let w = _mm512_permutexvar_epi32(interleave, w);
            for i in 0..MR {
                // SAFETY: bytes 4 s0 .. 4 s0 + 8 of the block's 32 (s0 <= 6).
                let word = unsafe { x[i].q.as_ptr().add(4 * s0).cast::<i64>().read_unaligned() };
                dot[i] = _mm512_dpbusd_epi32(dot[i], w, _mm512_set1_epi64(word));
            }
        }
        for i in 0..MR {
            // Each row's two steps' sums (lanes 2r, 2r + 1) added, then the
            // 64-bit lanes narrowed: the exact integers of the other levels.
            let pairs = _mm512_add_epi32(dot[i], _mm512_srli_epi64::<32>(dot[i]));
            accumulate(&mut acc[i], _mm512_cvtepi64_epi32(pairs), d, offset, x[i]);
        }
    }
    finish(&acc, out);
}
