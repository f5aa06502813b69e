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
//! operand. MXFP4's 4-bit codes become its unsigned integers (`kv + 12`)
//! through a byte shuffle of its 16-entry table (`vpshufb`).
//!
//! AVX-512 (VNNI) takes two blocks per 512-bit register and sums with
//! `vpdpbusd` (unsigned by signed bytes, four products per i32 lane, exact).
//! AVX-512 has no byte `sign`, so Q8_0 weights enter as `w + 128` (always
//! unsigned) and each lane starts from `-128 Σ x`, which gives `Σ w x`
//! exactly, `w = -128` included.

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
/// unsigned bytes 0..=15 (Q4), 0..=31 (Q5) or 0..=24 (MXFP4's table) for
/// the others, in element order.
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
            Quants::Lookup(table) => {
                // SAFETY: the table is 16 bytes.
                let table = _mm256_broadcastsi128_si256(_mm_loadu_si128(table.as_ptr().cast()));
                _mm256_shuffle_epi8(table, load_nibbles(block.add(F::QS)))
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
    use crate::simd::hsum;
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
            // SAFETY: as above, a whole block.
            (scales[j], offs[j]) = unsafe { scale_and_offset::<F>(block) };
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

/// 16 bytes of nibbles at `q0` and at `q1` as 64 bytes 0..=15: the 32
/// values of the first block in element order (as [`load_nibbles`]), then
/// those of the second.
///
/// # Safety
/// The CPU has the `Isa::Avx512` features; `q0` and `q1` are readable for
/// 16 bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
#[inline]
unsafe fn load_nibble_pair(q0: *const u8, q1: *const u8) -> __m512i {
    // SAFETY: 16 readable bytes at each (caller's guarantee).
    let (first, second) = unsafe { (_mm_loadu_si128(q0.cast()), _mm_loadu_si128(q1.cast())) };
    // 128-bit lanes: the first block's bytes twice, then the second's twice.
    let packed = crate::simd::join256(_mm256_broadcastsi128_si256(first), _mm256_broadcastsi128_si256(second));
    // Lanes 1 and 3 (16-bit elements 8..16 and 24..32) take the high nibbles.
    let shifted = _mm512_mask_srli_epi16::<4>(packed, 0xff00_ff00, packed);
    _mm512_and_si512(shifted, _mm512_set1_epi8(0x0f))
}

/// The integers of the blocks at `b0` and `b1` in one register (32 bytes
/// each, in element order): unsigned 0..=15 (Q4), 0..=31 (Q5) or 0..=24
/// (MXFP4's table), and for
/// Q8_0 the signed bytes plus 128, so that `vpdpbusd` can take them as its
/// unsigned operand (the caller subtracts `128 Σ x`).
///
/// # Safety
/// The CPU has the `Isa::Avx512` features; `b0` and `b1` are readable for
/// `F::BYTES` bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
#[inline]
unsafe fn load_quant_pair<F: BlockFormat>(b0: *const u8, b1: *const u8) -> __m512i {
    // SAFETY: the quants (and high bits) lie inside each block (caller's
    // guarantee).
    unsafe {
        match F::QUANTS {
            Quants::Bytes => {
                let pair = crate::simd::join256(
                    _mm256_loadu_si256(b0.add(F::QS).cast()),
                    _mm256_loadu_si256(b1.add(F::QS).cast()),
                );
                _mm512_xor_si512(pair, _mm512_set1_epi8(i8::MIN))
            }
            Quants::Nibbles => load_nibble_pair(b0.add(F::QS), b1.add(F::QS)),
            Quants::NibblesHighBits(qh) => {
                let low = u64::from(b0.add(qh).cast::<u32>().read_unaligned());
                let high = u64::from(b1.add(qh).cast::<u32>().read_unaligned());
                let fifth_bits = _mm512_maskz_set1_epi8(low | (high << 32), 0x10);
                _mm512_or_si512(load_nibble_pair(b0.add(F::QS), b1.add(F::QS)), fifth_bits)
            }
            Quants::Lookup(table) => {
                // SAFETY: the table is 16 bytes.
                let table = _mm512_broadcast_i32x4(_mm_loadu_si128(table.as_ptr().cast()));
                _mm512_shuffle_epi8(table, load_nibble_pair(b0.add(F::QS), b1.add(F::QS)))
            }
        }
    }
}

/// The scale at the start of a block (f16, or MXFP4's E8M0 byte), and the
/// offset (`-c d` or the stored minimum) it adds to every value.
///
/// # Safety
/// The CPU has F16C; `block` is readable for `F::BYTES` bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn scale_and_offset<F: BlockFormat>(block: *const u8) -> (f32, f32) {
    use crate::quant::{e8m0_half, Scale};
    use crate::simd::f16_bits_to_f32;
    // SAFETY: the scale is the first one or two bytes (caller's guarantee).
    let d = unsafe {
        match F::SCALE {
            Scale::F16 => f16_bits_to_f32(block.cast::<u16>().read_unaligned()),
            Scale::E8M0 => e8m0_half(block.read()),
        }
    };
    let offset = match F::OFFSET {
        Offset::Zero => 0.0,
        Offset::Centred(centre) => -(centre as f32) * d,
        // SAFETY: the minimum is bytes 2..4 of the block.
        Offset::StoredMin => f16_bits_to_f32(unsafe { block.add(2).cast::<u16>().read_unaligned() }),
    };
    (d, offset)
}

