//! The K-quants' packed form (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K), written once
//! for every format through a description of where its bits live
//! ([`KPack`]).
//!
//! # A packed super-block (8 weight rows, 256 values each)
//!
//! - **Planes** of value bits, lowest first (Q4_K: one of 4 bits; Q5_K: 4 +
//!   1; Q6_K: 4 + 2; Q3_K: 2 + 1; Q2_K: 2). Values are taken 8 at a time
//!   ("pairs", two steps of 4): pair `P` of all 8 rows is 64 bytes, byte
//!   `8r + 4h + v` holding value `8P + 4h + v` of row `r`, so one 32-bit
//!   lane `(r, h)` holds 4 consecutive values of one row. A plane of `b`
//!   bits keeps `8 / b` pairs in each 64 bytes: pair `P` at bits
//!   `b (P mod 8/b)` of slab `P / (8/b)` (4-bit values stay nibbles).
//! - **Scales**: one `i8` per row and scale sub-block (`SUB` values: 32 for
//!   Q4_K/Q5_K, 16 for the others), sub-block by sub-block, 8 bytes each.
//! - **Offsets**: the integers that meet the activations' sums (the mins
//!   for Q2_K/Q4_K/Q5_K, the scales again for the centred Q3_K/Q6_K), 4
//!   sub-blocks of a row together: byte `32t + 4r + j` is sub-block
//!   `4t + j` of row `r`, so an i32 lane `(r, h)` of `vpmaddwd` pairs
//!   sub-blocks `4t + 2h` and `4t + 2h + 1`.
//! - `d` (and `dmin` where the format has mins) of the 8 rows as f16 bits.
//!
//! Every bit of a GGUF super-block lands in exactly one place, so unpacking
//! gives the GGUF bytes back bit for bit. Packed sizes against GGUF's (8
//! rows): Q4_K 1184/1152 (1.028), Q5_K 1440/1408 (1.023), Q6_K 1808/1680
//! (1.076), Q3_K 1040/880 (1.18), Q2_K 800/672 (1.19).
//!
//! # The tile
//!
//! Each vector lane is one `(row, h)` of the group, so a step multiplies a
//! 64-byte (AVX-512) or 32-byte (AVX2, 4 rows) vector of weights by 4
//! activation bytes broadcast to every lane (`vpdpbusd`, or `maddubs` on
//! AVX2), sums a sub-block in integers, scales it by the lanes' integer
//! scales exactly in i32 (`vpdpwssd`/`madd`), and once per super-block
//! subtracts the offsets times the activations' sub-block sums and scales
//! the total by `d · d_x` in f32, 16 lanes at a time. No horizontal sums:
//! the two lanes of a row are added once, at the end. Every activation row
//! goes through the same operations whatever `MR` is (row invariance).

use baton_core::DType;

use super::format::{PackedFormat, GROUP_ROWS};
use crate::activation::SuperActBlock;
use crate::isa::Isa;
use crate::quant::kquant::{GROUPS, SUPER_ELEMS};
use crate::tiling::Activations;

mod kpack;
mod layout;
#[cfg(target_arch = "x86_64")]
mod x86;

use kpack::KPack;
pub(crate) use layout::PackedK;

