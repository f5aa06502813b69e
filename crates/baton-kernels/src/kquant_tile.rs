//! Micro-kernels for K-quant weights against activations quantized to Q8_K
//! ([`SuperActBlock`]): an `MR x NR` tile of dot products over whole rows,
//! written once for every [`KFormat`] through its common form (unsigned
//! integers per 32-value chunk, an integer scale and offset per group of 16).
//!
//! Per super-block and group `g`, the integer dot product `Σ q_w q_x` is
//! exact; it is multiplied by the group's integer scale and summed in i32
//! (AVX2: `maddubs` multiplies the unsigned weights by the signed
//! activations into pairs of i16, `madd` against the broadcast scales sums
//! pairs into i32). The offsets meet the activations' exact group sums:
//! `Σ_g min[g] · sum[g]`, subtracted in i32 when it shares the scale `d`
//! (Q6_K's `q - 32`, Q3_K's `q - 4`) or scaled by `dmin` otherwise. The i32 totals are
//! scaled by `d_w d_x` into f32 accumulators once per super-block, as in
//! GGML. Q8_K weights (signed) use the `|w| · sign(x, w)` identity.
//!
//! No i16 intermediate saturates: `maddubs` pairs stay below
//! `2 · 63 · 127` (Q6_K) or `2 · 128 · 127` (Q8_K), both under 2^15; Q2_K
//! and Q3_K's signed scales (`-32..=31`) fit i16 as Q6_K's do.
//!
//! AVX-512 (VNNI) takes two chunks per 512-bit register: `vpdpbusd` sums
//! four unsigned-by-signed products per i32 lane, `vpdpwssd` scales them
//! by their group's scale into the same exact i32 sums.

use crate::activation::SuperActBlock;
use crate::block_tiles::block_kernel;
use crate::quant::kquant::{KFormat, KOffset, CHUNKS, GROUPS, GROUP_ELEMS, SUPER_ELEMS};

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

block_kernel!(KFormat, SuperActBlock);

/// The weight integers of a super-block as i32, in element order.
fn integers<F: KFormat>(block: &[u8]) -> [i32; SUPER_ELEMS] {
    let mut q = [0i32; SUPER_ELEMS];
    for (c, q) in q.chunks_exact_mut(32).enumerate() {
        for (q, &byte) in q.iter_mut().zip(&F::chunk(block, c)) {
            *q = if F::OFFSET == KOffset::Zero { i32::from(byte as i8) } else { i32::from(byte) };
        }
    }
    q
}

/// # Safety
/// `acts` holds `MR * blocks` super-blocks; `w` rows `0..NR` (stride
/// `w_stride` bytes) hold `blocks` readable super-blocks of `F`.
unsafe fn tile_scalar<F: KFormat, const MR: usize, const NR: usize>(
    acts: &[SuperActBlock],
    blocks: usize,
    w: *const u8,
    w_stride: usize,
    out: &mut [[f32; NR]; MR],
) {
    *out = [[0.0; NR]; MR];
    for b in 0..blocks {
        for j in 0..NR {
            // SAFETY: super-block b of row j is inside `w` (caller's guarantee).
            let block = unsafe { std::slice::from_raw_parts(w.add(j * w_stride + b * F::BYTES), F::BYTES) };
            let s = F::scales(block);
            let q = integers::<F>(block);
            for (i, out_row) in out.iter_mut().enumerate() {
                let a = &acts[i * blocks + b];
                let (mut dot, mut offset) = (0i32, 0i32);
                for g in 0..GROUPS {
                    let range = g * GROUP_ELEMS..(g + 1) * GROUP_ELEMS;
                    let group: i32 = q[range.clone()].iter().zip(&a.q[range]).map(|(&w, &x)| w * i32::from(x)).sum();
                    dot += i32::from(s.scales[g]) * group;
                    offset += i32::from(s.mins[g]) * i32::from(a.sums[g]);
                }
                out_row[j] += match F::OFFSET {
                    KOffset::Centred(_) => (s.d * a.d) * (dot - offset) as f32,
                    KOffset::StoredMin => (s.d * a.d) * dot as f32 - (s.dmin * a.d) * offset as f32,
                    KOffset::Zero => (s.d * a.d) * dot as f32,
                };
            }
        }
    }
}

