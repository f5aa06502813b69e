//! GGML's K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K) exactly as GGUF
//! stores them.
//!
//! A K-quant row is super-blocks of 256 values. Each format is described to
//! the kernels in one common form, so decoding and the integer dot products
//! are written once ([`KFormat`]):
//!
//! - the 256 integers, fetched 32 at a time ("chunks", element order), as
//!   unsigned bytes (signed for Q8_K);
//! - per group of 16 values, an integer scale and an integer offset, so that
//!   a value is `d * scale[g] * q - dmin * min[g]` ([`SuperScales`]).
//!
//! Q4_K and Q5_K sub-blocks of 32 span two groups with equal scales; Q6_K's
//! `q - 32` (Q3_K's `q - 4`) becomes `min[g] = 32 * scale[g]` (`4 * scale[g]`)
//! with `dmin = d`. Decoding to f32
//! follows each format's own arithmetic ([`KOffset`]), so the values are
//! bit-identical to GGML's (and the PyPI `gguf` package's) dequantization.
//!
//! Byte layouts (offsets in a super-block):
//! - Q4_K (144): `d` f16 @0, `dmin` f16 @2, 12 bytes of 6-bit scales and
//!   mins @4, 128 bytes of nibbles @16 (bytes `32p..32p+32` hold sub-block
//!   `2p` in the low nibbles and `2p+1` in the high ones).
//! - Q5_K (176): as Q4_K, with 32 bytes of high bits @16 (bit `s` of byte
//!   `l` is the fifth bit of element `l` of sub-block `s`) and the nibbles @48.
//! - Q6_K (210): 128 bytes of low nibbles @0, 64 bytes of 2-bit highs @128,
//!   16 `i8` scales @192, `d` f16 @208. Each half of 128 values `n` uses
//!   `ql[64n..64n+64]` and `qh[32n..32n+32]`: element `32r + l` of the half
//!   is nibble `r / 2` of `ql[64n + 32 (r % 2) + l]` with bits `2r..2r+2` of
//!   `qh[32n + l]` on top.
//! - Q8_K (292): `d` f32 @0, 256 `i8` @4, 16 `i16` sums of 16 values @260.
//! - Q2_K (84) and Q3_K (110): see `kquant_low_bits`, which builds on the
//!   common form here.

use baton_core::DType;
use half::f16;

use super::kfit;
pub use super::super_block::SUPER_ELEMS;
pub(crate) use super::super_block::{CHUNKS, GROUPS, GROUP_ELEMS};

/// How a format turns `(d * scale) * q` into a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KOffset {
    /// `(d * sc) * q - dmin * m`: a stored, per-sub-block minimum (Q4_K, Q5_K).
    StoredMin,
    /// `(d * sc) * (q - c)`: unsigned integers centred on `c` (32 for Q6_K's
    /// 6 bits, 4 for Q3_K's 3); the kernels' `min[g]` is `c * scale[g]` and
    /// `dmin` is `d`.
    Centred(i16),
    /// `d * q` with signed integers and unit scales (Q8_K).
    Zero,
}

/// The scales of one super-block in the kernels' common form: a value is
/// `d * scales[g] * q - dmin * mins[g]` for element `q` of group `g`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SuperScales {
    /// The super-block scale.
    pub d: f32,
    /// What multiplies `mins` (0 when there are none).
    pub dmin: f32,
    /// The integer scale of each group of 16.
    pub scales: [i16; GROUPS],
    /// The integer offset of each group of 16.
    pub mins: [i16; GROUPS],
}

/// [`SuperScales`] with the integers in registers (16 i16 lanes each).
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(crate) struct SimdScales {
    pub d: f32,
    pub dmin: f32,
    pub scales: std::arch::x86_64::__m256i,
    pub mins: std::arch::x86_64::__m256i,
}

/// The byte layout of one K-quant super-block.
pub(crate) trait KFormat {
    /// The type this layout encodes.
    const DTYPE: DType;
    /// Bytes per super-block.
    const BYTES: usize = Self::DTYPE.block_bytes();
    /// How values are formed from the integers.
    const OFFSET: KOffset;

