//! The AVX-512 (VNNI) tile of the packed 32-value formats over two
//! neighbouring groups at once, for several activation rows: a 512-bit
//! register holds one step of 16 weight rows (the first group's 8 in the
//! low half, the second's 8 in the high half), so each row's activations of
//! a step are 4 bytes broadcast to every lane and each lane's `vpdpbusd`
//! sums one weight row's whole block. No pair of steps shares a lane, so
//! nothing is added across lanes or narrowed at a block's end, and the f32
//! operations of a block (`fma(dot, d_w d_x, acc)`, `fma(offset, sum_x,
//! off)`) are one instruction each for 16 weight rows instead of two for 8.
//! That work, beside the `vpdpbusd`s on their one port, was a quarter of
//! the one-group tile's time at 8 rows.
//!
//! Each lane's integer sum is exact and its f32 operations are those of
//! `avx512::tile` in the same order, so the bits are that tile's (Q8_0's
//! weights enter as `w + 128` with the offset `-128 d` there too; MXFP4's
//! codes are looked up in its table there too).

use std::arch::x86_64::*;

use super::avx2::prefetch;
use super::layout::{Blocks, CHUNK, STEP};
use crate::activation::ActBlock;
use crate::packed::format::{PackedFormat, GROUP_ROWS};
use crate::quant::{BlockFormat, Offset, Quants, Scale};
use crate::simd::e8m0_half_ps;

/// The 32 bytes at `at` of both groups' blocks: the first's in the low
/// half, the second's in the high half.
///
/// # Safety
/// AVX-512 F; 32 bytes are readable at `p[0] + at` and `p[1] + at`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
#[inline]
unsafe fn both(p: [*const u8; 2], at: usize) -> __m512i {
    // SAFETY: the caller's guarantee.
    unsafe {
        let low = _mm256_loadu_si256(p[0].add(at).cast());
        _mm512_inserti64x4::<1>(_mm512_castsi256_si512(low), _mm256_loadu_si256(p[1].add(at).cast()))
    }
}

/// The 8 rows' scales of both blocks (f16, or MXFP4's E8M0 bytes): 16
/// lanes.
///
/// # Safety
/// AVX-512 F; `p` are readable packed blocks of `F`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
#[inline]
unsafe fn scales<F: BlockFormat>(p: [*const u8; 2]) -> __m512 {
    match F::SCALE {
        // SAFETY: the 16 bytes of f16 scales lie inside each block.
        Scale::F16 => unsafe { halves(p, 0) },
        Scale::E8M0 => {
            // SAFETY: the 8 bytes of E8M0 scales lie inside each block.
            let [low, high] = p.map(|p| e8m0_half_ps(_mm256_cvtepu8_epi32(unsafe { _mm_loadl_epi64(p.cast()) })));
            _mm512_insertf32x8::<1>(_mm512_castps256_ps512(low), high)
        }
    }
}

/// The 8 f16 values at byte `at` of both blocks, widened: 16 lanes.
///
/// # Safety
/// AVX-512 F; 16 bytes are readable at `p[0] + at` and `p[1] + at`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
#[inline]
unsafe fn halves(p: [*const u8; 2], at: usize) -> __m512 {
    // SAFETY: the caller's guarantee.
    unsafe {
        let low = _mm_loadu_si128(p[0].add(at).cast());
        _mm512_cvtph_ps(_mm256_inserti128_si256::<1>(_mm256_castsi128_si256(low), _mm_loadu_si128(p[1].add(at).cast())))
    }
}

/// Moves the fifth bits of step `s` to bit 4 of each byte (bit `s` of each
/// byte of the fifth-bits chunk; see the layout), other bits cleared.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
#[inline]
fn fifth_bits(high: __m512i, s: usize) -> __m512i {
    // A 16-bit shift by at most 4 places: bit 4 of every byte comes from
    // the same byte, and the mask drops what crossed over (the steps are
    // constants once the loop over them is unrolled).
    let moved = if s <= 4 {
        _mm512_sll_epi16(high, _mm_cvtsi32_si128(4 - s as i32))
    } else {
        _mm512_srl_epi16(high, _mm_cvtsi32_si128(s as i32 - 4))
    };
    _mm512_and_si512(moved, _mm512_set1_epi8(0x10))
}

