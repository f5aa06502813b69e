//! The packed K-quant tiles for AVX2 and AVX-512 (see the parent module for
//! the layout). A lane `(r, h)` holds row `r`'s values `8P + 4h .. + 4` of
//! each pair `P`; both levels do the same exact integer sums per lane and
//! the same f32 operations per super-block, so they agree bit for bit.
//!
//! AVX-512: `vpdpbusd` sums 4 products per lane; [`PackedK::CHAIN`] pairs
//! of them stay below 2^15 (at most `4 · CHAIN · qmax · 127`), so
//! `vpdpwssd` multiplies them by the lane's scale (an i16 over a zero high
//! half) into the exact i32 total. AVX2: `maddubs` sums 2 products per i16
//! (at most `2 · 63 · 127`), a sub-block's pairs add in i16 (checked at
//! compile time: `2 · pairs · qmax · 127 < 2^15`), and `madd` against the
//! scale repeated in both i16 halves gives the same i32 total. A 256-bit
//! vector holds 4 rows; tiles of up to 2 activation rows take both 4-row
//! halves in one pass (one activation broadcast, scale load and loop for
//! both), larger ones a half at a time (16 registers). The integer sums
//! are exact and the f32 steps per lane the same either way, so the pass
//! structure changes no bit.

use std::arch::x86_64::*;

use super::kpack::KPack;
use super::layout::PackedK;
use crate::activation::SuperActBlock;
use crate::packed::format::{PackedFormat, GROUP_ROWS};
use crate::simd::{prefetch_lines, vnni, PREFETCH_AHEAD};

/// The 64-bit word at `at` (4 activation bytes of each lane half, or 4 i16
/// sums), unaligned.
///
/// # Safety
/// 8 bytes at `at` are readable.
#[inline(always)]
unsafe fn word<T>(at: *const T) -> i64 {
    // SAFETY: the caller's guarantee.
    unsafe { at.cast::<i64>().read_unaligned() }
}

/// The weights of pair `8o + p` of a packed block (`p` a constant once
/// unrolled, so the shifts fold to immediates), the 64 bytes at `block`.
///
/// # Safety
/// `block` is a whole packed block of `F`; `o < 4`, `p < 8`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
#[inline]
unsafe fn pair_512<F: KPack>(block: *const u8, o: usize, p: usize) -> __m512i {
    let mut value = _mm512_setzero_si512();
    for (index, plane) in F::PLANES.iter().enumerate() {
        let per_slab = 8 / plane.bits;
        let at = PackedK::<F>::plane_at(index) + 64 * ((8 * o + p) / per_slab);
        // SAFETY: slab `(8o + p) / per_slab` of the plane is inside the block.
        let slab = unsafe { _mm512_loadu_si512(block.add(at).cast()) };
        let from = plane.bits * (p % per_slab);
        let moved = if from >= plane.shift {
            _mm512_srl_epi16(slab, _mm_cvtsi64_si128((from - plane.shift) as i64))
        } else {
            _mm512_sll_epi16(slab, _mm_cvtsi64_si128((plane.shift - from) as i64))
        };
        let mask = (((1u32 << plane.bits) - 1) << plane.shift) as i8;
        value = _mm512_or_si512(value, _mm512_and_si512(moved, _mm512_set1_epi8(mask)));
    }
    value
}

/// [`pair_512`]'s half `half` (rows `4 half .. 4 half + 4`), 32 bytes.
///
/// # Safety
/// As [`pair_512`], and `half < 2`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn pair_256<F: KPack>(block: *const u8, half: usize, o: usize, p: usize) -> __m256i {
    let mut value = _mm256_setzero_si256();
    for (index, plane) in F::PLANES.iter().enumerate() {
        let per_slab = 8 / plane.bits;
        let at = PackedK::<F>::plane_at(index) + 64 * ((8 * o + p) / per_slab) + 32 * half;
        // SAFETY: that half of the slab is inside the block.
        let slab = unsafe { _mm256_loadu_si256(block.add(at).cast()) };
        let from = plane.bits * (p % per_slab);
        let moved = if from >= plane.shift {
            _mm256_srl_epi16(slab, _mm_cvtsi64_si128((from - plane.shift) as i64))
        } else {
            _mm256_sll_epi16(slab, _mm_cvtsi64_si128((plane.shift - from) as i64))
        };
        let mask = (((1u32 << plane.bits) - 1) << plane.shift) as i8;
        value = _mm256_or_si256(value, _mm256_and_si256(moved, _mm256_set1_epi8(mask)));
    }
    value
}

