//! The 2- and 3-bit K-quants, Q2_K and Q3_K: 16 sub-blocks of 16 values
//! (one scale group each), in the common form of [`KFormat`].
//!
//! Both store their low 2 bits alike: each half of 128 values `h` uses
//! `qs[32h..32h+32]`, and element `32r + l` of the half is bits `2r..2r+2`
//! of `qs[32h + l]` (chunk `c` is half `c / 4`, shift `2 (c % 4)`).
//!
//! Byte layouts (offsets in a super-block):
//! - Q2_K (84): 16 bytes @0, one per sub-block, the 4-bit scale in the low
//!   nibble and the 4-bit minimum in the high one; `qs` @16; `d` f16 @80,
//!   `dmin` f16 @82. A value is `(d * sc) * q - dmin * m`.
//! - Q3_K (110): 32 bytes of high bits @0 (bit `c` of byte `l` is the third
//!   bit of element `l` of chunk `c`); `qs` @32; 12 bytes of 6-bit scales
//!   @96; `d` f16 @108. A value is `(d * (sc - 32)) * (q - 4)` with `q` the
//!   3-bit integer (GGML subtracts 4 when the high bit is clear, the same).
//!   Scale `s` has its low 4 bits in byte `s % 8` (the low nibble for
//!   `s < 8`, the high one above) and its top 2 bits at bits `2 (s / 4)` of
//!   byte `8 + s % 4`.

use baton_core::DType;

use super::kfit;
#[cfg(target_arch = "x86_64")]
use super::kquant::{avx2, SimdScales};
use super::kquant::{f16_at, KFormat, KOffset, SuperScales};
use super::super_block::{GROUPS, SUPER_ELEMS};

/// Q2_K: 16 sub-blocks of 16, 2-bit values, 4-bit scales and mins.
pub(crate) struct Q2K;
/// Q3_K: 16 sub-blocks of 16, 3-bit values centred on 4, signed 6-bit scales.
pub(crate) struct Q3K;

/// Byte offset of the 2-bit low parts in a Q2_K super-block.
const Q2K_QS: usize = 16;
/// Byte offset of the 2-bit low parts in a Q3_K super-block.
const Q3K_QS: usize = 32;
/// Byte offset of the packed scales in a Q3_K super-block.
const Q3K_SCALES: usize = 96;

/// The 2-bit integers of chunk `c` with `qs` at byte `at`.
fn two_bit_chunk(block: &[u8], at: usize, c: usize) -> [u8; 32] {
    let bytes = &block[at + 32 * (c / 4)..][..32];
    std::array::from_fn(|l| (bytes[l] >> (2 * (c % 4))) & 3)
}

/// Q3_K's sixteen 6-bit scales, still biased by 32, as two little-endian
/// words of 8 bytes (scales 0..8, then 8..16). Whole-word masks do every
/// byte at once.
fn unpack_q3k_scale_words(packed: &[u8]) -> (u64, u64) {
    let low = u64::from_le_bytes(std::array::from_fn(|i| packed[i]));
    let high = u64::from(u32::from_le_bytes([packed[8], packed[9], packed[10], packed[11]]));
    // The top 2 bits of scales 4k..4k+4 are bits 2k..2k+2 of bytes 8..12.
    let tops = |k: u32| (high >> (2 * k)) & 0x0303_0303;
    let first = (low & 0x0f0f_0f0f_0f0f_0f0f) | ((tops(0) | (tops(1) << 32)) << 4);
    let second = ((low >> 4) & 0x0f0f_0f0f_0f0f_0f0f) | ((tops(2) | (tops(3) << 32)) << 4);
    (first, second)
}

/// [`unpack_q3k_scale_words`] as the signed scales (`sc - 32`).
pub(crate) fn unpack_q3k_scales(packed: &[u8]) -> [i8; GROUPS] {
    let (first, second) = unpack_q3k_scale_words(packed);
    let bytes = [first.to_le_bytes(), second.to_le_bytes()];
    std::array::from_fn(|s| bytes[s / 8][s % 8] as i8 - 32)
}

impl KFormat for Q2K {
    const DTYPE: DType = DType::Q2_K;
    const OFFSET: KOffset = KOffset::StoredMin;

    fn scales(block: &[u8]) -> SuperScales {
        SuperScales {
            d: f16_at(block, 80),
            dmin: f16_at(block, 82),
            scales: std::array::from_fn(|g| i16::from(block[g] & 0x0f)),
            mins: std::array::from_fn(|g| i16::from(block[g] >> 4)),
        }
    }

    fn chunk(block: &[u8], c: usize) -> [u8; 32] {
        two_bit_chunk(block, Q2K_QS, c)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn chunk_avx2(block: *const u8, c: usize) -> std::arch::x86_64::__m256i {
        // SAFETY: `qs` is bytes 16..80 of the block and `c < 8`.
        unsafe { avx2::bits(block.add(Q2K_QS + 32 * (c / 4)), 2 * (c % 4), 3) }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn scales_avx2(block: *const u8) -> SimdScales {
        use std::arch::x86_64::*;
        // SAFETY: the scale bytes are 0..16, d and dmin bytes 80..84.
        unsafe {
            let packed = _mm_loadu_si128(block.cast());
            let nibble = _mm_set1_epi8(0x0f);
            SimdScales {
                d: avx2::f16_at(block.add(80)),
                dmin: avx2::f16_at(block.add(82)),
                scales: _mm256_cvtepu8_epi16(_mm_and_si128(packed, nibble)),
                mins: _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16::<4>(packed), nibble)),
            }
        }
    }

