//! GGML block formats exactly as GGUF stores them, with the reference
//! quantizers, and whole-row encode/decode for every [`DType`]: the 32-value
//! formats (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, MXFP4) here, the 256-value K-quants in
//! `kquant`.
//!
//! Every format here is "a scale `d` (f16, or MXFP4's power of two), maybe an
//! f16 second field, then 32 integers", and a value decodes as `d * q +
//! offset`, where the offset is 0 (Q8_0), `-8 d` (Q4_0), `-16 d` (Q5_0),
//! `-12 d` (MXFP4, whose 4-bit codes index a table of `kv + 12`) or the
//! stored minimum `m` (Q4_1, Q5_1). The `BlockFormat` trait describes a
//! format by these few constants, so decoding and the integer dot products
//! are written once for all of them, and so is each kind of reference
//! quantizer: signed (Q8_0), centred (Q4_0, Q5_0), with a minimum (Q4_1,
//! Q5_1) and MXFP4's (`mxfp4`).

use baton_core::DType;
use half::{bf16, f16};

use crate::convert::{narrow_bytes, widen_bytes};
use crate::error::{expect_len, KernelError};
use crate::isa::Isa;

pub(crate) mod kfit;
pub(crate) mod kquant;
pub(crate) mod kquant_low_bits;
pub(crate) mod mxfp4;
pub(crate) mod super_block;

use kquant::KFormat;
pub use kquant::SUPER_ELEMS;

/// Elements per block of every quantized format here.
pub const BLOCK_ELEMS: usize = 32;

/// What a block adds to `d * q`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Offset {
    /// Nothing (Q8_0: signed `q`).
    Zero,
    /// `-c d`: `q` is unsigned and centred on `c` (8 for Q4_0, 16 for Q5_0,
    /// 12 for MXFP4's table).
    Centred(i32),
    /// The f16 minimum stored after `d` (Q4_1, Q5_1).
    StoredMin,
}

/// How a block stores its 32 integers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Quants {
    /// Signed bytes, one per element (Q8_0).
    Bytes,
    /// Unsigned 4-bit values: element `j < 16` in the low nibble of byte
    /// `j`, element `j >= 16` in the high nibble of byte `j - 16`.
    Nibbles,
    /// Unsigned 5-bit values: the low 4 bits as [`Quants::Nibbles`], the
    /// fifth bit of element `j` in bit `j` of the little-endian `u32` at
    /// this byte offset of the block.
    NibblesHighBits(usize),
    /// 4-bit codes laid out as [`Quants::Nibbles`], each standing for the
    /// unsigned integer at its index in this table (MXFP4's values plus 12).
    Lookup(&'static [u8; 16]),
}

/// How a block stores its scale `d`, at byte 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scale {
    /// An f16 (2 bytes).
    F16,
    /// An E8M0 exponent byte `e`: `d = 2^(e - 128)` (MXFP4; see
    /// [`e8m0_half`]).
    E8M0,
}

pub(crate) use mxfp4::e8m0_half;

impl Scale {
    /// Bytes of the scale.
    pub(crate) const fn bytes(self) -> usize {
        match self {
            Scale::F16 => 2,
            Scale::E8M0 => 1,
        }
    }
}

/// The largest entry of a [`Quants::Lookup`] table.
const fn table_max(table: &[u8; 16]) -> u8 {
    let (mut max, mut i) = (0, 0);
    while i < table.len() {
        if table[i] > max {
            max = table[i];
        }
        i += 1;
    }
    max
}

/// The byte layout of one block of 32 values.
pub(crate) trait BlockFormat {
    /// The type this layout encodes.
    const DTYPE: DType;
    /// Bytes per block.
    const BYTES: usize = Self::DTYPE.block_bytes();
    /// Byte offset of the integers (the low nibbles for 5-bit formats)
    /// inside a block.
    const QS: usize;
    /// How the integers are stored.
    const QUANTS: Quants;
    /// How the scale is stored.
    const SCALE: Scale = Scale::F16;
    /// What a block adds to `d * q`.
    const OFFSET: Offset;

    /// Encodes 32 values as GGML's reference quantizer does: the signed one
    /// (Q8_0), the centred one (Q4_0, Q5_0) or the one with a minimum (Q4_1,
    /// Q5_1), as the offset says (MXFP4 has its own).
    #[inline]
    fn quantize_block(src: &[f32; BLOCK_ELEMS], dst: &mut [u8]) {
        match Self::OFFSET {
            Offset::Zero => quantize_signed::<Self>(src, dst),
            Offset::Centred(_) => quantize_centred::<Self>(src, dst),
            Offset::StoredMin => quantize_with_min::<Self>(src, dst),
        }
    }