/// The 8 rows' f16 at `at`, each repeated for the row's two lanes, as f32.
///
/// # Safety
/// 16 bytes at `at` are readable.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
#[inline]
unsafe fn f16_lanes_512(at: *const u8) -> __m512 {
    // SAFETY: the caller's guarantee.
    let v = unsafe { _mm_loadu_si128(at.cast()) };
    _mm512_cvtph_ps(_mm256_set_m128i(_mm_unpackhi_epi16(v, v), _mm_unpacklo_epi16(v, v)))
}

/// The scales of one sub-block (8 `i8` at `at`) in lanes `(r, h)`: the
/// sign-extended i16 in the low half, zero in the high half.
///
/// # Safety
/// 8 bytes at `at` are readable.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
#[inline]
unsafe fn scales_512<F: KPack>(at: *const u8) -> __m512i {
    // SAFETY: the caller's guarantee.
    let v = unsafe { _mm_loadl_epi64(at.cast()) };
    let doubled = _mm_unpacklo_epi8(v, v);
    if PackedK::<F>::HAS_MIN {
        // Formats with mins have unsigned scales: one widening.
        _mm512_cvtepu8_epi32(doubled)
    } else {
        _mm512_cvtepu16_epi32(_mm256_cvtepi8_epi16(doubled))
    }
}