    fn quantize_block(src: &[f32; SUPER_ELEMS], dst: &mut [u8]) {
        kfit::encode_q2k(src, dst);
    }
}

impl KFormat for Q3K {
    const DTYPE: DType = DType::Q3_K;
    const OFFSET: KOffset = KOffset::Centred(4);

    fn scales(block: &[u8]) -> SuperScales {
        let scales = unpack_q3k_scales(&block[Q3K_SCALES..Q3K_SCALES + 12]).map(i16::from);
        let d = f16_at(block, 108);
        SuperScales { d, dmin: d, scales, mins: scales.map(|s| 4 * s) }
    }

    fn chunk(block: &[u8], c: usize) -> [u8; 32] {
        let low = two_bit_chunk(block, Q3K_QS, c);
        std::array::from_fn(|l| low[l] | (((block[l] >> c) & 1) << 2))
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn chunk_avx2(block: *const u8, c: usize) -> std::arch::x86_64::__m256i {
        use std::arch::x86_64::*;
        // SAFETY: the high bits are bytes 0..32 and `qs` bytes 32..96 of the
        // block; `c < 8`.
        unsafe {
            let low = avx2::bits(block.add(Q3K_QS + 32 * (c / 4)), 2 * (c % 4), 3);
            _mm256_or_si256(low, avx2::bit_moved(block, c, 2))
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn scales_avx2(block: *const u8) -> SimdScales {
        use std::arch::x86_64::*;
        // SAFETY: the packed scales are bytes 96..108, d bytes 108..110.
        unsafe {
            let packed = std::slice::from_raw_parts(block.add(Q3K_SCALES), 12);
            let (first, second) = unpack_q3k_scale_words(packed);
            let biased = _mm_set_epi64x(second as i64, first as i64);
            let scales = _mm256_cvtepi8_epi16(_mm_sub_epi8(biased, _mm_set1_epi8(32)));
            let d = avx2::f16_at(block.add(108));
            SimdScales { d, dmin: d, scales, mins: _mm256_slli_epi16::<2>(scales) }
        }
    }

    fn quantize_block(src: &[f32; SUPER_ELEMS], dst: &mut [u8]) {
        kfit::encode_q3k(src, dst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    fn put_f16(block: &mut [u8], at: usize, v: f32) {
        block[at..at + 2].copy_from_slice(&f16::from_f32(v).to_bits().to_le_bytes());
    }

    #[test]
    fn q2_k_element_order_matches_ggml() {
        // Element 128 + 64 + 9: half 1, shift 4 (r = 2) of qs[32 + 9]; group 12.
        let mut block = [0u8; 84];
        block[16 + 32 + 9] = 0b0011_0000;
        block[12] = 0x52; // scale 2, min 5
        put_f16(&mut block, 80, 0.5);
        put_f16(&mut block, 82, 0.25);
        let mut out = [0.0; 256];
        Q2K::dequantize_block(&block, &mut out);
        assert_eq!(out[128 + 64 + 9], 0.5 * 2.0 * 3.0 - 0.25 * 5.0);
        assert_eq!(out[128 + 64 + 10], -0.25 * 5.0, "q 0 leaves the minimum");
        assert_eq!(out[9], 0.0, "group 0 has scale 0 and min 0");
    }

    #[test]
    fn q3_k_high_bit_of_chunk_c_is_bit_c_and_clear_means_minus_4() {
        let mut block = [0u8; 110];
        // Every scale 33 (signed 1): low nibbles 1, top bits 2 -> 0b10 each.
        block[96..104].fill(0x11);
        block[104..108].fill(0b1010_1010);
        put_f16(&mut block, 108, 1.0);
        block[6] = 1 << 5; // element 6 of chunk 5 has its high bit
        block[32 + 32 + 6] = 0b0000_1100; // chunk 5 = half 1, r 1: low bits 3
        let mut out = [0.0; 256];
        Q3K::dequantize_block(&block, &mut out);
        assert_eq!(out[5 * 32 + 6], 3.0, "(4 + 3) - 4");
        assert_eq!(out[5 * 32 + 7], -4.0, "no bits: 0 - 4");
        assert_eq!(out[4 * 32 + 6], -4.0, "chunk 4 reads bit 4");
    }

    #[test]
    fn q3_k_scales_unpack_every_6_bit_value_in_place() {
        for base in 0..64usize {
            let biased: [u8; 16] = std::array::from_fn(|s| ((base + 5 * s) % 64) as u8);
            let mut packed = [0u8; 12];
            kfit::pack_q3k_scales(&biased.map(|b| b as i8 - 32), &mut packed);
            // The layout from the format's description, bit by bit.
            for (s, &b) in biased.iter().enumerate() {
                let low = (packed[s % 8] >> (4 * (s / 8))) & 0x0f;
                let top = (packed[8 + s % 4] >> (2 * (s / 4))) & 3;
                assert_eq!(low | (top << 4), b, "scale {s}");
            }
            assert_eq!(unpack_q3k_scales(&packed), biased.map(|b| b as i8 - 32));
        }
    }
}
