//! The packed form of the 32-value block formats (Q8_0, Q4_0, Q4_1, Q5_0,
//! Q5_1, MXFP4), written once over [`BlockFormat`], and its tiles.
//!
//! # Packed block (8 rows, the same bytes as the 8 GGUF blocks)
//!
//! 1. The 8 rows' f16 scales `d` (16 bytes), row `r` at byte `2 r`; for
//!    MXFP4 their E8M0 bytes (8 bytes), row `r` at byte `r`.
//! 2. Q4_1, Q5_1: the 8 f16 minimums (16 bytes), likewise.
//! 3. Q5_0, Q5_1: the fifth bits (32 bytes): bit `s` of byte `4 r + t` is
//!    the fifth bit of element `4 s + t` of row `r`, so the fifth bits of a
//!    step (below) are one shift and one mask away.
//! 4. The integers, in steps of 4 consecutive elements: a 32-byte chunk
//!    holds 4 bytes of each of the 8 rows, row `r` at bytes `4 r..4 r + 4`.
//!    Q8_0: chunk `s` holds elements `4 s..4 s + 4` (8 chunks). Q4 and Q5
//!    keep GGUF's nibble pairs: chunk `c` holds bytes `4 c..4 c + 4` of each
//!    row's nibbles, i.e. elements `4 c + t` in the low nibbles and
//!    `16 + 4 c + t` in the high ones (4 chunks, steps `c` and `c + 4`).
//!    MXFP4's nibbles are codes, looked up in its table (a byte shuffle)
//!    once unpacked.
//!
//! So a step's weights are one 256-bit vector whose 32-bit lanes are the 8
//! rows, multiplied by the activations' 4 bytes of that step broadcast to
//! every lane (`maddubs` + `madd` on AVX2, `vpdpbusd` on AVX-512, which
//! for one activation row takes two steps per 512-bit register, one per
//! half, and adds the halves at the block's end; for several rows it takes
//! two neighbouring groups at once, one step of 16 weight rows per
//! register, `avx512_pair`). Each lane's integer dot product is exact; per block,
//! once for the 8 rows: `acc = fma(dot, d_w d_x, acc)`, and in a second
//! chain the offset (`-8 d_w`, `-16 d_w`, the minimum; `-128 d_w` for Q8_0
//! on AVX-512, whose weights enter as `w + 128`) `off = fma(offset, sum_x,
//! off)`; the output is `acc + off`. The
//! portable tile does the same f32 operations, so every level gives the same
//! bits, except Q8_0 on AVX-512 (AVX2 and the portable tile take Q8_0's
//! signed bytes as they are: no offset).

use baton_core::DType;

use super::format::{two_tiles, PackedFormat, GROUP_ROWS};
use crate::activation::ActBlock;
use crate::isa::Isa;
use crate::quant::{BlockFormat, Offset, Quants, BLOCK_ELEMS};
use crate::tiling::Activations;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
#[cfg(target_arch = "x86_64")]
mod avx512_pair;
mod layout;

pub(crate) use layout::Blocks;
use layout::{CHUNK, STEP, STEPS};

/// The scales' (and minimums') positions, shared by pack and unpack:
/// `(offset in the GGUF block, offset in the packed block, bytes)` of row
/// `r`'s.
fn halves<F: BlockFormat>(r: usize) -> impl Iterator<Item = (usize, usize, usize)> {
    let scale = Blocks::<F>::SCALE_BYTES;
    let min = Blocks::<F>::HAS_MIN.then_some((2, Blocks::<F>::MINS + 2 * r, 2));
    std::iter::once((0, scale * r, scale)).chain(min)
}

impl<F: BlockFormat> PackedFormat for Blocks<F> {
    const DTYPE: DType = F::DTYPE;
    const BLOCK_ELEMS: usize = BLOCK_ELEMS;
    const BLOCK_BYTES: usize = F::BYTES;
    const PACKED_BYTES: usize = Self::QUANTS + Self::CHUNKS * CHUNK;

    fn pack_block(rows: &[&[u8]; GROUP_ROWS], out: &mut [u8]) {
        for (r, block) in rows.iter().enumerate() {
            for (from, to, bytes) in halves::<F>(r) {
                out[to..to + bytes].copy_from_slice(&block[from..from + bytes]);
            }
            for c in 0..Self::CHUNKS {
                out[Self::QUANTS + c * CHUNK + r * STEP..][..STEP].copy_from_slice(&block[F::QS + c * STEP..][..STEP]);
            }
            if let Quants::NibblesHighBits(qh) = F::QUANTS {
                let bits = u32::from_le_bytes([block[qh], block[qh + 1], block[qh + 2], block[qh + 3]]);
                for t in 0..STEP {
                    let byte = (0..STEPS).fold(0u8, |byte, s| byte | ((((bits >> (STEP * s + t)) & 1) as u8) << s));
                    out[Self::HIGH + r * STEP + t] = byte;
                }
            }
        }
    }