    /// The scales, in the common form.
    fn scales(block: &[u8]) -> SuperScales;

    /// The 32 integers of chunk `c` (elements `32c..32c+32`): unsigned
    /// bytes, or `i8` bits when [`KFormat::OFFSET`] is [`KOffset::Zero`].
    fn chunk(block: &[u8], c: usize) -> [u8; 32];

    /// [`KFormat::chunk`] in a register.
    ///
    /// # Safety
    /// The CPU has AVX2; `block` is readable for [`KFormat::BYTES`] bytes;
    /// `c < CHUNKS`.
    #[cfg(target_arch = "x86_64")]
    unsafe fn chunk_avx2(block: *const u8, c: usize) -> std::arch::x86_64::__m256i;

    /// [`KFormat::scales`] in registers: `d`, `dmin`, and the 16 group
    /// scales and 16 group offsets as i16 lanes.
    ///
    /// # Safety
    /// The CPU has AVX2; `block` is readable for [`KFormat::BYTES`] bytes.
    #[cfg(target_arch = "x86_64")]
    unsafe fn scales_avx2(block: *const u8) -> SimdScales;

    /// Chunks `2p` and `2p + 1` in one AVX-512 register (bits 0..256 and
    /// 256..512), as [`KFormat::chunk_avx2`] gives them. A format whose two
    /// chunks share their bytes overrides it with one load.
    ///
    /// # Safety
    /// The CPU has the `Isa::Avx512` features; `block` is readable for
    /// [`KFormat::BYTES`] bytes; `p < CHUNKS / 2`.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
    #[inline]
    unsafe fn chunk_pair_avx512(block: *const u8, p: usize) -> std::arch::x86_64::__m512i {
        // SAFETY: the caller's guarantees, `2p + 1 < CHUNKS`.
        unsafe { crate::simd::join256(Self::chunk_avx2(block, 2 * p), Self::chunk_avx2(block, 2 * p + 1)) }
    }

    /// Encodes 256 values (the reference quantizer, see `kfit`).
    fn quantize_block(src: &[f32; SUPER_ELEMS], dst: &mut [u8]);

    /// Decodes one super-block, with the same f32 operations as GGML.
    fn dequantize_block(block: &[u8], dst: &mut [f32; SUPER_ELEMS]) {
        let s = Self::scales(block);
        for (c, out) in dst.chunks_exact_mut(32).enumerate() {
            let q = Self::chunk(block, c);
            for (l, out) in out.iter_mut().enumerate() {
                let g = (32 * c + l) / GROUP_ELEMS;
                let scale = s.d * f32::from(s.scales[g]);
                *out = match Self::OFFSET {
                    KOffset::StoredMin => scale * f32::from(q[l]) - s.dmin * f32::from(s.mins[g]),
                    KOffset::Centred(centre) => scale * f32::from(i16::from(q[l]) - centre),
                    KOffset::Zero => scale * f32::from(q[l] as i8),
                };
            }
        }
    }
}

/// Q4_K: 8 sub-blocks of 32, 4-bit values, 6-bit scales and mins.
pub(crate) struct Q4K;
/// Q5_K: Q4_K with a fifth bit per value.
pub(crate) struct Q5K;
/// Q6_K: 16 sub-blocks of 16, 6-bit values, signed 8-bit scales.
pub(crate) struct Q6K;
/// Q8_K: signed bytes and one f32 scale (GGML's activation format).
pub(crate) struct Q8K;

pub(crate) fn f16_at(block: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([block[at], block[at + 1]])).to_f32()
}