/// The steps of a block of both groups: `(step, weights)` as unsigned bytes
/// (Q8_0's plus 128), 16 rows of 4 bytes each, 8 steps.
///
/// # Safety
/// The CPU has the `Isa::Avx512` features; `p` are readable packed blocks
/// of `F`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
#[inline]
unsafe fn steps<F: BlockFormat>(p: [*const u8; 2]) -> [(usize, __m512i); 8] {
    let q = Blocks::<F>::QUANTS;
    // SAFETY: every load is inside the blocks' integers or fifth bits.
    unsafe {
        if F::QUANTS == Quants::Bytes {
            let flip = _mm512_set1_epi8(i8::MIN);
            return std::array::from_fn(|s| (s, _mm512_xor_si512(both(p, q + s * CHUNK), flip)));
        }
        let mask = _mm512_set1_epi8(0x0f);
        let chunks: [__m512i; 4] = std::array::from_fn(|c| both(p, q + c * CHUNK));
        // Chunk c holds step c in its low nibbles and step c + 4 in its high.
        let mut steps: [(usize, __m512i); 8] = std::array::from_fn(|s| {
            let v = chunks[s % 4];
            (s, if s < 4 { _mm512_and_si512(v, mask) } else { _mm512_and_si512(_mm512_srli_epi16::<4>(v), mask) })
        });
        if Blocks::<F>::HAS_HIGH {
            let bits = both(p, Blocks::<F>::HIGH);
            for (s, w) in &mut steps {
                *w = _mm512_or_si512(*w, fifth_bits(bits, *s));
            }
        }
        if let Quants::Lookup(table) = F::QUANTS {
            let table = _mm512_broadcast_i32x4(_mm_loadu_si128(table.as_ptr().cast()));
            for (_, w) in &mut steps {
                *w = _mm512_shuffle_epi8(table, *w);
            }
        }
        steps
    }
}

/// `out[i][r] = x[i] · W[r]` for the 16 weight rows of the groups at
/// `groups` (the first's 8, then the second's) and `MR` activation rows.
///
/// # Safety
/// The CPU has the `Isa::Avx512` features; `acts` holds `MR * blocks`
/// blocks; each of `groups` is readable for `blocks` packed blocks of `F`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
pub(super) unsafe fn tile_pair<F: BlockFormat, const MR: usize>(
    acts: &[ActBlock],
    blocks: usize,
    groups: [*const u8; 2],
    out: &mut [[f32; 2 * GROUP_ROWS]; MR],
) {
    let centre = match F::OFFSET {
        Offset::Centred(c) => Some(c as f32),
        Offset::Zero => Some(128.0),
        Offset::StoredMin => None,
    };
    let mut acc = [[_mm512_setzero_ps(); 2]; MR];
    for b in 0..blocks {
        // SAFETY: block b < blocks of each group (caller's guarantee).
        let p = groups.map(|g| unsafe { g.add(b * Blocks::<F>::PACKED_BYTES) });
        prefetch::<F>(p[0]);
        prefetch::<F>(p[1]);
        // SAFETY: whole packed blocks.
        let d = unsafe { scales::<F>(p) };
        let offset = match centre {
            // SAFETY: the minimums are 16 bytes inside each block.
            None => unsafe { halves(p, Blocks::<F>::MINS) },
            Some(c) => _mm512_mul_ps(d, _mm512_set1_ps(-c)),
        };
        let x: [&ActBlock; MR] = std::array::from_fn(|i| &acts[i * blocks + b]);
        let mut dot = [_mm512_setzero_si512(); MR];
        // SAFETY: `p` are whole packed blocks.
        for (s, w) in unsafe { steps::<F>(p) } {
            for i in 0..MR {
                // SAFETY: bytes 4 s .. 4 s + 4 of the block's 32 (s < 8).
                let word = unsafe { x[i].q.as_ptr().add(STEP * s).cast::<i32>().read_unaligned() };
                dot[i] = _mm512_dpbusd_epi32(dot[i], w, _mm512_set1_epi32(word));
            }
        }
        for i in 0..MR {
            let scale = _mm512_mul_ps(d, _mm512_set1_ps(x[i].d));
            acc[i][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[i]), scale, acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(offset, _mm512_set1_ps(x[i].sum), acc[i][1]);
        }
    }
    for (out, acc) in out.iter_mut().zip(&acc) {
        // SAFETY: `out` is 16 f32s.
        unsafe { _mm512_storeu_ps(out.as_mut_ptr(), _mm512_add_ps(acc[0], acc[1])) };
    }
}