/// The 8 bytes of `bytes` from `at`, little-endian.
fn read_u64(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

impl<F: KPack> PackedFormat for PackedK<F> {
    const DTYPE: DType = F::DTYPE;
    const BLOCK_ELEMS: usize = SUPER_ELEMS;
    const BLOCK_BYTES: usize = F::BYTES;
    const PACKED_BYTES: usize = Self::D + if Self::HAS_MIN { 32 } else { 16 };

    fn pack_block(rows: &[&[u8]; GROUP_ROWS], out: &mut [u8]) {
        let () = Self::_CHECKS;
        out.fill(0);
        for (r, block) in rows.iter().enumerate() {
            // A pair's 8 values are the same bits of 8 consecutive GGUF
            // bytes (every format keeps runs of 32 values in 32 bytes, see
            // `pairs_are_eight_consecutive_bytes`), and land in 8
            // consecutive packed bytes: a pair moves as one u64, its bits
            // shifted and masked in every byte at once.
            for (index, plane) in F::PLANES.iter().enumerate() {
                let mask = u64::from_ne_bytes([(1u8 << plane.bits) - 1; 8]);
                for pair in 0..SUPER_ELEMS / 8 {
                    let (byte, shift) = F::source(index, 8 * pair);
                    let (at, to) = Self::plane_slot(index, r, 8 * pair);
                    let values = (read_u64(block, byte) >> shift) & mask;
                    let packed = read_u64(out, at) | (values << to);
                    out[at..at + 8].copy_from_slice(&packed.to_le_bytes());
                }
            }
            let (scales, offsets) = F::scales_offsets(block);
            for s in 0..Self::SUBS {
                out[Self::SCALES + 8 * s + r] = scales[s] as u8;
                out[Self::OFFSETS + 32 * (s / 4) + 4 * r + s % 4] = offsets[s] as u8;
            }
            out[Self::D + 2 * r..][..2].copy_from_slice(&block[F::D_AT..][..2]);
            if Self::HAS_MIN {
                out[Self::DMIN + 2 * r..][..2].copy_from_slice(&block[F::DMIN_AT..][..2]);
            }
        }
    }

    fn unpack_block(packed: &[u8], r: usize, out: &mut [u8]) {
        out.fill(0);
        for (index, plane) in F::PLANES.iter().enumerate() {
            let mask = (1u8 << plane.bits) - 1;
            for e in 0..SUPER_ELEMS {
                let (byte, shift) = F::source(index, e);
                let (at, from) = Self::plane_slot(index, r, e);
                out[byte] |= ((packed[at] >> from) & mask) << shift;
            }
        }
        let scales = std::array::from_fn(|s| if s < Self::SUBS { packed[Self::SCALES + 8 * s + r] as i8 } else { 0 });
        let offsets = std::array::from_fn(|s| {
            if s < Self::SUBS {
                packed[Self::OFFSETS + 32 * (s / 4) + 4 * r + s % 4] as i8
            } else {
                0
            }
        });
        F::put_scales(&scales, &offsets, out);
        out[F::D_AT..][..2].copy_from_slice(&packed[Self::D + 2 * r..][..2]);
        if Self::HAS_MIN {
            out[F::DMIN_AT..][..2].copy_from_slice(&packed[Self::DMIN + 2 * r..][..2]);
        }
    }

    unsafe fn tile<const MR: usize>(
        isa: Isa,
        acts: Activations<'_>,
        blocks: usize,
        group: *const u8,
        out: &mut [[f32; GROUP_ROWS]; MR],
    ) {
        let Activations::SuperBlocks(acts) = acts else { unreachable!("K-quant weights get Q8_K activations") };
        debug_assert!(acts.len() >= MR * blocks);
        match isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the caller's guarantees (PackedFormat::tile); `isa`
            // came from detection, so the CPU has the AVX-512 level.
            Isa::Avx512 => unsafe { x86::tile_avx512::<F, MR>(acts, blocks, group, out) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above, the CPU has AVX2, FMA, F16C and AVX-VNNI.
            Isa::AvxVnni => unsafe { x86::tile_avx_vnni::<F, MR>(acts, blocks, group, out) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above, the CPU has AVX2, FMA and F16C.
            Isa::Avx2 => unsafe { x86::tile_avx2::<F, MR>(acts, blocks, group, out) },
            // SAFETY: as above.
            _ => unsafe { tile_scalar::<F, MR>(acts, blocks, group, out) },
        }
    }
}

/// The activations' sums over each scale sub-block (first `256 / SUB`).
#[inline(always)]
pub(crate) fn sub_sums<F: KPack>(a: &SuperActBlock) -> [i16; GROUPS] {
    let per = F::SUB / 16;
    std::array::from_fn(|s| if s * per < GROUPS { (0..per).map(|g| a.sums[s * per + g]).sum() } else { 0 })
}

/// The f32 value of f16 bits at `at`.
fn f16_at(block: &[u8], at: usize) -> f32 {
    half::f16::from_bits(u16::from_le_bytes([block[at], block[at + 1]])).to_f32()
}

/// The portable tile: per lane `(r, h)`, the same integer sums as the SIMD
/// tiles and the same f32 steps (unfused).
///
/// # Safety
/// `acts` holds `MR * blocks` super-blocks; `group` is readable for
/// `blocks` packed blocks.
unsafe fn tile_scalar<F: KPack, const MR: usize>(
    acts: &[SuperActBlock],
    blocks: usize,
    group: *const u8,
    out: &mut [[f32; GROUP_ROWS]; MR],
) {
    let bytes = PackedK::<F>::PACKED_BYTES;
    let mut acc = [[0.0f32; 2 * GROUP_ROWS]; MR];
    for b in 0..blocks {
        // SAFETY: block b of the group is readable (caller's guarantee).
        let packed = unsafe { std::slice::from_raw_parts(group.add(b * bytes), bytes) };
        for (i, acc) in acc.iter_mut().enumerate() {
            let a = &acts[i * blocks + b];
            let sums = sub_sums::<F>(a);
            for (lane, acc) in acc.iter_mut().enumerate() {
                let (r, h) = (lane / 2, lane % 2);
                let (mut dot, mut offset) = (0i32, 0i32);
                for s in 0..PackedK::<F>::SUBS {
                    let pairs = s * PackedK::<F>::PAIRS_PER_SUB..(s + 1) * PackedK::<F>::PAIRS_PER_SUB;
                    let sum: i32 = pairs
                        .flat_map(|pair| (0..4).map(move |v| 8 * pair + 4 * h + v))
                        .map(|e| PackedK::<F>::value(packed, r, e) * i32::from(a.q[e]))
                        .sum();
                    dot += sum * i32::from(packed[PackedK::<F>::SCALES + 8 * s + r] as i8);
                    if (s % 4) / 2 == h {
                        let at = PackedK::<F>::OFFSETS + 32 * (s / 4) + 4 * r + s % 4;
                        offset += i32::from(packed[at] as i8) * i32::from(sums[s]);
                    }
                }
                let scale = f16_at(packed, PackedK::<F>::D + 2 * r) * a.d;
                *acc = if PackedK::<F>::HAS_MIN {
                    let with_dot = *acc + dot as f32 * scale;
                    with_dot - offset as f32 * (f16_at(packed, PackedK::<F>::DMIN + 2 * r) * a.d)
                } else {
                    *acc + (dot - (offset << PackedK::<F>::CENTRE_SHIFT)) as f32 * scale
                };
            }
        }
    }
    for (out, acc) in out.iter_mut().zip(&acc) {
        for (r, out) in out.iter_mut().enumerate() {
            *out = acc[2 * r] + acc[2 * r + 1];
        }
    }
}

#[cfg(test)]
mod tests {
    use baton_core::parallel::SingleThread;

    use super::kpack::KPack;
    use super::PackedK;
    use crate::quant::kquant::{Q4K, Q5K, Q6K, SUPER_ELEMS};
    use crate::quant::kquant_low_bits::{Q2K, Q3K};

    /// What `pack_block` relies on to move a pair as one u64: its 8 values
    /// are the same bits of 8 consecutive GGUF bytes, and go to 8
    /// consecutive packed bytes at one shift.
    fn pairs_are_eight_consecutive_bytes<F: KPack>() {
        for (index, plane) in F::PLANES.iter().enumerate() {
            assert!(8 % plane.bits == 0, "a plane's pairs fill whole bytes");
            for pair in 0..SUPER_ELEMS / 8 {
                let (byte, shift) = F::source(index, 8 * pair);
                assert!(shift + plane.bits <= 8);
                for r in 0..8 {
                    let (at, to) = PackedK::<F>::plane_slot(index, r, 8 * pair);
                    for j in 0..8 {
                        assert_eq!(F::source(index, 8 * pair + j), (byte + j, shift), "plane {index} pair {pair}");
                        assert_eq!(PackedK::<F>::plane_slot(index, r, 8 * pair + j), (at + j, to));
                    }
                }
            }
        }
    }

    #[test]
    fn every_k_quant_keeps_a_pair_in_eight_consecutive_bytes() {
        pairs_are_eight_consecutive_bytes::<Q2K>();
        pairs_are_eight_consecutive_bytes::<Q3K>();
        pairs_are_eight_consecutive_bytes::<Q4K>();
        pairs_are_eight_consecutive_bytes::<Q5K>();
        pairs_are_eight_consecutive_bytes::<Q6K>();
    }

    use crate::{matmul, matmul_packed, quantize_row, DType, MatMut, MatRef, PackedWeights, Scratch, WeightMatrix};

    /// Small enough for Miri (the portable tile there): 9 rows (a padded
    /// second group), one super-block, 5 activation rows (tiles of 4 and 1).
    #[test]
    fn small_packed_products_match_unpacked_and_rows_unpack() {
        let (n, k, m) = (9, 256, 5);
        let value = |i: usize| ((i * 37 % 101) as f32 - 50.0) / 25.0;
        let x: Vec<f32> = (0..m * k).map(|i| value(i + 7)).collect();
        for dtype in [DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K] {
            let row_bytes = dtype.block_bytes();
            let mut bytes = vec![0u8; n * row_bytes];
            for (r, row) in bytes.chunks_exact_mut(row_bytes).enumerate() {
                let src: Vec<f32> = (0..k).map(|i| value(i * (r + 1))).collect();
                quantize_row(dtype, &src, row).expect("sizes match");
            }
            let w = WeightMatrix::contiguous(dtype, &bytes, n, k).expect("whole blocks");
            let packed = PackedWeights::pack(&w, &SingleThread).expect("valid").expect("packable");
            let mut out = vec![0u8; row_bytes];
            for (r, want) in bytes.chunks_exact(row_bytes).enumerate() {
                packed.unpack_row(r, &mut out).expect("in range");
                assert_eq!(out, want, "{dtype} row {r}");
            }
            let (mut y, mut want) = (vec![0.0f32; m * n], vec![0.0f32; m * n]);
            let x = MatRef::contiguous(&x, m, k);
            let mut scratch = Scratch::new();
            matmul_packed(&SingleThread, &packed, &x, &mut MatMut::contiguous(&mut y, m, n), &mut scratch)
                .expect("shapes match");
            matmul(&SingleThread, &w, &x, &mut MatMut::contiguous(&mut want, m, n), &mut scratch).expect("shapes");
            for (a, b) in y.iter().zip(&want) {
                assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "{dtype}: packed {a}, unpacked {b}");
            }
        }
    }
}