/// `shuffle_epi8` controls that turn 8 i16 scales (groups `8h..8h+8`,
/// repeated in both 128-bit lanes) into the scales of chunk `c`: group
/// `2c` in the low lane (elements 0..16 of the chunk), `2c + 1` in the high.
static SCALE_SHUFFLE: [[u8; 32]; CHUNKS] = scale_shuffle();

const fn scale_shuffle() -> [[u8; 32]; CHUNKS] {
    let mut table = [[0u8; 32]; CHUNKS];
    let mut c = 0;
    while c < CHUNKS {
        let mut k = 0;
        while k < 32 {
            let group = if k < 16 { (2 * c) % 8 } else { (2 * c + 1) % 8 };
            table[c][k] = (2 * group + k % 2) as u8;
            k += 1;
        }
        c += 1;
    }
    table
}

/// # Safety
/// As [`tile_scalar`], and the CPU has AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn tile_avx2<F: KFormat, const MR: usize, const NR: usize>(
    acts: &[SuperActBlock],
    blocks: usize,
    w: *const u8,
    w_stride: usize,
    out: &mut [[f32; NR]; MR],
) {
    use crate::simd::hsum;
    let mut acc = [[_mm256_setzero_ps(); NR]; MR];
    for b in 0..blocks {
        let mut rows = [w; NR];
        let (mut scales_low, mut scales_high) = ([_mm256_setzero_si256(); NR], [_mm256_setzero_si256(); NR]);
        let mut mins = [_mm256_setzero_si256(); NR];
        let (mut d, mut dmin) = ([0.0f32; NR], [0.0f32; NR]);
        for j in 0..NR {
            // SAFETY: super-block b of row j is inside `w` (caller's guarantee).
            rows[j] = unsafe { w.add(j * w_stride + b * F::BYTES) };
            // SAFETY: as above, `F::BYTES` readable bytes.
            let s = unsafe { F::scales_avx2(rows[j]) };
            scales_low[j] = _mm256_permute2x128_si256::<0x00>(s.scales, s.scales);
            scales_high[j] = _mm256_permute2x128_si256::<0x11>(s.scales, s.scales);
            mins[j] = s.mins;
            (d[j], dmin[j]) = (s.d, s.dmin);
        }
        let mut sums = [[_mm256_setzero_si256(); NR]; MR];
        // One chunk of 32 values; expanded for each constant `c` so that the
        // formats' shifts and offsets fold to immediates.
        macro_rules! chunk {
            ($c:expr) => {{
                const C: usize = $c;
                // SAFETY: each table row is 32 bytes.
                let control = unsafe { _mm256_loadu_si256(SCALE_SHUFFLE[C].as_ptr().cast()) };
                let mut quants = [_mm256_setzero_si256(); NR];
                let mut unsigned = [_mm256_setzero_si256(); NR];
                let mut scales = [_mm256_setzero_si256(); NR];
                for j in 0..NR {
                    // SAFETY: `rows[j]` is a whole super-block of `F`, `C < CHUNKS`.
                    quants[j] = unsafe { F::chunk_avx2(rows[j], C) };
                    unsigned[j] = if F::OFFSET == KOffset::Zero { _mm256_abs_epi8(quants[j]) } else { quants[j] };
                    scales[j] = _mm256_shuffle_epi8(if C < 4 { scales_low[j] } else { scales_high[j] }, control);
                }
                for i in 0..MR {
                    // SAFETY: `q` is 256 bytes and `C < 8`.
                    let x = unsafe { _mm256_loadu_si256(acts[i * blocks + b].q.as_ptr().add(32 * C).cast()) };
                    for j in 0..NR {
                        let signed = if F::OFFSET == KOffset::Zero { _mm256_sign_epi8(x, quants[j]) } else { x };
                        let pairs = _mm256_maddubs_epi16(unsigned[j], signed);
                        sums[i][j] = _mm256_add_epi32(sums[i][j], _mm256_madd_epi16(pairs, scales[j]));
                    }
                }
            }};
        }
        chunk!(0);
        chunk!(1);
        chunk!(2);
        chunk!(3);
        chunk!(4);
        chunk!(5);
        chunk!(6);
        chunk!(7);
        for i in 0..MR {
            let a = &acts[i * blocks + b];
            // SAFETY: `sums` is 16 i16 (32 bytes).
            let group_sums = unsafe { _mm256_loadu_si256(a.sums.as_ptr().cast()) };
            for j in 0..NR {
                let offsets = _mm256_madd_epi16(mins[j], group_sums);
                let scale = _mm256_set1_ps(d[j] * a.d);
                acc[i][j] = match F::OFFSET {
                    KOffset::Centred(_) => {
                        _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(sums[i][j], offsets)), scale, acc[i][j])
                    }
                    KOffset::StoredMin => {
                        let scaled = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[i][j]), scale, acc[i][j]);
                        _mm256_fnmadd_ps(_mm256_cvtepi32_ps(offsets), _mm256_set1_ps(dmin[j] * a.d), scaled)
                    }
                    KOffset::Zero => _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums[i][j]), scale, acc[i][j]),
                };
            }
        }
    }
    for i in 0..MR {
        for j in 0..NR {
            out[i][j] = hsum(acc[i][j]);
        }
    }
}