/// `acc + Σ a·b` over each i32 lane's two i16 pairs (`vpdpwssd`), written
/// as the instruction itself: LLVM splits the intrinsic into `vpmaddwd` +
/// `vpaddd` for a generic target, one uop more for each.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
#[inline]
fn dpwssd(mut acc: __m512i, a: __m512i, b: __m512i) -> __m512i {
    // SAFETY: a register-only instruction of AVX-512 VNNI, which this
    // function's target features include; no memory, stack or flags.
    unsafe {
        std::arch::asm!(
            "vpdpwssd {acc}, {a}, {b}",
            acc = inout(zmm_reg) acc,
            a = in(zmm_reg) a,
            b = in(zmm_reg) b,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    acc
}

/// The activations' sums over sub-blocks `4t..4t + 4` as 4 i16 in each
/// 64-bit lane (Q8_K's sums are per 16 values; sub-blocks of 32 add two).
///
/// # Safety
/// `t < 256 / (4 SUB)`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn sub_sums_word<F: KPack>(a: &SuperActBlock, t: usize) -> i64 {
    if F::SUB == 16 {
        // SAFETY: sums 4t..4t + 4 of 16.
        unsafe { word(a.sums.as_ptr().add(4 * t)) }
    } else {
        // SAFETY: sums 8t..8t + 8 of 16 (t < 2 for sub-blocks of 32).
        let sums = unsafe { _mm_loadu_si128(a.sums.as_ptr().add(8 * t).cast()) };
        let pairs = _mm_madd_epi16(sums, _mm_set1_epi16(1));
        _mm_cvtsi128_si64(_mm_packs_epi32(pairs, pairs))
    }
}

/// # Safety
/// `acts` holds `MR * blocks` super-blocks; `group` is readable for
/// `blocks` packed blocks of `F`; the CPU has the `Isa::Avx512` features.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
pub(super) unsafe fn tile_avx512<F: KPack, const MR: usize>(
    acts: &[SuperActBlock],
    blocks: usize,
    group: *const u8,
    out: &mut [[f32; GROUP_ROWS]; MR],
) {
    let per_sub = PackedK::<F>::PAIRS_PER_SUB;
    let chain = PackedK::<F>::CHAIN;
    // Sums per row: two alternate chains of pairs for up to 2 rows (a lone
    // row would otherwise wait on each `vpdpwssd`'s latency), one for more
    // (the rows' chains interleave, and 8 rows need the registers). The
    // integers are exact, so the split changes no bit.
    let chains = if MR > 2 { 1 } else { 2 };
    let mut acc = [_mm512_setzero_ps(); MR];
    for b in 0..blocks {
        // SAFETY: block b is inside the group (caller's guarantee).
        let block = unsafe { group.add(b * PackedK::<F>::PACKED_BYTES) };
        prefetch::<F>(block);
        let a = |i: usize| &acts[i * blocks + b];
        let mut dots = [[_mm512_setzero_si512(); MR]; 2];
        for o in 0..4 {
            let mut part = [_mm512_setzero_si512(); MR];
            let mut scale = _mm512_setzero_si512();
            // Pair 8o + p; expanded per constant `p` so that the tests on
            // `p` and the planes' shifts fold.
            macro_rules! pair {
                ($p:literal) => {{
                    let pair = 8 * o + $p;
                    if $p % per_sub == 0 {
                        // SAFETY: sub-block `pair / per_sub`'s 8 scales are in the block.
                        scale = unsafe { scales_512::<F>(block.add(PackedK::<F>::SCALES + 8 * (pair / per_sub))) };
                    }
                    if $p % chain == 0 {
                        part = [_mm512_setzero_si512(); MR];
                    }
                    // SAFETY: the block is whole, o < 4, p < 8.
                    let w = unsafe { pair_512::<F>(block, o, $p) };
                    for i in 0..MR {
                        // SAFETY: bytes 8 pair .. + 8 of the 256.
                        let x = _mm512_set1_epi64(unsafe { word(a(i).q.as_ptr().add(8 * pair)) });
                        part[i] = _mm512_dpbusd_epi32(part[i], w, x);
                    }
                    if ($p + 1) % chain == 0 {
                        for i in 0..MR {
                            let dot = &mut dots[(pair / chain) % chains][i];
                            *dot = dpwssd(*dot, part[i], scale);
                        }
                    }
                }};
            }
            pair!(0);
            pair!(1);
            pair!(2);
            pair!(3);
            pair!(4);
            pair!(5);
            pair!(6);
            pair!(7);
        }
        let mut offset = [_mm512_setzero_si512(); MR];
        for t in 0..PackedK::<F>::SUBS / 4 {
            // SAFETY: the offsets of sub-blocks 4t..4t + 4 are 32 bytes in the block.
            let packed = unsafe { _mm256_loadu_si256(block.add(PackedK::<F>::OFFSETS + 32 * t).cast()) };
            let offsets = _mm512_cvtepi8_epi16(packed);
            for (i, offset) in offset.iter_mut().enumerate() {
                // SAFETY: t < SUBS / 4.
                let x = _mm512_set1_epi64(unsafe { sub_sums_word::<F>(a(i), t) });
                *offset = dpwssd(*offset, offsets, x);
            }
        }
        let dot: [__m512i; MR] = std::array::from_fn(|i| _mm512_add_epi32(dots[0][i], dots[1][i]));
        // SAFETY: d (and dmin) are 16 bytes each in the block.
        let d = unsafe { f16_lanes_512(block.add(PackedK::<F>::D)) };
        for i in 0..MR {
            let dx = _mm512_set1_ps(a(i).d);
            acc[i] = if PackedK::<F>::HAS_MIN {
                // SAFETY: as above.
                let dmin = unsafe { f16_lanes_512(block.add(PackedK::<F>::DMIN)) };
                let with_dot = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[i]), _mm512_mul_ps(d, dx), acc[i]);
                _mm512_fnmadd_ps(_mm512_cvtepi32_ps(offset[i]), _mm512_mul_ps(dmin, dx), with_dot)
            } else {
                let shift = _mm_cvtsi32_si128(PackedK::<F>::CENTRE_SHIFT as i32);
                let centred = _mm512_sub_epi32(dot[i], _mm512_sll_epi32(offset[i], shift));
                _mm512_fmadd_ps(_mm512_cvtepi32_ps(centred), _mm512_mul_ps(d, dx), acc[i])
            };
        }
    }
    for (out, acc) in out.iter_mut().zip(&acc) {
        let mut lanes = [0.0f32; 2 * GROUP_ROWS];
        // SAFETY: 16 f32 into 16.
        unsafe { _mm512_storeu_ps(lanes.as_mut_ptr(), *acc) };
        for (r, out) in out.iter_mut().enumerate() {
            *out = lanes[2 * r] + lanes[2 * r + 1];
        }
    }
}

