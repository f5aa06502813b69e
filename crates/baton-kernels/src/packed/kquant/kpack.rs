//! Where each K-quant keeps its bits in GGUF's super-block ([`KPack`]): the
//! description the packed form is written once over.

use crate::quant::kfit;
use crate::quant::kquant::GROUPS;
use crate::quant::kquant::{unpack_scales_mins, KFormat, Q4K, Q5K, Q6K};
use crate::quant::kquant_low_bits::{unpack_q3k_scales, Q2K, Q3K};

/// `bits` bits of each value, at bit `shift` of the value.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plane {
    pub bits: usize,
    pub shift: usize,
}

/// Where a K-quant keeps its bits in GGUF's super-block.
pub(crate) trait KPack: KFormat {
    /// Values per scale (32 or 16).
    const SUB: usize;
    /// The value's bit planes, lowest bits first.
    const PLANES: &'static [Plane];
    /// Byte offset of the f16 `d`.
    const D_AT: usize;
    /// Byte offset of the f16 `dmin` (formats with [`KOffset::StoredMin`]).
    const DMIN_AT: usize;

    /// The GGUF byte and bit shift of plane `plane`'s bits of value `e`.
    fn source(plane: usize, e: usize) -> (usize, usize);

    /// The sub-blocks' scales and offset integers (mins, or the scales
    /// again for centred formats); the first `256 / SUB` are used. Formats
    /// with stored mins have scales in `0..=127` (the SIMD tiles widen them
    /// unsigned).
    fn scales_offsets(block: &[u8]) -> ([i8; GROUPS], [i8; GROUPS]);

    /// Writes scales (and mins) back in GGUF's encoding (the inverse of
    /// [`KPack::scales_offsets`]).
    fn put_scales(scales: &[i8; GROUPS], offsets: &[i8; GROUPS], block: &mut [u8]);
}

/// Byte and shift of value `e` (chunk `c = e / 32`, `l = e % 32`) in
/// Q4_K-style nibbles at `at`.
fn nibble_source(at: usize, e: usize) -> (usize, usize) {
    let (c, l) = (e / 32, e % 32);
    (at + 32 * (c / 2) + l, 4 * (c % 2))
}

/// Byte and shift of value `e` in Q2_K/Q3_K-style 2-bit fields at `at`.
fn two_bit_source(at: usize, e: usize) -> (usize, usize) {
    let (c, l) = (e / 32, e % 32);
    (at + 32 * (c / 4) + l, 2 * (c % 4))
}

fn q4k_like_scales(block: &[u8]) -> ([i8; GROUPS], [i8; GROUPS]) {
    let (sc, m) = unpack_scales_mins(&block[4..16]);
    (std::array::from_fn(|s| sc[s % 8] as i8), std::array::from_fn(|s| m[s % 8] as i8))
}

fn put_q4k_like_scales(scales: &[i8; GROUPS], mins: &[i8; GROUPS], block: &mut [u8]) {
    let sc: [u8; 8] = std::array::from_fn(|s| scales[s] as u8);
    let m: [u8; 8] = std::array::from_fn(|s| mins[s] as u8);
    kfit::pack_scales_mins(&sc, &m, &mut block[4..16]);
}

impl KPack for Q4K {
    const SUB: usize = 32;
    const PLANES: &'static [Plane] = &[Plane { bits: 4, shift: 0 }];
    const D_AT: usize = 0;
    const DMIN_AT: usize = 2;
    fn source(_plane: usize, e: usize) -> (usize, usize) {
        nibble_source(16, e)
    }
    fn scales_offsets(block: &[u8]) -> ([i8; GROUPS], [i8; GROUPS]) {
        q4k_like_scales(block)
    }
    fn put_scales(scales: &[i8; GROUPS], offsets: &[i8; GROUPS], block: &mut [u8]) {
        put_q4k_like_scales(scales, offsets, block)
    }
}

impl KPack for Q5K {
    const SUB: usize = 32;
    const PLANES: &'static [Plane] = &[Plane { bits: 4, shift: 0 }, Plane { bits: 1, shift: 4 }];
    const D_AT: usize = 0;
    const DMIN_AT: usize = 2;
    fn source(plane: usize, e: usize) -> (usize, usize) {
        if plane == 0 {
            nibble_source(48, e)
        } else {
            (16 + e % 32, e / 32)
        }
    }
    fn scales_offsets(block: &[u8]) -> ([i8; GROUPS], [i8; GROUPS]) {
        q4k_like_scales(block)
    }
    fn put_scales(scales: &[i8; GROUPS], offsets: &[i8; GROUPS], block: &mut [u8]) {
        put_q4k_like_scales(scales, offsets, block)
    }
}

impl KPack for Q6K {
    const SUB: usize = 16;
    const PLANES: &'static [Plane] = &[Plane { bits: 4, shift: 0 }, Plane { bits: 2, shift: 4 }];
    const D_AT: usize = 208;
    const DMIN_AT: usize = 208;
    fn source(plane: usize, e: usize) -> (usize, usize) {
        let (n, r, l) = (e / 128, (e / 32) % 4, e % 32);
        if plane == 0 {
            (64 * n + 32 * (r % 2) + l, 4 * (r / 2))
        } else {
            (128 + 32 * n + l, 2 * r)
        }
    }
    fn scales_offsets(block: &[u8]) -> ([i8; GROUPS], [i8; GROUPS]) {
        let scales = std::array::from_fn(|s| block[192 + s] as i8);
        (scales, scales)
    }
    fn put_scales(scales: &[i8; GROUPS], _offsets: &[i8; GROUPS], block: &mut [u8]) {
        for (byte, &s) in block[192..208].iter_mut().zip(scales) {
            *byte = s as u8;
        }
    }
}

impl KPack for Q3K {
    const SUB: usize = 16;
    const PLANES: &'static [Plane] = &[Plane { bits: 2, shift: 0 }, Plane { bits: 1, shift: 2 }];
    const D_AT: usize = 108;
    const DMIN_AT: usize = 108;
    fn source(plane: usize, e: usize) -> (usize, usize) {
        if plane == 0 {
            two_bit_source(32, e)
        } else {
            (e % 32, e / 32)
        }
    }
    fn scales_offsets(block: &[u8]) -> ([i8; GROUPS], [i8; GROUPS]) {
        let scales = unpack_q3k_scales(&block[96..108]);
        (scales, scales)
    }
    fn put_scales(scales: &[i8; GROUPS], _offsets: &[i8; GROUPS], block: &mut [u8]) {
        kfit::pack_q3k_scales(scales, &mut block[96..108]);
    }
}

impl KPack for Q2K {
    const SUB: usize = 16;
    const PLANES: &'static [Plane] = &[Plane { bits: 2, shift: 0 }];
    const D_AT: usize = 80;
    const DMIN_AT: usize = 82;
    fn source(_plane: usize, e: usize) -> (usize, usize) {
        two_bit_source(16, e)
    }
    fn scales_offsets(block: &[u8]) -> ([i8; GROUPS], [i8; GROUPS]) {
        (std::array::from_fn(|s| (block[s] & 0x0f) as i8), std::array::from_fn(|s| (block[s] >> 4) as i8))
    }
    fn put_scales(scales: &[i8; GROUPS], mins: &[i8; GROUPS], block: &mut [u8]) {
        for s in 0..GROUPS {
            block[s] = (scales[s] as u8 & 0x0f) | ((mins[s] as u8) << 4);
        }
    }
}