/// For each pair of chunks `p` (groups `4p..4p + 4`), the group of each i32
/// lane of a `vpdpbusd` result over those 64 values: 4 lanes per group.
static GROUP_OF_LANE: [[u32; 16]; CHUNKS / 2] = group_of_lane();

const fn group_of_lane() -> [[u32; 16]; CHUNKS / 2] {
    let mut table = [[0u32; 16]; CHUNKS / 2];
    let mut p = 0;
    while p < CHUNKS / 2 {
        let mut lane = 0;
        while lane < 16 {
            table[p][lane] = (4 * p + lane / 4) as u32;
            lane += 1;
        }
        p += 1;
    }
    table
}

/// Two chunks per step in 512-bit registers: `vpdpbusd` sums each four
/// products of unsigned weights and signed activations into an i32 lane
/// (at most `4 · 63 · 127 < 2^15`, so the lane's low i16 holds it), and
/// `vpdpwssd` multiplies that by the lane's group scale (an i16 over a zero
/// high half) into the i32 sums. Q8_K weights (signed, up to `4 · 128 · 127`)
/// take the AVX2 path, and so does a lone activation row against Q4_K or
/// Q5_K: there the unpacking of scales, mins and nibbles outweighs the
/// multiplies, and 256-bit code has three vector ports to 512-bit code's
/// two, so the AVX2 tile is the faster one.
///
/// Row invariance (see `matmul`): lane `l` of [`tile_avx2`]'s i32 sums holds
/// the same exact products as lanes `l` and `l + 8` here, so the two halves
/// are added in i32 (exact) and the rest (offsets, f32 scaling, the 8-lane
/// f32 accumulators and their final sum) is [`tile_avx2`]'s, operation for
/// operation: both tiles give the same bits, whichever one a tile shape
/// takes.
///
/// # Safety
/// As [`tile_scalar`], and the CPU has the `Isa::Avx512` features.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
unsafe fn tile_avx512<F: KFormat, const MR: usize, const NR: usize>(
    acts: &[SuperActBlock],
    blocks: usize,
    w: *const u8,
    w_stride: usize,
    out: &mut [[f32; NR]; MR],
) {
    if F::OFFSET == KOffset::Zero || (MR == 1 && F::OFFSET == KOffset::StoredMin) {
        // SAFETY: the caller's guarantees; the Avx512 level includes AVX2.
        return unsafe { tile_avx2::<F, MR, NR>(acts, blocks, w, w_stride, out) };
    }
    use crate::simd::hsum;
    let mut acc = [[_mm256_setzero_ps(); NR]; MR];
    for b in 0..blocks {
        let mut rows = [w; NR];
        let mut scales = [_mm512_setzero_si512(); NR];
        let mut mins = [_mm256_setzero_si256(); NR];
        let (mut d, mut dmin) = ([0.0f32; NR], [0.0f32; NR]);
        for j in 0..NR {
            // SAFETY: super-block b of row j is inside `w` (caller's guarantee).
            rows[j] = unsafe { w.add(j * w_stride + b * F::BYTES) };
            // SAFETY: as above, `F::BYTES` readable bytes.
            let s = unsafe { F::scales_avx2(rows[j]) };
            // Zero-extended: i32 lane g is scale g in its low i16.
            scales[j] = _mm512_cvtepu16_epi32(s.scales);
            mins[j] = s.mins;
            (d[j], dmin[j]) = (s.d, s.dmin);
        }
        let mut sums = [[_mm512_setzero_si512(); NR]; MR];
        // Chunks 2p and 2p + 1; expanded for each constant `p` so that the
        // formats' shifts and offsets fold to immediates.
        macro_rules! chunk_pair {
            ($p:expr) => {{
                const P: usize = $p;
                // SAFETY: each table row is 16 u32 (64 bytes).
                let index = unsafe { _mm512_loadu_si512(GROUP_OF_LANE[P].as_ptr().cast()) };
                let mut quants = [_mm512_setzero_si512(); NR];
                let mut lane_scales = [_mm512_setzero_si512(); NR];
                for j in 0..NR {
                    lane_scales[j] = _mm512_permutexvar_epi32(index, scales[j]);
                    // SAFETY: `rows[j]` is a whole super-block of `F`, `P < CHUNKS / 2`.
                    quants[j] = unsafe { F::chunk_pair_avx512(rows[j], P) };
                }
                for i in 0..MR {
                    // SAFETY: `q` is 256 bytes and `P < 4`.
                    let x = unsafe { _mm512_loadu_si512(acts[i * blocks + b].q.as_ptr().add(64 * P).cast()) };
                    for j in 0..NR {
                        let dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), quants[j], x);
                        sums[i][j] = _mm512_dpwssd_epi32(sums[i][j], dot, lane_scales[j]);
                    }
                }
            }};
        }
        chunk_pair!(0);
        chunk_pair!(1);
        chunk_pair!(2);
        chunk_pair!(3);
        for i in 0..MR {
            let a = &acts[i * blocks + b];
            // SAFETY: `sums` is 16 i16 (32 bytes).
            let group_sums = unsafe { _mm256_loadu_si256(a.sums.as_ptr().cast()) };
            for j in 0..NR {
                // Lanes l and l + 8: the products of AVX2's lane l (above).
                let lanes =
                    _mm256_add_epi32(_mm512_castsi512_si256(sums[i][j]), _mm512_extracti64x4_epi64::<1>(sums[i][j]));
                // From here on [`tile_avx2`]'s operations, in its order.
                let offsets = _mm256_madd_epi16(mins[j], group_sums);
                let scale = _mm256_set1_ps(d[j] * a.d);
                acc[i][j] = match F::OFFSET {
                    KOffset::Centred(_) => {
                        _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(lanes, offsets)), scale, acc[i][j])
                    }
                    KOffset::StoredMin => {
                        let scaled = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lanes), scale, acc[i][j]);
                        _mm256_fnmadd_ps(_mm256_cvtepi32_ps(offsets), _mm256_set1_ps(dmin[j] * a.d), scaled)
                    }
                    KOffset::Zero => unreachable!("Q8_K weights take the AVX2 path"),
                };
            }
        }
    }
    for i in 0..MR {
        for j in 0..NR {
            out[i][j] = hsum(acc[i][j]);
        }
    }
}