/// The eight 6-bit scales and mins packed in 12 bytes (Q4_K, Q5_K), as two
/// little-endian words of 8 bytes: bytes 0..4 hold scales 0..4 in their low
/// 6 bits and the top 2 bits of scales 4..8 above; bytes 4..8 the same for
/// the mins; bytes 8..12 the low 4 bits of scales 4..8 (low nibble) and mins
/// 4..8 (high nibble). Whole-word masks do every byte at once.
pub(crate) fn unpack_scales_mins_words(packed: &[u8]) -> (u64, u64) {
    let word = |i: usize| u32::from_le_bytes([packed[4 * i], packed[4 * i + 1], packed[4 * i + 2], packed[4 * i + 3]]);
    let (w0, w1, w2) = (word(0), word(1), word(2));
    let scales_low = w0 & 0x3f3f_3f3f;
    let scales_high = (w2 & 0x0f0f_0f0f) | (((w0 >> 6) & 0x0303_0303) << 4);
    let mins_low = w1 & 0x3f3f_3f3f;
    let mins_high = ((w2 >> 4) & 0x0f0f_0f0f) | (((w1 >> 6) & 0x0303_0303) << 4);
    (u64::from(scales_low) | (u64::from(scales_high) << 32), u64::from(mins_low) | (u64::from(mins_high) << 32))
}

/// [`unpack_scales_mins_words`] as byte arrays.
pub(crate) fn unpack_scales_mins(packed: &[u8]) -> ([u8; 8], [u8; 8]) {
    let (scales, mins) = unpack_scales_mins_words(packed);
    (scales.to_le_bytes(), mins.to_le_bytes())
}

/// Scales of Q4_K and Q5_K, whose headers are identical.
fn q4k_like_scales(block: &[u8]) -> SuperScales {
    let (sc, m) = unpack_scales_mins(&block[4..16]);
    SuperScales {
        d: f16_at(block, 0),
        dmin: f16_at(block, 2),
        scales: std::array::from_fn(|g| i16::from(sc[g / 2])),
        mins: std::array::from_fn(|g| i16::from(m[g / 2])),
    }
}

/// The nibbles of chunk `c` of Q4_K-style packing (`qs` at byte `at`).
fn nibble_chunk(block: &[u8], at: usize, c: usize) -> [u8; 32] {
    let bytes = &block[at + 32 * (c / 2)..][..32];
    std::array::from_fn(|l| (bytes[l] >> (4 * (c % 2))) & 0x0f)
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2 {
    use std::arch::x86_64::*;

    /// Nibbles of chunk `c` of Q4_K-style packing, `qs` at `block + at`.
    ///
    /// # Safety
    /// The CPU has AVX2; bytes `at + 32 (c / 2) ..+32` of `block` are readable.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    pub(crate) unsafe fn nibbles(block: *const u8, at: usize, c: usize) -> __m256i {
        // SAFETY: the 32 bytes are readable (caller's guarantee).
        let packed = unsafe { _mm256_loadu_si256(block.add(at + 32 * (c / 2)).cast()) };
        let shifted = _mm256_srl_epi16(packed, _mm_cvtsi32_si128(4 * (c % 2) as i32));
        _mm256_and_si256(shifted, _mm256_set1_epi8(0x0f))
    }

    /// The f16 at `at`, widened with F16C.
    ///
    /// # Safety
    /// The CPU has F16C; two bytes at `at` are readable.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    pub(crate) unsafe fn f16_at(at: *const u8) -> f32 {
        // SAFETY: two readable bytes (caller's guarantee).
        crate::simd::f16_bits_to_f32(unsafe { at.cast::<u16>().read_unaligned() })
    }

    /// Q4_K/Q5_K's header in registers: each 6-bit scale and min widened to
    /// the two i16 lanes of its sub-block's groups.
    ///
    /// # Safety
    /// The CPU has AVX2; the 16 header bytes at `block` are readable.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    pub(crate) unsafe fn q4k_like_scales(block: *const u8) -> super::SimdScales {
        // SAFETY: the 12 packed bytes follow d and dmin in the header.
        let packed = unsafe { std::slice::from_raw_parts(block.add(4), 12) };
        let (scales, mins) = super::unpack_scales_mins_words(packed);
        let both = _mm_set_epi64x(mins as i64, scales as i64);
        super::SimdScales {
            // SAFETY: d and dmin are bytes 0..4.
            d: unsafe { f16_at(block) },
            // SAFETY: as above.
            dmin: unsafe { f16_at(block.add(2)) },
            scales: _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(both, both)),
            mins: _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(both, both)),
        }
    }

    /// Bit `from` of each of the 32 bytes at `at`, moved to bit `to` (16-bit
    /// shifts: the mask drops what crossed between the bytes of a lane).
    ///
    /// # Safety
    /// The CPU has AVX2; 32 bytes at `at` are readable.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    pub(crate) unsafe fn bit_moved(at: *const u8, from: usize, to: usize) -> __m256i {
        // SAFETY: the 32 bytes are readable (caller's guarantee).
        let bits = unsafe { _mm256_loadu_si256(at.cast()) };
        let moved = if from <= to {
            _mm256_sll_epi16(bits, _mm_cvtsi32_si128((to - from) as i32))
        } else {
            _mm256_srl_epi16(bits, _mm_cvtsi32_si128((from - to) as i32))
        };
        _mm256_and_si256(moved, _mm256_set1_epi8(1 << to))
    }

    /// `(bytes >> shift) & mask`, 32 bytes at `at`, shifting 16-bit lanes
    /// (the mask drops the bits that crossed a byte).
    ///
    /// # Safety
    /// The CPU has AVX2; 32 bytes at `at` are readable.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    pub(crate) unsafe fn bits(at: *const u8, shift: usize, mask: i8) -> __m256i {
        // SAFETY: the 32 bytes are readable (caller's guarantee).
        let v = unsafe { _mm256_loadu_si256(at.cast()) };
        _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(shift as i32)), _mm256_set1_epi8(mask))
    }
}