    /// The largest integer a block stores (unsigned formats).
    const MAX_QUANT: u8 = match Self::QUANTS {
        Quants::Bytes => 127,
        Quants::Nibbles => 15,
        Quants::NibblesHighBits(_) => 31,
        Quants::Lookup(table) => table_max(table),
    };

    /// The scale `d` of a block.
    #[inline]
    fn scale(block: &[u8]) -> f32 {
        match Self::SCALE {
            Scale::F16 => f16::from_bits(u16::from_le_bytes([block[0], block[1]])).to_f32(),
            Scale::E8M0 => e8m0_half(block[0]),
        }
    }

    /// The offset a block adds to every `d * q`, given its scale.
    #[inline]
    fn offset(block: &[u8], scale: f32) -> f32 {
        match Self::OFFSET {
            Offset::Zero => 0.0,
            Offset::Centred(centre) => -(centre as f32) * scale,
            Offset::StoredMin => f16::from_bits(u16::from_le_bytes([block[2], block[3]])).to_f32(),
        }
    }

    /// The integer of element `j` (0..32) of a block.
    #[inline]
    fn quant(block: &[u8], j: usize) -> i32 {
        let nibble = || {
            let byte = block[Self::QS + j % 16];
            if j < 16 {
                byte & 0x0f
            } else {
                byte >> 4
            }
        };
        match Self::QUANTS {
            Quants::Bytes => i32::from(block[Self::QS + j] as i8),
            Quants::Nibbles => i32::from(nibble()),
            Quants::NibblesHighBits(qh) => i32::from(nibble() | (((block[qh + j / 8] >> (j % 8)) & 1) << 4)),
            Quants::Lookup(table) => i32::from(table[usize::from(nibble())]),
        }
    }

    /// Decodes one block in GGML's order of operations, so the values are
    /// GGML's to the bit (signed zeros included): `d * (q - c)` for the
    /// centred formats (for MXFP4 `d * kv`, since `q - 12` is `kv`), `d * q +
    /// m` with a minimum, `d * q` for Q8_0.
    #[inline]
    fn dequantize_block(block: &[u8], dst: &mut [f32; BLOCK_ELEMS]) {
        let d = Self::scale(block);
        let centre = match Self::OFFSET {
            Offset::Centred(centre) => centre,
            Offset::Zero | Offset::StoredMin => 0,
        };
        for (j, out) in dst.iter_mut().enumerate() {
            let value = d * (Self::quant(block, j) - centre) as f32;
            *out = if Self::OFFSET == Offset::StoredMin { value + Self::offset(block, d) } else { value };
        }
    }
}

/// Q8_0: `d` (f16), 32 `i8`; `x = d q`, `d = amax / 127`.
pub(crate) struct Q8_0;
/// Q4_0: `d` (f16), 16 bytes of nibbles; `x = d (q - 8)`, `d = max / -8` where
/// `max` is the value of largest magnitude, sign kept.
pub(crate) struct Q4_0;
/// Q4_1: `d` (f16), `m` (f16), 16 bytes of nibbles; `x = d q + m`,
/// `d = (max - min) / 15`, `m = min`.
pub(crate) struct Q4_1;
/// Q5_0: `d` (f16), 4 bytes of high bits, 16 bytes of nibbles;
/// `x = d (q - 16)`, `d = max / -16` (`max` as for Q4_0).
pub(crate) struct Q5_0;
/// Q5_1: `d` (f16), `m` (f16), 4 bytes of high bits, 16 bytes of nibbles;
/// `x = d q + m`, `d = (max - min) / 31`, `m = min`.
pub(crate) struct Q5_1;

fn write_f16(dst: &mut [u8], value: f32) {
    dst.copy_from_slice(&f16::from_f32(value).to_bits().to_le_bytes());
}

fn reciprocal_or_zero(d: f32) -> f32 {
    if d != 0.0 {
        1.0 / d
    } else {
        0.0
    }
}

