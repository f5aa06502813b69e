//! Where the bytes of a packed 32-value block lie (see the layout in the
//! [`blocks`](super) module docs): the offsets the packing, the portable
//! tile and the SIMD tiles share.

use std::marker::PhantomData;

use half::f16;

use crate::packed::format::GROUP_ROWS;
use crate::quant::{e8m0_half, BlockFormat, Offset, Quants, Scale, BLOCK_ELEMS};

/// The packed form of the 32-value format `F` (see the [`blocks`](super)
/// module docs).
pub(crate) struct Blocks<F>(PhantomData<F>);

/// Elements per step (one 32-bit lane of one row).
pub(super) const STEP: usize = 4;
/// Bytes of one chunk: [`STEP`] bytes of each of the group's rows.
pub(super) const CHUNK: usize = STEP * GROUP_ROWS;
/// Steps per block.
pub(super) const STEPS: usize = BLOCK_ELEMS / STEP;

impl<F: BlockFormat> Blocks<F> {
    /// Whether the format stores a minimum after its scale.
    pub(super) const HAS_MIN: bool = matches!(F::OFFSET, Offset::StoredMin);
    /// Whether the format has fifth bits.
    pub(super) const HAS_HIGH: bool = matches!(F::QUANTS, Quants::NibblesHighBits(_));
    /// Bytes of a row's integers in a GGUF block (32 or 16).
    const ROW_QUANT_BYTES: usize = if matches!(F::QUANTS, Quants::Bytes) { BLOCK_ELEMS } else { BLOCK_ELEMS / 2 };
    /// Chunks of integers per packed block (8 for Q8_0, 4 for nibbles).
    pub(super) const CHUNKS: usize = Self::ROW_QUANT_BYTES / STEP;
    /// Bytes of one row's scale (2 for f16, 1 for MXFP4's E8M0).
    pub(super) const SCALE_BYTES: usize = F::SCALE.bytes();
    /// Byte offset of the minimums, after the scales.
    pub(super) const MINS: usize = Self::SCALE_BYTES * GROUP_ROWS;
    /// Byte offset of the fifth bits.
    pub(super) const HIGH: usize = Self::MINS + if Self::HAS_MIN { 2 * GROUP_ROWS } else { 0 };
    /// Byte offset of the integers.
    pub(super) const QUANTS: usize = Self::HIGH + if Self::HAS_HIGH { CHUNK } else { 0 };
    /// Steps of maddubs products an i16 lane can sum without overflow:
    /// each product pair is at most `2 · max |w| · 127` (`|w| <= 128` for
    /// Q8_0's signed bytes under the sign trick).
    pub(super) const I16_STEPS: usize = {
        let max_w = if matches!(F::QUANTS, Quants::Bytes) { 128 } else { F::MAX_QUANT as usize };
        i16::MAX as usize / (2 * max_w * 127)
    };

    /// Integer `j` of row `r` of the packed block `p` (the portable tile's
    /// read of the layout).
    pub(super) fn quant(p: &[u8], r: usize, j: usize) -> i32 {
        let q = &p[Self::QUANTS..];
        match F::QUANTS {
            Quants::Bytes => i32::from(q[(j / STEP) * CHUNK + r * STEP + j % STEP] as i8),
            Quants::Nibbles | Quants::NibblesHighBits(_) | Quants::Lookup(_) => {
                let byte = q[((j % 16) / STEP) * CHUNK + r * STEP + j % STEP];
                let nibble = if j < 16 { byte & 0x0f } else { byte >> 4 };
                if let Quants::Lookup(table) = F::QUANTS {
                    return i32::from(table[usize::from(nibble)]);
                }
                let fifth = if Self::HAS_HIGH { (p[Self::HIGH + r * STEP + j % STEP] >> (j / STEP)) & 1 } else { 0 };
                i32::from(nibble | (fifth << 4))
            }
        }
    }

    /// Row `r`'s scale `d` in the packed block `p`.
    pub(super) fn scale(p: &[u8], r: usize) -> f32 {
        match F::SCALE {
            Scale::F16 => Self::half(p, 2 * r),
            Scale::E8M0 => e8m0_half(p[r]),
        }
    }

    /// The f16 at byte `at` of `p`, widened.
    pub(super) fn half(p: &[u8], at: usize) -> f32 {
        f16::from_bits(u16::from_le_bytes([p[at], p[at + 1]])).to_f32()
    }
}