/// `shuffle_epi8` controls spreading a sub-block's 8 row scales (the 8
/// bytes repeated in every 64-bit lane) over half `h`'s lanes `(r, h)`,
/// indexed `[vnni][signed][h]`. AVX2 (`vnni` 0) puts row `4h + r`'s scale
/// in both i16 halves of the lane (for `madd` against two i16 sums);
/// AVX-VNNI (1) in the low half only, the high half zero (for `vpdpwssd`
/// against an i32 sum below 2^15, whose high half is its sign). Table
/// `signed` 0 puts the byte low over a zero high byte (unsigned scales);
/// 1 puts it in the high byte over a zero low byte, so an arithmetic shift
/// right by 8 sign-extends it (signed scales).
static SCALE_BYTES: [[[[u8; 32]; 2]; 2]; 2] = [scale_bytes(false), scale_bytes(true)];

const fn scale_bytes(vnni: bool) -> [[[u8; 32]; 2]; 2] {
    let mut table = [[[0x80u8; 32]; 2]; 2];
    let mut signed = 0;
    while signed < 2 {
        let mut half = 0;
        while half < 2 {
            let mut k = 0;
            while k < 32 {
                // Byte k is in i16 element k / 2 of the 256 bits, i32 lane
                // k / 4, local row k / 8 (a row has 2 lanes).
                let row = 4 * half + k / 8;
                let low_byte = k % 2 == 0;
                let low_half = k % 4 < 2;
                if low_byte == (signed == 0) && (low_half || !vnni) {
                    table[signed][half][k] = row as u8;
                }
                k += 1;
            }
            half += 1;
        }
        signed += 1;
    }
    table
}

/// The rows' f16 at `at` for half `half` (rows `4 half ..`), each repeated
/// for the row's two lanes, as f32.
///
/// # Safety
/// 16 bytes at `at` are readable; the CPU has AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn f16_lanes_256(at: *const u8, half: usize) -> __m256 {
    // SAFETY: the caller's guarantee.
    let v = unsafe { _mm_loadu_si128(at.cast()) };
    _mm256_cvtph_ps(if half == 0 { _mm_unpacklo_epi16(v, v) } else { _mm_unpackhi_epi16(v, v) })
}