/// Stores 32 unsigned integers (at most `F::MAX_QUANT`; MXFP4's table
/// indexes) in `F`'s nibbles and, for 5-bit formats, high bits.
pub(crate) fn write_unsigned_quants<F: BlockFormat + ?Sized>(levels: &[u8; BLOCK_ELEMS], dst: &mut [u8]) {
    for j in 0..16 {
        dst[F::QS + j] = (levels[j] & 0x0f) | ((levels[j + 16] & 0x0f) << 4);
    }
    if let Quants::NibblesHighBits(qh) = F::QUANTS {
        let bits = levels.iter().enumerate().fold(0u32, |bits, (j, &q)| bits | (u32::from(q >> 4) << j));
        dst[qh..qh + 4].copy_from_slice(&bits.to_le_bytes());
    }
}

/// GGML's reference quantizer of Q8_0: `d = amax / 127`, `q = round(x / d)`.
fn quantize_signed<F: BlockFormat + ?Sized>(src: &[f32; BLOCK_ELEMS], dst: &mut [u8]) {
    let amax = src.iter().fold(0.0f32, |a, x| a.max(x.abs()));
    let d = amax / 127.0;
    let id = reciprocal_or_zero(d);
    write_f16(&mut dst[..2], d);
    for (q, x) in dst[F::QS..F::BYTES].iter_mut().zip(src) {
        *q = (x * id).round() as i8 as u8;
    }
}

/// GGML's reference quantizer of the centred formats (Q4_0, Q5_0):
/// `d = max / -c` with `max` the value of largest magnitude (sign kept), so
/// that value is level 0, and `q = min(trunc(x / d + c + 0.5), 2c - 1)`.
fn quantize_centred<F: BlockFormat + ?Sized>(src: &[f32; BLOCK_ELEMS], dst: &mut [u8]) {
    let Offset::Centred(centre) = F::OFFSET else { unreachable!("{} is not a centred format", F::DTYPE) };
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &x in src {
        if amax < x.abs() {
            amax = x.abs();
            max = x;
        }
    }
    let d = max / -(centre as f32);
    let id = reciprocal_or_zero(d);
    write_f16(&mut dst[..2], d);
    let levels = src.map(|x| ((x * id + centre as f32 + 0.5) as i8).min(F::MAX_QUANT as i8) as u8);
    write_unsigned_quants::<F>(&levels, dst);
}

/// GGML's reference quantizer of the formats with a minimum (Q4_1, Q5_1):
/// `d = (max - min) / MAX_QUANT`, `m = min`,
/// `q = min(trunc((x - min) / d + 0.5), MAX_QUANT)`.
fn quantize_with_min<F: BlockFormat + ?Sized>(src: &[f32; BLOCK_ELEMS], dst: &mut [u8]) {
    let (mut min, mut max) = (f32::MAX, -f32::MAX);
    for &x in src {
        min = min.min(x);
        max = max.max(x);
    }
    let d = (max - min) / f32::from(F::MAX_QUANT);
    let id = reciprocal_or_zero(d);
    write_f16(&mut dst[..2], d);
    write_f16(&mut dst[2..4], min);
    let levels = src.map(|x| (((x - min) * id + 0.5) as i8).min(F::MAX_QUANT as i8) as u8);
    write_unsigned_quants::<F>(&levels, dst);
}

/// MXFP4: an E8M0 scale byte, 16 bytes of E2M1 codes (see [`mxfp4`]).
pub(crate) struct MXFP4;

impl BlockFormat for MXFP4 {
    const DTYPE: DType = DType::MXFP4;
    const QS: usize = 1;
    const QUANTS: Quants = Quants::Lookup(&mxfp4::UNSIGNED);
    const OFFSET: Offset = Offset::Centred(mxfp4::CENTRE);
    const SCALE: Scale = Scale::E8M0;

    fn quantize_block(src: &[f32; BLOCK_ELEMS], dst: &mut [u8]) {
        let (e, codes) = mxfp4::encode(src);
        dst[0] = e;
        write_unsigned_quants::<Self>(&codes, dst);
    }
}

impl BlockFormat for Q8_0 {
    const DTYPE: DType = DType::Q8_0;
    const QS: usize = 2;
    const QUANTS: Quants = Quants::Bytes;
    const OFFSET: Offset = Offset::Zero;
}

impl BlockFormat for Q4_0 {
    const DTYPE: DType = DType::Q4_0;
    const QS: usize = 2;
    const QUANTS: Quants = Quants::Nibbles;
    const OFFSET: Offset = Offset::Centred(8);
}

