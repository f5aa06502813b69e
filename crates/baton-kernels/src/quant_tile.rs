//! Micro-kernels for block-quantized weights against activations quantized
//! to [`ActBlock`]s: an `MR x NR` tile of dot products over whole rows.
//!
//! Per block, the integer dot product `Σ q_w q_x` is exact (AVX2: `maddubs`
//! multiplies unsigned by signed bytes into pairs of i16, `madd` sums pairs
//! into i32); it is scaled by `d_w d_x` into an f32 accumulator, and the
//! weight's offset term (`-8 d_w`, `-16 d_w` or `m_w`) times the activation
//! block's sum is added separately. Q4 and Q5 integers are stored unsigned
//! (Q5's fifth bits are spread to bytes and or-ed onto the nibbles); Q8_0
//! uses the `|w| · sign(x, w)` identity so `maddubs` sees an unsigned
//! operand.

use crate::activation::ActBlock;
use crate::block_tiles::block_kernel;
use crate::quant::{BlockFormat, Offset, Quants, BLOCK_ELEMS};

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

block_kernel!(BlockFormat, ActBlock);

/// # Safety
/// `acts` holds `MR * blocks` blocks; `w` rows `0..NR` (stride `w_stride`
/// bytes) hold `blocks` readable blocks of `F`.
unsafe fn tile_scalar<F: BlockFormat, const MR: usize, const NR: usize>(
    acts: &[ActBlock],
    blocks: usize,
    w: *const u8,
    w_stride: usize,
    out: &mut [[f32; NR]; MR],
) {
    *out = [[0.0; NR]; MR];
    for b in 0..blocks {
        for j in 0..NR {
            // SAFETY: block b of row j is inside `w` (caller's guarantee).
            let block = unsafe { std::slice::from_raw_parts(w.add(j * w_stride + b * F::BYTES), F::BYTES) };
            let d = F::scale(block);
            let offset = F::offset(block, d);
            let mut q = [0i32; BLOCK_ELEMS];
            for (t, q) in q.iter_mut().enumerate() {
                *q = F::quant(block, t);
            }
            for (i, out_row) in out.iter_mut().enumerate() {
                let a = &acts[i * blocks + b];
                let dot: i32 = q.iter().zip(&a.q).map(|(&w, &x)| w * i32::from(x)).sum();
                out_row[j] += dot as f32 * (d * a.d) + offset * a.sum;
            }
        }
    }
}

/// The 32 integers of a block in one register: signed bytes for Q8_0,
/// unsigned bytes 0..=15 (Q4) or 0..=31 (Q5) for the others, in element
/// order.
///
/// # Safety
/// The CPU has AVX2; `block` is readable for `F::BYTES` bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn load_quants<F: BlockFormat>(block: *const u8) -> __m256i {
    // SAFETY: the quants (and high bits) lie inside the block (caller's
    // guarantee).
    unsafe {
        match F::QUANTS {
            Quants::Bytes => _mm256_loadu_si256(block.add(F::QS).cast()),
            Quants::Nibbles => load_nibbles(block.add(F::QS)),
            Quants::NibblesHighBits(qh) => {
                let bits = block.add(qh).cast::<u32>().read_unaligned();
                _mm256_or_si256(load_nibbles(block.add(F::QS)), spread_high_bits(bits))
            }
        }
    }
}

/// 16 bytes of nibbles at `qs` as 32 bytes 0..=15: the low nibbles
/// (elements 0..16), then the high ones (16..32).
///
/// # Safety
/// The CPU has AVX2; `qs` is readable for 16 bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn load_nibbles(qs: *const u8) -> __m256i {
    // SAFETY: 16 readable bytes (caller's guarantee).
    let packed = unsafe { _mm_loadu_si128(qs.cast()) };
    let mask = _mm_set1_epi8(0x0f);
    let low = _mm_and_si128(packed, mask);
    let high = _mm_and_si128(_mm_srli_epi16::<4>(packed), mask);
    _mm256_set_m128i(high, low)
}

/// Byte `j` is `0x10` where bit `j` of `bits` is set, else 0: the fifth bits
/// of a Q5 block, in place to be or-ed onto its nibbles.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn spread_high_bits(bits: u32) -> __m256i {
    // Every 128-bit lane holds the 4 bytes; byte j takes byte j / 8 of them.
    let replicated = _mm256_set1_epi32(bits as i32);
    let byte_of_element = _mm256_set_epi64x(0x0303_0303_0303_0303, 0x0202_0202_0202_0202, 0x0101_0101_0101_0101, 0);
    let spread = _mm256_shuffle_epi8(replicated, byte_of_element);
    // Then keeps bit j % 8 of it.
    let bit_of_element = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    let set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit_of_element), bit_of_element);
    _mm256_and_si256(set, _mm256_set1_epi8(0x10))
}

/// # Safety
/// As [`tile_scalar`], and the CPU has AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn tile_avx2<F: BlockFormat, const MR: usize, const NR: usize>(
    acts: &[ActBlock],
    blocks: usize,
    w: *const u8,
    w_stride: usize,
    out: &mut [[f32; NR]; MR],
) {
    use crate::simd::{f16_bits_to_f32, hsum};
    let ones = _mm256_set1_epi16(1);
    let mut acc = [[_mm256_setzero_ps(); NR]; MR];
    let mut offsets = [[0.0f32; NR]; MR];
    for b in 0..blocks {
        let mut quants = [_mm256_setzero_si256(); NR];
        let mut unsigned = [_mm256_setzero_si256(); NR];
        let mut scales = [0.0f32; NR];
        let mut offs = [0.0f32; NR];
        for j in 0..NR {
            // SAFETY: block b of row j is inside `w` (caller's guarantee).
            let block = unsafe { w.add(j * w_stride + b * F::BYTES) };
            // SAFETY: as above; the scale is the first two bytes.
            let d = f16_bits_to_f32(unsafe { block.cast::<u16>().read_unaligned() });
            scales[j] = d;
            offs[j] = match F::OFFSET {
                Offset::Zero => 0.0,
                Offset::Centred(centre) => -(centre as f32) * d,
                // SAFETY: the minimum is bytes 2..4 of the block.
                Offset::StoredMin => f16_bits_to_f32(unsafe { block.add(2).cast::<u16>().read_unaligned() }),
            };
            // SAFETY: as above.
            quants[j] = unsafe { load_quants::<F>(block) };
            unsigned[j] = if F::QUANTS == Quants::Bytes { _mm256_abs_epi8(quants[j]) } else { quants[j] };
        }
        for i in 0..MR {
            let a = &acts[i * blocks + b];
            // SAFETY: `a.q` is 32 bytes.
            let xq = unsafe { _mm256_loadu_si256(a.q.as_ptr().cast()) };
            for j in 0..NR {
                let signed = if F::QUANTS == Quants::Bytes { _mm256_sign_epi8(xq, quants[j]) } else { xq };
                let pairs = _mm256_maddubs_epi16(unsigned[j], signed);
                let dot = _mm256_madd_epi16(pairs, ones);
                let scale = _mm256_set1_ps(scales[j] * a.d);
                acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, acc[i][j]);
                if F::OFFSET != Offset::Zero {
                    offsets[i][j] += offs[j] * a.sum;
                }
            }
        }
    }
    for i in 0..MR {
        for j in 0..NR {
            out[i][j] = hsum(acc[i][j]) + offsets[i][j];
        }
    }
}
