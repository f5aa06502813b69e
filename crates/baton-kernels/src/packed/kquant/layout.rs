//! Where the bytes of a packed K-quant super-block lie (see the layout in
//! the [`kquant`](super) module docs): the offsets the packing, the portable
//! tile and the SIMD tiles share.

use std::marker::PhantomData;

use super::kpack::{KPack, Plane};
use crate::quant::kquant::{KOffset, SUPER_ELEMS};

/// The packed form of K-quant `F` (see the [`kquant`](super) module docs).
pub(crate) struct PackedK<F>(PhantomData<F>);

/// Bits per value of a format's planes.
const fn value_bits(planes: &[Plane]) -> usize {
    let (mut bits, mut i) = (0, 0);
    while i < planes.len() {
        bits += planes[i].bits;
        i += 1;
    }
    bits
}

/// The largest count of pairs dividing `pairs` whose `vpdpbusd` lane sums
/// (4 products of at most `qmax · 127` per pair) stay below 2^15.
const fn chain(pairs: usize, qmax: usize) -> usize {
    let mut c = pairs;
    while c > 1 && (c * 4 * qmax * 127 >= 1 << 15 || !pairs.is_multiple_of(c)) {
        c -= 1;
    }
    c
}

impl<F: KPack> PackedK<F> {
    /// Scale sub-blocks per super-block.
    pub(crate) const SUBS: usize = SUPER_ELEMS / F::SUB;
    /// Pairs (8 values) per sub-block.
    pub(crate) const PAIRS_PER_SUB: usize = F::SUB / 8;
    /// The largest value.
    pub(crate) const QMAX: usize = (1 << value_bits(F::PLANES)) - 1;
    /// Pairs whose `vpdpbusd` sums `vpdpwssd` scales at once (AVX-512).
    pub(crate) const CHAIN: usize = chain(Self::PAIRS_PER_SUB, Self::QMAX);
    /// Where the scales start.
    pub(crate) const SCALES: usize = 256 * value_bits(F::PLANES);
    /// Where the offset integers start.
    pub(crate) const OFFSETS: usize = Self::SCALES + 8 * Self::SUBS;
    /// Where the 8 f16 `d` start.
    pub(crate) const D: usize = Self::OFFSETS + 8 * Self::SUBS;
    /// Where the 8 f16 `dmin` start (if the format has them).
    pub(crate) const DMIN: usize = Self::D + 16;
    /// Whether the offsets are stored minimums (else centred values).
    pub(crate) const HAS_MIN: bool = matches!(F::OFFSET, KOffset::StoredMin);
    /// log2 of the centre of a centred format (its offsets are the scales).
    pub(crate) const CENTRE_SHIFT: u32 = match F::OFFSET {
        KOffset::Centred(c) => c.trailing_zeros(),
        _ => 0,
    };
    pub(super) const _CHECKS: () = {
        assert!(matches!(F::OFFSET, KOffset::StoredMin | KOffset::Centred(_)));
        if let KOffset::Centred(c) = F::OFFSET {
            assert!(c.count_ones() == 1, "the centre is a power of two");
        }
        // AVX2 sums a whole sub-block of `maddubs` pairs in i16.
        assert!(Self::PAIRS_PER_SUB * 2 * Self::QMAX * 127 < 1 << 15);
        assert!(Self::SUBS.is_multiple_of(4));
    };

    /// Byte offset of plane `index`.
    pub(super) const fn plane_at(index: usize) -> usize {
        let (mut at, mut i) = (0, 0);
        while i < index {
            at += 256 * F::PLANES[i].bits;
            i += 1;
        }
        at
    }

    /// Packed byte of value `e` of row `r` in plane `index` and the bit
    /// shift of its bits there.
    pub(super) fn plane_slot(index: usize, r: usize, e: usize) -> (usize, usize) {
        let bits = F::PLANES[index].bits;
        let per_slab = 8 / bits;
        let (pair, h, v) = (e / 8, (e % 8) / 4, e % 4);
        (Self::plane_at(index) + 64 * (pair / per_slab) + 8 * r + 4 * h + v, bits * (pair % per_slab))
    }

    /// Value `e` of row `r` of a packed block.
    pub(super) fn value(packed: &[u8], r: usize, e: usize) -> i32 {
        let mut q = 0;
        for (index, plane) in F::PLANES.iter().enumerate() {
            let (at, shift) = Self::plane_slot(index, r, e);
            q |= i32::from((packed[at] >> shift) & ((1 << plane.bits) - 1)) << plane.shift;
        }
        q
    }
}