impl BlockFormat for Q4_1 {
    const DTYPE: DType = DType::Q4_1;
    const QS: usize = 4;
    const QUANTS: Quants = Quants::Nibbles;
    const OFFSET: Offset = Offset::StoredMin;
}

impl BlockFormat for Q5_0 {
    const DTYPE: DType = DType::Q5_0;
    const QS: usize = 6;
    const QUANTS: Quants = Quants::NibblesHighBits(2);
    const OFFSET: Offset = Offset::Centred(16);
}

impl BlockFormat for Q5_1 {
    const DTYPE: DType = DType::Q5_1;
    const QS: usize = 8;
    const QUANTS: Quants = Quants::NibblesHighBits(4);
    const OFFSET: Offset = Offset::StoredMin;
}

/// Runs `$body` with `$format` bound to the [`BlockFormat`] of a 32-value
/// `$dtype`, `$kbody` with `$kformat` bound to the [`KFormat`](kquant::KFormat)
/// of a K-quant, or evaluates `$plain` for the plain float types.
macro_rules! match_format {
    ($dtype:expr, $format:ident => $body:expr, $kformat:ident => $kbody:expr, plain => $plain:expr) => {
        match $dtype {
            DType::Q8_0 => {
                type $format = $crate::quant::Q8_0;
                $body
            }
            DType::Q4_0 => {
                type $format = $crate::quant::Q4_0;
                $body
            }
            DType::Q4_1 => {
                type $format = $crate::quant::Q4_1;
                $body
            }
            DType::Q5_0 => {
                type $format = $crate::quant::Q5_0;
                $body
            }
            DType::Q5_1 => {
                type $format = $crate::quant::Q5_1;
                $body
            }
            DType::MXFP4 => {
                type $format = $crate::quant::MXFP4;
                $body
            }
            DType::Q2_K => {
                type $kformat = $crate::quant::kquant_low_bits::Q2K;
                $kbody
            }
            DType::Q3_K => {
                type $kformat = $crate::quant::kquant_low_bits::Q3K;
                $kbody
            }
            DType::Q4_K => {
                type $kformat = $crate::quant::kquant::Q4K;
                $kbody
            }
            DType::Q5_K => {
                type $kformat = $crate::quant::kquant::Q5K;
                $kbody
            }
            DType::Q6_K => {
                type $kformat = $crate::quant::kquant::Q6K;
                $kbody
            }
            DType::Q8_K => {
                type $kformat = $crate::quant::kquant::Q8K;
                $kbody
            }
            DType::F32 | DType::F16 | DType::BF16 | DType::I32 => $plain,
        }
    };
}
pub(crate) use match_format;

/// Checks that `elems` values of `dtype` encode in exactly `bytes` bytes.
pub(crate) fn check_row(dtype: DType, elems: usize, bytes: usize) -> Result<(), KernelError> {
    if !crate::weight_types::is_weight_type(dtype) {
        return Err(KernelError::NotFloat { dtype });
    }
    let expected =
        dtype.row_bytes(elems).ok_or(KernelError::PartialBlock { dtype, elems, block_elems: dtype.block_elems() })?;
    expect_len("encoded row bytes", expected, bytes)
}

/// Encodes whole blocks of `N` values, `bytes` each, with `encode`.
fn encode_blocks<const N: usize>(src: &[f32], dst: &mut [u8], bytes: usize, encode: fn(&[f32; N], &mut [u8])) {
    for (block, out) in src.chunks_exact(N).zip(dst.chunks_exact_mut(bytes)) {
        encode(block.try_into().expect("chunks_exact yields whole blocks"), out);
    }
}

/// Decodes whole blocks of `N` values, `bytes` each, with `decode`.
fn decode_blocks<const N: usize>(src: &[u8], dst: &mut [f32], bytes: usize, decode: fn(&[u8], &mut [f32; N])) {
    for (block, out) in src.chunks_exact(bytes).zip(dst.chunks_exact_mut(N)) {
        decode(block, out.try_into().expect("chunks_exact yields whole blocks"));
    }
}