/// The tile at AVX2 (`maddubs`, i16 sums per sub-block, `madd` by the
/// scales) or AVX-VNNI (`vpdpbusd` into i32 sums per chain of pairs,
/// `vpdpwssd` by the scales, as the AVX-512 tile): the same exact i32
/// totals per lane, then the same f32 steps.
macro_rules! tile_fn {
    ($(#[$meta:meta])* $name:ident, $halves:ident, $features:literal, $vnni:literal) => {
        $(#[$meta])*
        #[target_feature(enable = $features)]
        pub(super) unsafe fn $name<F: KPack, const MR: usize>(
            acts: &[SuperActBlock],
            blocks: usize,
            group: *const u8,
            out: &mut [[f32; GROUP_ROWS]; MR],
        ) {
            // Both 4-row halves in one pass share each activation broadcast, each
            // scale load and the loop; their `2 MR` sub-block sums and `2 MR`
            // block sums fit the 16 registers up to MR = 2. Larger tiles take the
            // halves one after the other (the broadcasts are shared by MR rows).
            if MR <= 2 {
                // SAFETY: the caller's guarantees.
                unsafe { $halves::<F, MR, 2>(acts, blocks, group, out) }
            } else {
                // SAFETY: as above.
                unsafe { $halves::<F, MR, 1>(acts, blocks, group, out) }
            }
        }

        /// The tile taking `H` halves (1 or 2) of the 8 rows per pass. Each
        /// lane gets the same integer sums and f32 steps whatever `H` is.
        ///
        /// # Safety
        /// As the tile; `H` divides 2.
        #[target_feature(enable = $features)]
        #[inline]
        #[allow(unused_unsafe)]
        unsafe fn $halves<F: KPack, const MR: usize, const H: usize>(
            acts: &[SuperActBlock],
            blocks: usize,
            group: *const u8,
            out: &mut [[f32; GROUP_ROWS]; MR],
        ) {
            let per_sub = PackedK::<F>::PAIRS_PER_SUB;
            // Pairs summed before the scale multiplies them: a sub-block's in i16
            // (AVX2), a chain's in i32 (AVX-VNNI).
            let chain = if $vnni { PackedK::<F>::CHAIN } else { per_sub };
            let signed = !PackedK::<F>::HAS_MIN;
            let mut acc = [[_mm256_setzero_ps(); 2]; MR];
            for b in 0..blocks {
                // SAFETY: block b is inside the group (caller's guarantee).
                let block = unsafe { group.add(b * PackedK::<F>::PACKED_BYTES) };
                prefetch::<F>(block);
                let a = |i: usize| &acts[i * blocks + b];
                for pass in 0..2 / H {
                    let mut control = [_mm256_setzero_si256(); H];
                    for (j, control) in control.iter_mut().enumerate() {
                        let table = &SCALE_BYTES[usize::from($vnni)][usize::from(signed)][pass * H + j];
                        // SAFETY: each table is 32 bytes.
                        *control = unsafe { _mm256_loadu_si256(table.as_ptr().cast()) };
                    }
                    let mut dot = [[_mm256_setzero_si256(); H]; MR];
                    for o in 0..4 {
                        let mut part = [[_mm256_setzero_si256(); H]; MR];
                        let mut scale = [_mm256_setzero_si256(); H];
                        macro_rules! pair {
                            ($p:literal) => {{
                                let pair = 8 * o + $p;
                                if $p % per_sub == 0 {
                                    let at = PackedK::<F>::SCALES + 8 * (pair / per_sub);
                                    // SAFETY: the sub-block's 8 scales are in the block.
                                    let bytes = _mm256_set1_epi64x(unsafe { word(block.add(at)) });
                                    for (scale, &control) in scale.iter_mut().zip(&control) {
                                        let spread = _mm256_shuffle_epi8(bytes, control);
                                        *scale = if signed { _mm256_srai_epi16(spread, 8) } else { spread };
                                    }
                                }
                                if $p % chain == 0 {
                                    part = [[_mm256_setzero_si256(); H]; MR];
                                }
                                let mut w = [_mm256_setzero_si256(); H];
                                for (j, w) in w.iter_mut().enumerate() {
                                    // SAFETY: the block is whole, the half < 2, o < 4, p < 8.
                                    *w = unsafe { pair_256::<F>(block, pass * H + j, o, $p) };
                                }
                                for (i, part) in part.iter_mut().enumerate() {
                                    // SAFETY: bytes 8 pair .. + 8 of the 256.
                                    let x = _mm256_set1_epi64x(unsafe { word(a(i).q.as_ptr().add(8 * pair)) });
                                    for (part, &w) in part.iter_mut().zip(&w) {
                                        *part = if $vnni {
                                            // SAFETY: only the AVX-VNNI tile takes this branch,
                                            // and its target features include AVX-VNNI.
                                            unsafe { vnni::dpbusd(*part, w, x) }
                                        } else {
                                            _mm256_add_epi16(*part, _mm256_maddubs_epi16(w, x))
                                        };
                                    }
                                }
                                if ($p + 1) % chain == 0 {
                                    for (dot, part) in dot.iter_mut().zip(&part) {
                                        for ((dot, &part), &scale) in dot.iter_mut().zip(part).zip(&scale) {
                                            *dot = if $vnni {
                                                // SAFETY: as above.
                                                unsafe { vnni::dpwssd(*dot, part, scale) }
                                            } else {
                                                _mm256_add_epi32(*dot, _mm256_madd_epi16(part, scale))
                                            };
                                        }
                                    }
                                }
                            }};
                        }
                        pair!(0);
                        pair!(1);
                        pair!(2);
                        pair!(3);
                        pair!(4);
                        pair!(5);
                        pair!(6);
                        pair!(7);
                    }
                    let mut offset = [[_mm256_setzero_si256(); H]; MR];
                    for t in 0..PackedK::<F>::SUBS / 4 {
                        let mut offsets = [_mm256_setzero_si256(); H];
                        for (j, offsets) in offsets.iter_mut().enumerate() {
                            let at = PackedK::<F>::OFFSETS + 32 * t + 16 * (pass * H + j);
                            // SAFETY: this half's 16 offset bytes of sub-blocks 4t.. are in the block.
                            *offsets = _mm256_cvtepi8_epi16(unsafe { _mm_loadu_si128(block.add(at).cast()) });
                        }
                        for (i, offset) in offset.iter_mut().enumerate() {
                            // SAFETY: t < SUBS / 4.
                            let x = _mm256_set1_epi64x(unsafe { sub_sums_word::<F>(a(i), t) });
                            for (offset, &offsets) in offset.iter_mut().zip(&offsets) {
                                *offset = if $vnni {
                                    // SAFETY: as above.
                                    unsafe { vnni::dpwssd(*offset, offsets, x) }
                                } else {
                                    _mm256_add_epi32(*offset, _mm256_madd_epi16(offsets, x))
                                };
                            }
                        }
                    }
                    for j in 0..H {
                        let half = pass * H + j;
                        // SAFETY: d (and dmin) are 16 bytes each in the block.
                        let d = unsafe { f16_lanes_256(block.add(PackedK::<F>::D), half) };
                        for i in 0..MR {
                            let dx = _mm256_set1_ps(a(i).d);
                            let (dot, offset) = (dot[i][j], offset[i][j]);
                            let acc = &mut acc[i][half];
                            *acc = if PackedK::<F>::HAS_MIN {
                                // SAFETY: as above.
                                let dmin = unsafe { f16_lanes_256(block.add(PackedK::<F>::DMIN), half) };
                                let with_dot = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(d, dx), *acc);
                                _mm256_fnmadd_ps(_mm256_cvtepi32_ps(offset), _mm256_mul_ps(dmin, dx), with_dot)
                            } else {
                                let shift = _mm_cvtsi32_si128(PackedK::<F>::CENTRE_SHIFT as i32);
                                let centred = _mm256_sub_epi32(dot, _mm256_sll_epi32(offset, shift));
                                _mm256_fmadd_ps(_mm256_cvtepi32_ps(centred), _mm256_mul_ps(d, dx), *acc)
                            };
                        }
                    }
                }
            }
            for (out, acc) in out.iter_mut().zip(&acc) {
                let mut lanes = [0.0f32; 2 * GROUP_ROWS];
                // SAFETY: 8 f32 into each half of 16.
                unsafe {
                    _mm256_storeu_ps(lanes.as_mut_ptr(), acc[0]);
                    _mm256_storeu_ps(lanes.as_mut_ptr().add(8), acc[1]);
                }
                for (r, out) in out.iter_mut().enumerate() {
                    *out = lanes[2 * r] + lanes[2 * r + 1];
                }
            }
        }
    };
}

tile_fn!(
    /// # Safety
    /// As [`tile_avx512`], and the CPU has AVX2, FMA and F16C.
    tile_avx2,
    tile_avx2_halves,
    "avx2,fma,f16c",
    false
);

tile_fn!(
    /// # Safety
    /// As [`tile_avx512`], and the CPU has AVX2, FMA, F16C and AVX-VNNI.
    tile_avx_vnni,
    tile_avx_vnni_halves,
    "avx2,fma,f16c,avxvnni",
    true
);

/// Prefetches the packed block [`PREFETCH_AHEAD`] bytes after `block`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn prefetch<F: KPack>(block: *const u8) {
    prefetch_lines(block.wrapping_add(PREFETCH_AHEAD), PackedK::<F>::PACKED_BYTES);
}