    fn unpack_block(packed: &[u8], r: usize, out: &mut [u8]) {
        for (from, to, bytes) in halves::<F>(r) {
            out[from..from + bytes].copy_from_slice(&packed[to..to + bytes]);
        }
        for c in 0..Self::CHUNKS {
            out[F::QS + c * STEP..][..STEP].copy_from_slice(&packed[Self::QUANTS + c * CHUNK + r * STEP..][..STEP]);
        }
        if let Quants::NibblesHighBits(qh) = F::QUANTS {
            let bits = (0..BLOCK_ELEMS).fold(0u32, |bits, j| {
                let byte = packed[Self::HIGH + r * STEP + j % STEP];
                bits | (u32::from((byte >> (j / STEP)) & 1) << j)
            });
            out[qh..qh + 4].copy_from_slice(&bits.to_le_bytes());
        }
    }

    #[inline]
    unsafe fn tile<const MR: usize>(
        isa: Isa,
        acts: Activations<'_>,
        blocks: usize,
        group: *const u8,
        out: &mut [[f32; GROUP_ROWS]; MR],
    ) {
        let Activations::Blocks(acts) = acts else { unreachable!("{} weights get Q8 blocks", F::DTYPE) };
        debug_assert!(acts.len() >= MR * blocks);
        match isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the caller's guarantees (PackedFormat::tile); `isa`
            // came from detection, so the CPU has AVX-512 F, BW, VL, DQ,
            // VNNI besides AVX2, FMA and F16C.
            Isa::Avx512 => unsafe { avx512::tile::<F, MR>(acts, blocks, group, out) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above; the CPU has AVX2, FMA, F16C and AVX-VNNI.
            Isa::AvxVnni => unsafe { avx2::tile_vnni::<F, MR>(acts, blocks, group, out) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above; the CPU has AVX2, FMA and F16C.
            Isa::Avx2 => unsafe { avx2::tile::<F, MR>(acts, blocks, group, out) },
            // SAFETY: as above.
            _ => unsafe { tile_scalar::<F, MR>(acts, blocks, group, out) },
        }
    }

    fn pairs_faster(isa: Isa, rows: usize) -> bool {
        cfg!(target_arch = "x86_64") && isa == Isa::Avx512 && rows >= 2
    }

    unsafe fn tile_pair<const MR: usize>(
        isa: Isa,
        acts: Activations<'_>,
        blocks: usize,
        groups: [*const u8; 2],
        out: &mut [[f32; 2 * GROUP_ROWS]; MR],
    ) {
        match (isa, acts) {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the caller's guarantees (PackedFormat::tile_pair);
            // `isa` came from detection, so the CPU has AVX-512 F, BW, VL,
            // DQ, VNNI besides AVX2, FMA and F16C.
            (Isa::Avx512, Activations::Blocks(acts)) if MR >= 2 => unsafe {
                debug_assert!(acts.len() >= MR * blocks);
                avx512_pair::tile_pair::<F, MR>(acts, blocks, groups, out)
            },
            // SAFETY: forwarded; one group at a time.
            _ => unsafe { two_tiles::<Self, MR>(isa, acts, blocks, groups, out) },
        }
    }
}

/// The portable tile: the SIMD tiles' operations lane by lane.
///
/// # Safety
/// `acts` holds `MR * blocks` blocks; `group` is readable for `blocks`
/// packed blocks of `F`.
unsafe fn tile_scalar<F: BlockFormat, const MR: usize>(
    acts: &[ActBlock],
    blocks: usize,
    group: *const u8,
    out: &mut [[f32; GROUP_ROWS]; MR],
) {
    let bytes = Blocks::<F>::PACKED_BYTES;
    // SAFETY: `blocks` packed blocks are readable at `group` (caller's
    // guarantee).
    let group = unsafe { std::slice::from_raw_parts(group, blocks * bytes) };
    // Per row and weight row: the scaled dot products' chain, the offsets'.
    let mut acc = [[[0.0f32; 2]; GROUP_ROWS]; MR];
    for (b, p) in group.chunks_exact(bytes).enumerate() {
        let q: [[i32; BLOCK_ELEMS]; GROUP_ROWS] =
            std::array::from_fn(|r| std::array::from_fn(|j| Blocks::<F>::quant(p, r, j)));
        for (i, acc) in acc.iter_mut().enumerate() {
            let a = &acts[i * blocks + b];
            for (r, acc) in acc.iter_mut().enumerate() {
                let dot: i32 = q[r].iter().zip(&a.q).map(|(&w, &x)| w * i32::from(x)).sum();
                let d = Blocks::<F>::scale(p, r);
                acc[0] = (dot as f32).mul_add(d * a.d, acc[0]);
                let offset = match F::OFFSET {
                    Offset::Zero => continue,
                    Offset::Centred(centre) => -(centre as f32) * d,
                    Offset::StoredMin => Blocks::<F>::half(p, Blocks::<F>::MINS + 2 * r),
                };
                acc[1] = offset.mul_add(a.sum, acc[1]);
            }
        }
    }
    for (out, acc) in out.iter_mut().zip(&acc) {
        for (out, acc) in out.iter_mut().zip(acc) {
            *out = acc[0] + acc[1];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::{MXFP4, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0};

    /// Packing keeps the size, round-trips every byte, and the portable
    /// read of the layout gives each row's integers.
    fn layout<F: BlockFormat>() {
        assert_eq!(Blocks::<F>::PACKED_BYTES, GROUP_ROWS * F::BYTES, "{}: same bytes as GGUF", F::DTYPE);
        let mut seed = 0x1234_5678u32;
        let rows: Vec<Vec<u8>> = (0..GROUP_ROWS)
            .map(|_| {
                (0..F::BYTES)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 17;
                        seed ^= seed << 5;
                        seed as u8
                    })
                    .collect()
            })
            .collect();
        let refs: [&[u8]; GROUP_ROWS] = std::array::from_fn(|r| &rows[r][..]);
        let mut packed = vec![0u8; Blocks::<F>::PACKED_BYTES];
        Blocks::<F>::pack_block(&refs, &mut packed);
        for (r, row) in rows.iter().enumerate() {
            let mut back = vec![0u8; F::BYTES];
            Blocks::<F>::unpack_block(&packed, r, &mut back);
            assert_eq!(&back, row, "{} row {r}", F::DTYPE);
            for j in 0..BLOCK_ELEMS {
                assert_eq!(Blocks::<F>::quant(&packed, r, j), F::quant(row, j), "{} row {r} element {j}", F::DTYPE);
            }
        }
    }

    #[test]
    fn packed_blocks_round_trip_and_keep_their_size() {
        layout::<Q8_0>();
        layout::<Q4_0>();
        layout::<Q4_1>();
        layout::<Q5_0>();
        layout::<Q5_1>();
        layout::<MXFP4>();
    }

    /// The portable tile (the one Miri runs) against the decoded weights
    /// times the quantized activations in f64, on 3 activation rows and 2
    /// blocks.
    fn portable_tile<F: BlockFormat>() {
        const BLOCKS: usize = 2;
        const MR: usize = 3;
        let mut seed = 0x2468_ace1u32;
        let mut rand = move || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed as f32 / u32::MAX as f32 - 0.5
        };
        let rows: Vec<Vec<u8>> = (0..GROUP_ROWS * BLOCKS)
            .map(|_| {
                let mut block = vec![0u8; F::BYTES];
                F::quantize_block(&std::array::from_fn(|_| rand()), &mut block);
                block
            })
            .collect();
        let mut packed = vec![0u8; BLOCKS * Blocks::<F>::PACKED_BYTES];
        for (b, out) in packed.chunks_exact_mut(Blocks::<F>::PACKED_BYTES).enumerate() {
            Blocks::<F>::pack_block(&std::array::from_fn(|r| &rows[r * BLOCKS + b][..]), out);
        }
        let x: Vec<f32> = (0..MR * BLOCKS * BLOCK_ELEMS).map(|_| rand()).collect();
        let mut acts = vec![ActBlock::default(); MR * BLOCKS];
        crate::activation::quantize_activations(Isa::Scalar, &x, &mut acts);
        let mut out = [[0.0f32; GROUP_ROWS]; MR];
        // SAFETY: `acts` holds MR rows of BLOCKS blocks, `packed` BLOCKS
        // packed blocks; the portable level runs on any CPU.
        unsafe { Blocks::<F>::tile::<MR>(Isa::Scalar, Activations::Blocks(&acts), BLOCKS, packed.as_ptr(), &mut out) };
        for (i, out) in out.iter().enumerate() {
            for (r, &got) in out.iter().enumerate() {
                let (mut want, mut scale) = (0.0f64, 0.0f64);
                for b in 0..BLOCKS {
                    let mut w = [0.0f32; BLOCK_ELEMS];
                    F::dequantize_block(&rows[r * BLOCKS + b], &mut w);
                    let a = &acts[i * BLOCKS + b];
                    for (&w, &q) in w.iter().zip(&a.q) {
                        let term = f64::from(w) * f64::from(a.d) * f64::from(q);
                        want += term;
                        scale += term.abs();
                    }
                }
                let diff = (f64::from(got) - want).abs();
                assert!(diff <= 1e-5 * scale, "{} row {i} column {r}: {got} vs {want}", F::DTYPE);
            }
        }
    }

    #[test]
    fn the_portable_tile_multiplies_the_packed_rows() {
        portable_tile::<Q8_0>();
        portable_tile::<Q4_0>();
        portable_tile::<Q4_1>();
        portable_tile::<Q5_0>();
        portable_tile::<Q5_1>();
        portable_tile::<MXFP4>();
    }

    #[test]
    fn i16_sums_hold_every_format() {
        assert_eq!(Blocks::<Q8_0>::I16_STEPS, 1);
        assert_eq!(Blocks::<Q4_0>::I16_STEPS, 8);
        assert_eq!(Blocks::<Q5_1>::I16_STEPS, 4);
        assert_eq!(Blocks::<MXFP4>::I16_STEPS, 5);
    }
}