impl KFormat for Q4K {
    const DTYPE: DType = DType::Q4_K;
    const OFFSET: KOffset = KOffset::StoredMin;

    fn scales(block: &[u8]) -> SuperScales {
        q4k_like_scales(block)
    }

    fn chunk(block: &[u8], c: usize) -> [u8; 32] {
        nibble_chunk(block, 16, c)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn chunk_avx2(block: *const u8, c: usize) -> std::arch::x86_64::__m256i {
        // SAFETY: bytes 16..144 are the nibbles, inside the block.
        unsafe { avx2::nibbles(block, 16, c) }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
    #[inline]
    unsafe fn chunk_pair_avx512(block: *const u8, p: usize) -> std::arch::x86_64::__m512i {
        use std::arch::x86_64::*;
        // Chunks 2p and 2p + 1 are the low and high nibbles of the same 32
        // bytes at 16 + 32p (inside the block for p < 4).
        // SAFETY: as above.
        let packed = _mm512_broadcast_i64x4(unsafe { _mm256_loadu_si256(block.add(16 + 32 * p).cast()) });
        // The upper half (16-bit elements 16..32) takes the high nibbles.
        _mm512_and_si512(_mm512_mask_srli_epi16::<4>(packed, 0xffff_0000, packed), _mm512_set1_epi8(0x0f))
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn scales_avx2(block: *const u8) -> SimdScales {
        // SAFETY: the header is the first 16 bytes of the block.
        unsafe { avx2::q4k_like_scales(block) }
    }

    fn quantize_block(src: &[f32; SUPER_ELEMS], dst: &mut [u8]) {
        kfit::encode_q4k_like(src, 15, dst);
    }
}

impl KFormat for Q5K {
    const DTYPE: DType = DType::Q5_K;
    const OFFSET: KOffset = KOffset::StoredMin;

    fn scales(block: &[u8]) -> SuperScales {
        q4k_like_scales(block)
    }

    fn chunk(block: &[u8], c: usize) -> [u8; 32] {
        let low = nibble_chunk(block, 48, c);
        std::array::from_fn(|l| low[l] | (((block[16 + l] >> c) & 1) << 4))
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn chunk_avx2(block: *const u8, c: usize) -> std::arch::x86_64::__m256i {
        use std::arch::x86_64::*;
        // SAFETY: nibbles at 48..176 and high bits at 16..48 are inside the block.
        unsafe { _mm256_or_si256(avx2::nibbles(block, 48, c), avx2::bit_moved(block.add(16), c, 4)) }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn scales_avx2(block: *const u8) -> SimdScales {
        // SAFETY: the header is the first 16 bytes of the block.
        unsafe { avx2::q4k_like_scales(block) }
    }

    fn quantize_block(src: &[f32; SUPER_ELEMS], dst: &mut [u8]) {
        kfit::encode_q4k_like(src, 31, dst);
    }
}

impl KFormat for Q6K {
    const DTYPE: DType = DType::Q6_K;
    const OFFSET: KOffset = KOffset::Centred(32);

    fn scales(block: &[u8]) -> SuperScales {
        let scales: [i16; GROUPS] = std::array::from_fn(|g| i16::from(block[192 + g] as i8));
        let d = f16_at(block, 208);
        SuperScales { d, dmin: d, scales, mins: scales.map(|s| 32 * s) }
    }

    fn chunk(block: &[u8], c: usize) -> [u8; 32] {
        let (n, r) = (c / 4, c % 4);
        let low = &block[64 * n + 32 * (r % 2)..][..32];
        let high = &block[128 + 32 * n..][..32];
        std::array::from_fn(|l| ((low[l] >> (4 * (r / 2))) & 0x0f) | (((high[l] >> (2 * r)) & 3) << 4))
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn chunk_avx2(block: *const u8, c: usize) -> std::arch::x86_64::__m256i {
        use std::arch::x86_64::*;
        let (n, r) = (c / 4, c % 4);
        // SAFETY: low nibbles at 0..128 and high bits at 128..192 are inside the block.
        unsafe {
            let low = avx2::bits(block.add(64 * n + 32 * (r % 2)), 4 * (r / 2), 0x0f);
            let high = avx2::bits(block.add(128 + 32 * n), 2 * r, 3);
            _mm256_or_si256(low, _mm256_slli_epi16::<4>(high))
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn scales_avx2(block: *const u8) -> SimdScales {
        use std::arch::x86_64::*;
        // SAFETY: the 16 i8 scales are bytes 192..208, d bytes 208..210.
        unsafe {
            let scales = _mm256_cvtepi8_epi16(_mm_loadu_si128(block.add(192).cast()));
            let d = avx2::f16_at(block.add(208));
            SimdScales { d, dmin: d, scales, mins: _mm256_slli_epi16::<5>(scales) }
        }
    }

    fn quantize_block(src: &[f32; SUPER_ELEMS], dst: &mut [u8]) {
        kfit::encode_q6k(src, dst);
    }
}

impl KFormat for Q8K {
    const DTYPE: DType = DType::Q8_K;
    const OFFSET: KOffset = KOffset::Zero;

    fn scales(block: &[u8]) -> SuperScales {
        let d = f32::from_le_bytes([block[0], block[1], block[2], block[3]]);
        SuperScales { d, dmin: 0.0, scales: [1; GROUPS], mins: [0; GROUPS] }
    }

    fn chunk(block: &[u8], c: usize) -> [u8; 32] {
        std::array::from_fn(|l| block[4 + 32 * c + l])
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn chunk_avx2(block: *const u8, c: usize) -> std::arch::x86_64::__m256i {
        // SAFETY: the integers are bytes 4..260 of the block.
        unsafe { std::arch::x86_64::_mm256_loadu_si256(block.add(4 + 32 * c).cast()) }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn scales_avx2(block: *const u8) -> SimdScales {
        use std::arch::x86_64::*;
        // SAFETY: d is the f32 at bytes 0..4.
        let d = unsafe { block.cast::<f32>().read_unaligned() };
        SimdScales { d, dmin: 0.0, scales: _mm256_set1_epi16(1), mins: _mm256_setzero_si256() }
    }

    fn quantize_block(src: &[f32; SUPER_ELEMS], dst: &mut [u8]) {
        kfit::encode_q8k(src, dst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::kquant_low_bits::{Q2K, Q3K};

    /// Each format's AVX2 accessors give exactly its scalar ones, on blocks
    /// of random bytes: every chunk's 32 integers and every group's scale
    /// and offset (the f16 fields are random too; a NaN compares by bits).
    #[cfg(target_arch = "x86_64")]
    fn avx2_accessors_match_scalar<F: KFormat>() {
        use std::arch::x86_64::*;
        if crate::Isa::detected() == crate::Isa::Scalar {
            return;
        }
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..200 {
            let block: Vec<u8> = (0..F::BYTES)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (state >> 32) as u8
                })
                .collect();
            let lanes = |v: __m256i| -> [u8; 32] {
                let mut out = [0u8; 32];
                // SAFETY: `out` is 32 writable bytes.
                unsafe { _mm256_storeu_si256(out.as_mut_ptr().cast(), v) };
                out
            };
            let as_i16 = |v: __m256i| -> [i16; GROUPS] {
                let bytes = lanes(v);
                std::array::from_fn(|g| i16::from_le_bytes([bytes[2 * g], bytes[2 * g + 1]]))
            };
            for c in 0..CHUNKS {
                // SAFETY: AVX2 is present (checked above); `block` holds `F::BYTES` bytes; `c < CHUNKS`.
                let simd = unsafe { F::chunk_avx2(block.as_ptr(), c) };
                assert_eq!(lanes(simd), F::chunk(&block, c), "{} chunk {c}", F::DTYPE);
            }
            let s = F::scales(&block);
            // SAFETY: as above.
            let simd = unsafe { F::scales_avx2(block.as_ptr()) };
            assert_eq!((simd.d.to_bits(), simd.dmin.to_bits()), (s.d.to_bits(), s.dmin.to_bits()), "{}", F::DTYPE);
            assert_eq!((as_i16(simd.scales), as_i16(simd.mins)), (s.scales, s.mins), "{} scales", F::DTYPE);
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_accessors_of_every_format_match_scalar() {
        avx2_accessors_match_scalar::<Q2K>();
        avx2_accessors_match_scalar::<Q3K>();
        avx2_accessors_match_scalar::<Q4K>();
        avx2_accessors_match_scalar::<Q5K>();
        avx2_accessors_match_scalar::<Q6K>();
        avx2_accessors_match_scalar::<Q8K>();
    }

    #[test]
    fn scale_packing_round_trips_every_6_bit_value() {
        for base in 0..64usize {
            let scales: [u8; 8] = std::array::from_fn(|j| ((base + 7 * j) % 64) as u8);
            let mins: [u8; 8] = std::array::from_fn(|j| ((base * 3 + 11 * j) % 64) as u8);
            let mut packed = [0u8; 12];
            kfit::pack_scales_mins(&scales, &mins, &mut packed);
            assert_eq!(unpack_scales_mins(&packed), (scales, mins));
        }
    }

    #[test]
    fn q6_k_element_order_matches_ggml() {
        // Element 64 + 5 (half 0, r = 2: high nibble of ql[5], bits 4..6 of qh[5]).
        let mut block = [0u8; 210];
        block[5] = 0xa0; // high nibble 10
        block[128 + 5] = 0b0010_0000; // bits 4..6 = 2
        block[192 + 4] = 1; // group 4 holds elements 64..80
        block[208..210].copy_from_slice(&f16::from_f32(0.5).to_bits().to_le_bytes());
        let mut out = [0.0; 256];
        Q6K::dequantize_block(&block, &mut out);
        assert_eq!(out[69], 0.5 * ((10 | (2 << 4)) - 32) as f32);
        assert_eq!(out[5], 0.0, "group 0 has scale 0");
    }

    #[test]
    fn q5_k_high_bit_of_sub_block_s_is_bit_s() {
        let mut block = [0u8; 176];
        block[..2].copy_from_slice(&f16::from_f32(1.0).to_bits().to_le_bytes());
        // Scale 1 for every sub-block, mins 0.
        for j in 0..4 {
            block[4 + j] = 1;
            block[12 + j] = 1;
        }
        block[16 + 3] = 1 << 5; // element 3 of sub-block 5 gets +16
        block[48 + 32 * 2 + 3] = 0x70; // sub-block 5 (pair 2, high nibble), element 3: 7
        let mut out = [0.0; 256];
        Q5K::dequantize_block(&block, &mut out);
        assert_eq!(out[5 * 32 + 3], 23.0);
        assert_eq!(out[4 * 32 + 3], 0.0);
    }
}