/// Two blocks per step in 512-bit registers: `vpdpbusd` multiplies the
/// unsigned weight bytes by the signed activation bytes and sums each four
/// into i32 lanes (exact, no i16 stage); lanes 0..8 belong to block `b`,
/// 8..16 to block `b + 1`, each scaled by its own `d_w d_x`. An odd last
/// block pairs with itself, its second copy scaled by 0.
///
/// # Safety
/// As [`tile_scalar`], and the CPU has the `Isa::Avx512` features.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
unsafe fn tile_avx512<F: BlockFormat, const MR: usize, const NR: usize>(
    acts: &[ActBlock],
    blocks: usize,
    w: *const u8,
    w_stride: usize,
    out: &mut [[f32; NR]; MR],
) {
    use crate::simd::{halves_ps, join256};
    let signed = F::QUANTS == Quants::Bytes;
    let mut acc = [[_mm512_setzero_ps(); NR]; MR];
    let mut offsets = [[0.0f32; NR]; MR];
    let mut b = 0;
    while b < blocks {
        let has_second = b + 1 < blocks;
        let b1 = if has_second { b + 1 } else { b };
        let mut quants = [_mm512_setzero_si512(); NR];
        let mut scales = [_mm512_setzero_ps(); NR];
        let mut offs = [[0.0f32; 2]; NR];
        for j in 0..NR {
            // SAFETY: blocks b and b1 < blocks of row j are inside `w`
            // (caller's guarantee).
            let (p0, p1) = unsafe { (w.add(j * w_stride + b * F::BYTES), w.add(j * w_stride + b1 * F::BYTES)) };
            // SAFETY: as above, whole blocks.
            let ((d0, o0), (d1, o1)) = unsafe { (scale_and_offset::<F>(p0), scale_and_offset::<F>(p1)) };
            scales[j] = halves_ps(d0, d1);
            offs[j] = [o0, o1];
            // SAFETY: as above.
            quants[j] = unsafe { load_quant_pair::<F>(p0, p1) };
        }
        for i in 0..MR {
            let (a0, a1) = (&acts[i * blocks + b], &acts[i * blocks + b1]);
            // SAFETY: each `q` is 32 bytes.
            let x =
                unsafe { join256(_mm256_loadu_si256(a0.q.as_ptr().cast()), _mm256_loadu_si256(a1.q.as_ptr().cast())) };
            let x_scales = halves_ps(a0.d, if has_second { a1.d } else { 0.0 });
            // Q8_0's weights come as `w + 128`: start each lane at `-128 Σ x`.
            let start = if signed {
                _mm512_sub_epi32(
                    _mm512_setzero_si512(),
                    _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(i8::MIN), x),
                )
            } else {
                _mm512_setzero_si512()
            };
            for j in 0..NR {
                let dot = _mm512_dpbusd_epi32(start, quants[j], x);
                acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(scales[j], x_scales), acc[i][j]);
                if F::OFFSET != Offset::Zero {
                    offsets[i][j] += offs[j][0] * a0.sum;
                    if has_second {
                        offsets[i][j] += offs[j][1] * a1.sum;
                    }
                }
            }
        }
        b += 2;
    }
    for i in 0..MR {
        for j in 0..NR {
            out[i][j] = _mm512_reduce_add_ps(acc[i][j]) + offsets[i][j];
        }
    }
}