/// Encodes `src` as one row of `dtype` into `dst`.
///
/// Plain types are stored little-endian (f16 and bf16 rounded to nearest
/// even); 32-value block types use GGML's reference quantizers, K-quants a
/// least-squares fit of every sub-block's scale (and minimum) in the same
/// spirit (see `quant/kfit.rs`).
///
/// # Errors
/// [`KernelError::PartialBlock`] if `src` is not whole blocks,
/// [`KernelError::LengthMismatch`] unless `dst.len() == dtype.row_bytes(src.len())`.
pub fn quantize_row(dtype: DType, src: &[f32], dst: &mut [u8]) -> Result<(), KernelError> {
    check_row(dtype, src.len(), dst.len())?;
    let isa = Isa::current();
    match_format!(dtype,
        F => encode_blocks(src, dst, F::BYTES, F::quantize_block),
        K => encode_blocks(src, dst, K::BYTES, K::quantize_block),
        plain => match dtype {
        DType::F16 => narrow_bytes::<f16>(isa, src, dst),
        DType::BF16 => narrow_bytes::<bf16>(isa, src, dst),
        _ => {
            for (x, out) in src.iter().zip(dst.chunks_exact_mut(4)) {
                out.copy_from_slice(&x.to_le_bytes());
            }
        }
    });
    Ok(())
}

/// Decodes one row of `dtype` from `src` into `dst` (for every type, so a
/// conversion to f32 is one call).
///
/// # Errors
/// [`KernelError::PartialBlock`] if `dst` is not whole blocks,
/// [`KernelError::LengthMismatch`] unless `src.len() == dtype.row_bytes(dst.len())`.
pub fn dequantize_row(dtype: DType, src: &[u8], dst: &mut [f32]) -> Result<(), KernelError> {
    check_row(dtype, dst.len(), src.len())?;
    let isa = Isa::current();
    match_format!(dtype,
        F => decode_blocks(src, dst, F::BYTES, F::dequantize_block),
        K => decode_blocks(src, dst, K::BYTES, K::dequantize_block),
        plain => match dtype {
        DType::F16 => widen_bytes::<f16>(isa, src, dst),
        DType::BF16 => widen_bytes::<bf16>(isa, src, dst),
        _ => {
            for (x, bytes) in dst.iter_mut().zip(src.chunks_exact(4)) {
                *x = f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The integers end exactly at the block's end and the fifth bits sit
    /// between the scales and the nibbles: the fact the AVX2 loads
    /// (`quant_tile::load_quants`) rely on to stay inside a block.
    fn layout_fits<F: BlockFormat>() {
        let quant_bytes = if F::QUANTS == Quants::Bytes { 32 } else { 16 };
        assert_eq!(F::QS + quant_bytes, F::BYTES, "{}: the integers fill the block's tail", F::DTYPE);
        if let Quants::NibblesHighBits(qh) = F::QUANTS {
            assert!(qh >= 2 && qh + 4 <= F::QS, "{}: the fifth bits lie between the scales and the nibbles", F::DTYPE);
        }
    }

    #[test]
    fn every_block_layout_lies_inside_its_block() {
        layout_fits::<Q8_0>();
        layout_fits::<Q4_0>();
        layout_fits::<Q4_1>();
        layout_fits::<Q5_0>();
        layout_fits::<Q5_1>();
        layout_fits::<MXFP4>();
    }

    #[test]
    fn q4_0_nibble_order_matches_ggml() {
        // Element j < 16 in the low nibble of byte j, j >= 16 in the high nibble.
        let mut block = [0u8; 18];
        block[..2].copy_from_slice(&f16::from_f32(1.0).to_bits().to_le_bytes());
        block[2] = 0x3a; // element 0 = 10, element 16 = 3
        let mut out = [0.0; 32];
        Q4_0::dequantize_block(&block, &mut out);
        assert_eq!(out[0], 2.0);
        assert_eq!(out[16], -5.0);
        assert_eq!(out[1], -8.0);
    }

    #[test]
    fn q4_1_uses_min_and_scale() {
        let src: [f32; 32] = std::array::from_fn(|i| i as f32 * 0.5 - 3.0);
        let mut block = [0u8; 20];
        Q4_1::quantize_block(&src, &mut block);
        let mut out = [0.0; 32];
        Q4_1::dequantize_block(&block, &mut out);
        for (a, b) in out.iter().zip(&src) {
            assert!((a - b).abs() <= 0.52, "{a} vs {b}");
        }
        assert_eq!(out[0], -3.0);
    }

    #[test]
    fn all_zero_block_has_zero_scale() {
        let mut block = [0xffu8; 34];
        Q8_0::quantize_block(&[0.0; 32], &mut block);
        assert!(block.iter().all(|&b| b == 0));
    }
}
