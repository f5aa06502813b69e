//! Micro-kernels for float weights (f32, f16, bf16): an `MR x NR` tile of dot
//! products between `MR` f32 activation rows and `NR` weight rows, over the
//! whole `k`. Weights are widened to f32 in registers (F16C for f16, a shift
//! for bf16) and multiplied with FMA (16 lanes with AVX-512, 8 with AVX2);
//! every weight vector loaded is used `MR` times and every activation vector
//! `NR` times.

use std::marker::PhantomData;

use crate::convert::Half16;
use crate::isa::Isa;
use crate::tile::{TileKernel, TileShapes};

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// A float element type stored in weight rows (little-endian, any alignment).
pub(crate) trait FloatElem: Sync {
    /// Bytes per element.
    const BYTES: usize;

    /// Element `i` of the row at `row`, widened.
    ///
    /// # Safety
    /// `row` is readable for `(i + 1) * BYTES` bytes.
    unsafe fn load(row: *const u8, i: usize) -> f32;

    /// Elements `i..i + 8` of the row at `row`, widened.
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C; `row` is readable for `(i + 8) * BYTES` bytes.
    #[cfg(target_arch = "x86_64")]
    unsafe fn load8(row: *const u8, i: usize) -> __m256;

    /// Elements `i..i + 16` of the row at `row`, widened.
    ///
    /// # Safety
    /// The CPU has the `Isa::Avx512` features; `row` is readable for
    /// `(i + 16) * BYTES` bytes.
    #[cfg(target_arch = "x86_64")]
    unsafe fn load16(row: *const u8, i: usize) -> __m512;

    /// Elements `i..i + 16` of the row at `row` whose bit is set in `mask`,
    /// widened; the other lanes are zero and their memory is not read.
    ///
    /// # Safety
    /// The CPU has the `Isa::Avx512` features; `row` is readable at the
    /// elements `mask` selects.
    #[cfg(target_arch = "x86_64")]
    unsafe fn load16_masked(row: *const u8, i: usize, mask: __mmask16) -> __m512;
}

impl FloatElem for f32 {
    const BYTES: usize = 4;
    #[inline]
    unsafe fn load(row: *const u8, i: usize) -> f32 {
        // SAFETY: the caller guarantees the bytes are readable.
        unsafe { row.cast::<f32>().add(i).read_unaligned() }
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn load8(row: *const u8, i: usize) -> __m256 {
        // SAFETY: the caller guarantees 8 readable elements at `i`.
        unsafe { _mm256_loadu_ps(row.cast::<f32>().add(i)) }
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
    #[inline]
    unsafe fn load16(row: *const u8, i: usize) -> __m512 {
        // SAFETY: the caller guarantees 16 readable elements at `i`.
        unsafe { _mm512_loadu_ps(row.cast::<f32>().add(i)) }
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
    #[inline]
    unsafe fn load16_masked(row: *const u8, i: usize, mask: __mmask16) -> __m512 {
        // SAFETY: the caller guarantees the selected elements are readable;
        // a masked load does not touch the others.
        unsafe { _mm512_maskz_loadu_ps(mask, row.cast::<f32>().add(i)) }
    }
}

impl<H: Half16 + Sync> FloatElem for H {
    const BYTES: usize = 2;
    #[inline]
    unsafe fn load(row: *const u8, i: usize) -> f32 {
        // SAFETY: the caller guarantees the bytes are readable.
        H::widen(unsafe { row.cast::<u16>().add(i).read_unaligned() })
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn load8(row: *const u8, i: usize) -> __m256 {
        // SAFETY: the caller guarantees 8 readable elements at `i` and the features.
        unsafe { H::widen8(row.cast::<u16>().add(i)) }
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
    #[inline]
    unsafe fn load16(row: *const u8, i: usize) -> __m512 {
        // SAFETY: the caller guarantees 16 readable elements at `i` and the features.
        unsafe { H::widen16(_mm256_loadu_si256(row.cast::<u16>().add(i).cast())) }
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
    #[inline]
    unsafe fn load16_masked(row: *const u8, i: usize, mask: __mmask16) -> __m512 {
        // SAFETY: the caller guarantees the selected elements are readable
        // and the features; a masked load does not touch the others.
        unsafe { H::widen16(_mm256_maskz_loadu_epi16(mask, row.cast::<u16>().add(i).cast())) }
    }
}

/// Tiles of `x · Wᵀ` for f32 activations and weights of element type `W`.
pub(crate) struct FloatTiles<'a, W> {
    pub isa: Isa,
    /// Activations; row `i` starts at `i * x_stride`. Checked by the caller:
    /// every row used has `k` elements inside the slice.
    pub x: &'a [f32],
    pub x_stride: usize,
    /// Weights; row `j` starts at byte `j * w_stride`. Checked by the caller:
    /// every row used has `k * W::BYTES` bytes inside the slice.
    pub w: &'a [u8],
    pub w_stride: usize,
    pub k: usize,
    pub elem: PhantomData<W>,
}

impl<W: FloatElem> TileKernel for FloatTiles<'_, W> {
    #[inline]
    fn tile<const MR: usize, const NR: usize>(&self, m0: usize, n0: usize, out: &mut [[f32; NR]; MR]) {
        assert!((m0 + MR - 1) * self.x_stride + self.k <= self.x.len());
        assert!((n0 + NR - 1) * self.w_stride + self.k * W::BYTES <= self.w.len());
        // SAFETY: the asserts above keep rows m0..m0+MR of x and n0..n0+NR
        // of W inside their slices.
        let x = unsafe { self.x.as_ptr().add(m0 * self.x_stride) };
        // SAFETY: as above.
        let w = unsafe { self.w.as_ptr().add(n0 * self.w_stride) };
        match self.isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the level comes from `Isa::current` (detection), so
            // the CPU has the AVX-512 features; pointers checked above.
            Isa::Avx512 => unsafe { tile_avx512::<W, MR, NR>(x, self.x_stride, w, self.w_stride, self.k, out) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the level comes from `Isa::current` (detection), so
            // the CPU has AVX2, FMA and F16C; pointers checked above.
            Isa::Avx2 | Isa::AvxVnni => unsafe {
                tile_avx2::<W, MR, NR>(x, self.x_stride, w, self.w_stride, self.k, out)
            },
            // SAFETY: pointers checked above.
            _ => unsafe { tile_scalar::<W, MR, NR>(x, self.x_stride, w, self.w_stride, self.k, out) },
        }
    }

    /// AVX-512 has 32 registers: 16 accumulators, 4 weight vectors and an
    /// activation vector fit; AVX2's 16 take 12 accumulators, 3 weight
    /// vectors and an activation vector.
    fn shapes(&self) -> TileShapes {
        match self.isa {
            Isa::Avx512 => TileShapes::Wide,
            Isa::Avx2 | Isa::AvxVnni => TileShapes::Twelve,
            _ => TileShapes::Narrow,
        }
    }
}

/// # Safety
/// `x` rows `0..MR` (stride `x_stride`) hold `k` readable f32; `w` rows
/// `0..NR` (stride `w_stride` bytes) hold `k` readable elements.
unsafe fn tile_scalar<W: FloatElem, const MR: usize, const NR: usize>(
    x: *const f32,
    x_stride: usize,
    w: *const u8,
    w_stride: usize,
    k: usize,
    out: &mut [[f32; NR]; MR],
) {
    for (i, out_row) in out.iter_mut().enumerate() {
        for (j, out) in out_row.iter_mut().enumerate() {
            let mut lanes = [0.0f32; 8];
            let mut p = 0;
            while p + 8 <= k {
                for (l, lane) in lanes.iter_mut().enumerate() {
                    // SAFETY: p + l < k, inside the rows the caller guarantees.
                    unsafe { *lane += *x.add(i * x_stride + p + l) * W::load(w.add(j * w_stride), p + l) };
                }
                p += 8;
            }
            let mut sum: f32 = lanes.iter().sum();
            while p < k {
                // SAFETY: p < k, as above.
                unsafe { sum += *x.add(i * x_stride + p) * W::load(w.add(j * w_stride), p) };
                p += 1;
            }
            *out = sum;
        }
    }
}

/// 8 elements a step into one accumulator per output, whose 8 lanes are
/// then summed in one fixed tree ([`reduce_tile8`]) whatever the tile's
/// shape, then the last `k % 8` products one by one.
///
/// # Safety
/// As [`tile_scalar`], and the CPU has AVX2, FMA and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn tile_avx2<W: FloatElem, const MR: usize, const NR: usize>(
    x: *const f32,
    x_stride: usize,
    w: *const u8,
    w_stride: usize,
    k: usize,
    out: &mut [[f32; NR]; MR],
) {
    let mut acc = [[_mm256_setzero_ps(); NR]; MR];
    // A lone activation row (decode) streams its weights from memory once,
    // and 8 short rows read side by side (576 bytes each in a 288-wide
    // model) end before the hardware prefetcher has followed them. So each
    // step prefetches as many bytes as it reads, [`PREFETCH_TILES`] tiles
    // ahead (a weight matrix's rows are adjacent): f16 32000 x 288 at
    // m = 1 went from 3.9 to 18-21 GFLOP/s on an AMD EPYC (Zen 3). A
    // prefetch never faults: addresses past the matrix are harmless.
    let next = w.wrapping_add(NR * w_stride * PREFETCH_TILES);
    let mut p = 0;
    while p + 8 <= k {
        if MR == 1 {
            crate::simd::prefetch_lines(next.wrapping_add(p * NR * W::BYTES), NR * 8 * W::BYTES);
        }
        let mut wv = [_mm256_setzero_ps(); NR];
        for (j, v) in wv.iter_mut().enumerate() {
            // SAFETY: p + 8 <= k, inside row j.
            *v = unsafe { W::load8(w.add(j * w_stride), p) };
        }
        for (i, acc_row) in acc.iter_mut().enumerate() {
            // SAFETY: p + 8 <= k, inside row i.
            let xv = unsafe { _mm256_loadu_ps(x.add(i * x_stride + p)) };
            for (a, wj) in acc_row.iter_mut().zip(&wv) {
                *a = _mm256_fmadd_ps(xv, *wj, *a);
            }
        }
        p += 8;
    }
    reduce_tile8(&acc, out);
    if p < k {
        for (i, out_row) in out.iter_mut().enumerate() {
            for (j, sum) in out_row.iter_mut().enumerate() {
                for q in p..k {
                    // SAFETY: q < k, inside rows i and j.
                    unsafe { *sum += *x.add(i * x_stride + q) * W::load(w.add(j * w_stride), q) };
                }
            }
        }
    }
}

/// How many tiles ahead [`tile_avx2`] prefetches at m = 1 (on the f16
/// output matrix of stories15M, 2 was faster than 1 and as fast as 3).
const PREFETCH_TILES: usize = 2;

/// `out[i][j]` = the sum of the 8 lanes of `acc[i][j]`, in one tree for
/// every output, that of [`hsum`](crate::simd::hsum): lane `l` plus lane
/// `l + 4`, then `l + 2`, `l + 1` of the partial sums. 8 accumulators are
/// summed together ([`reduce8`]), each step adding two registers that hold
/// parts of several accumulators side by side; the last group of a tile
/// whose accumulators are not a multiple of 8 leaves zero registers in the
/// places it does not fill (steps on them fold away at compile time). Which
/// place an accumulator takes changes no addition, so every output gets
/// the same bits whatever the tile's shape.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn reduce_tile8<const MR: usize, const NR: usize>(acc: &[[__m256; NR]; MR], out: &mut [[f32; NR]; MR]) {
    if MR * NR == 1 {
        out[0][0] = crate::simd::hsum(acc[0][0]);
        return;
    }
    // Accumulator (i, j) is number i NR + j, the place of its sum in `out`
    // read as one array.
    for group in (0..MR * NR).step_by(8) {
        let count = (MR * NR - group).min(8);
        let mut a = [_mm256_setzero_ps(); 8];
        if count == 8 {
            // Number group + 4 (q % 2) + q / 2 at place q ends in lane
            // 4 (q % 2) + q / 2: the 8 sums in order.
            for (q, place) in a.iter_mut().enumerate() {
                let number = group + 4 * (q % 2) + q / 2;
                *place = acc[number / NR][number % NR];
            }
            // SAFETY: `out` is MR NR contiguous writable f32, and
            // group + 8 <= MR NR.
            unsafe { _mm256_storeu_ps(out.as_mut_ptr().cast::<f32>().add(group), reduce8(&a)) };
            continue;
        }
        // Number group + q at place q (the first places, so the empty ones
        // fold away), whose sum ends in lane 4 (q % 2) + q / 2.
        for (q, place) in a.iter_mut().enumerate().take(count) {
            *place = acc[(group + q) / NR][(group + q) % NR];
        }
        let mut sums = [0.0f32; 8];
        // SAFETY: `sums` holds 8 writable f32.
        unsafe { _mm256_storeu_ps(sums.as_mut_ptr(), reduce8(&a)) };
        for q in 0..count {
            out[(group + q) / NR][(group + q) % NR] = sums[4 * (q % 2) + q / 2];
        }
    }
}

/// The lane sums of 8 registers: lane `4 h + i` of the result is the sum of
/// `a[2 i + h]`, in the tree of [`reduce_tile8`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn reduce8(a: &[__m256; 8]) -> __m256 {
    // Lanes l + 4: the low 128-bit halves of two registers plus their high
    // halves. Register t then holds a[2t] (lanes 0..4) and a[2t + 1] (4..8).
    let halves: [__m256; 4] = std::array::from_fn(|t| {
        let (u, v) = (a[2 * t], a[2 * t + 1]);
        _mm256_add_ps(_mm256_permute2f128_ps::<0x20>(u, v), _mm256_permute2f128_ps::<0x31>(u, v))
    });
    // Lanes l + 2, within each half: half h of register t holds two lanes
    // of a[4t + h] then two of a[4t + 2 + h].
    let pairs: [__m256; 2] = std::array::from_fn(|t| {
        let (u, v) = (halves[2 * t], halves[2 * t + 1]);
        _mm256_add_ps(_mm256_shuffle_ps::<0x44>(u, v), _mm256_shuffle_ps::<0xEE>(u, v))
    });
    // Lanes l + 1: half h holds a[h], a[2 + h], a[4 + h], a[6 + h].
    let (u, v) = (pairs[0], pairs[1]);
    _mm256_add_ps(_mm256_shuffle_ps::<0x88>(u, v), _mm256_shuffle_ps::<0xDD>(u, v))
}

/// [`tile_avx2`] with 16 lanes: 16 elements a step, the last partial step
/// with masked loads (zero lanes), then each output's 16 lanes summed in one
/// fixed tree ([`reduce_tile`]), whatever the tile's shape.
///
/// # Safety
/// As [`tile_scalar`], and the CPU has the `Isa::Avx512` features.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
unsafe fn tile_avx512<W: FloatElem, const MR: usize, const NR: usize>(
    x: *const f32,
    x_stride: usize,
    w: *const u8,
    w_stride: usize,
    k: usize,
    out: &mut [[f32; NR]; MR],
) {
    let mut acc = [[_mm512_setzero_ps(); NR]; MR];
    let mut p = 0;
    while p + 16 <= k {
        let mut wv = [_mm512_setzero_ps(); NR];
        for (j, v) in wv.iter_mut().enumerate() {
            // SAFETY: p + 16 <= k, inside row j.
            *v = unsafe { W::load16(w.add(j * w_stride), p) };
        }
        for (i, acc_row) in acc.iter_mut().enumerate() {
            // SAFETY: p + 16 <= k, inside row i.
            let xv = unsafe { _mm512_loadu_ps(x.add(i * x_stride + p)) };
            for (a, wj) in acc_row.iter_mut().zip(&wv) {
                *a = _mm512_fmadd_ps(xv, *wj, *a);
            }
        }
        p += 16;
    }
    if p < k {
        // The last k - p < 16 elements; the lanes past k load as zero.
        let mask = ((1u32 << (k - p)) - 1) as __mmask16;
        let mut wv = [_mm512_setzero_ps(); NR];
        for (j, v) in wv.iter_mut().enumerate() {
            // SAFETY: the mask selects elements p..k, inside row j.
            *v = unsafe { W::load16_masked(w.add(j * w_stride), p, mask) };
        }
        for (i, acc_row) in acc.iter_mut().enumerate() {
            // SAFETY: as above, inside row i.
            let xv = unsafe { _mm512_maskz_loadu_ps(mask, x.add(i * x_stride + p)) };
            for (a, wj) in acc_row.iter_mut().zip(&wv) {
                *a = _mm512_fmadd_ps(xv, *wj, *a);
            }
        }
    }
    reduce_tile(&acc, out);
}

/// `out[i][j]` = the sum of the 16 lanes of `acc[i][j]`, in one tree for
/// every output: lane `l` plus lane `l + 8`, then `l + 4`, `l + 2`, `l + 1`
/// of the partial sums. Up to 16 accumulators are summed together
/// ([`reduce16`]), each step adding two registers that hold parts of
/// several accumulators side by side; a smaller tile leaves zero registers
/// in the places it does not fill (steps on them fold away at compile
/// time). Which place an accumulator takes changes no addition, so every
/// output gets the same bits whatever the tile's shape.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
#[inline]
fn reduce_tile<const MR: usize, const NR: usize>(acc: &[[__m512; NR]; MR], out: &mut [[f32; NR]; MR]) {
    if MR == 4 && NR == 4 {
        // Accumulator (i, j) at place 4 j + i ends in lane 4 i + j: the
        // result is the tile, row after row.
        let a: [__m512; 16] = std::array::from_fn(|p| acc[p % 4 % MR][p / 4 % NR]);
        // SAFETY: `out` is 4 rows of 4 f32, 16 contiguous writable f32.
        unsafe { _mm512_storeu_ps(out.as_mut_ptr().cast(), reduce16(&a)) };
        return;
    }
    // Otherwise accumulator (i, j) is number i NR + j; 16 at a time,
    // number g + p at place p, whose sum ends in lane 4 (p % 4) + p / 4
    // (the first places, so a small tile's empty places fold away).
    for group in (0..MR * NR).step_by(16) {
        let count = (MR * NR - group).min(16);
        let mut a = [_mm512_setzero_ps(); 16];
        for (p, place) in a.iter_mut().enumerate().take(count) {
            *place = acc[(group + p) / NR][(group + p) % NR];
        }
        let mut sums = [0.0f32; 16];
        // SAFETY: `sums` holds 16 writable f32.
        unsafe { _mm512_storeu_ps(sums.as_mut_ptr(), reduce16(&a)) };
        for p in 0..count {
            out[(group + p) / NR][(group + p) % NR] = sums[4 * (p % 4) + p / 4];
        }
    }
}

/// The lane sums of 16 registers: lane `4 q + r` of the result is the sum
/// of `a[4 r + q]`, in the tree of [`reduce_tile`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
#[inline]
fn reduce16(a: &[__m512; 16]) -> __m512 {
    // Lanes l + 8: 128-bit blocks 0, 1 of one register and 0, 1 of the
    // next, plus their blocks 2, 3. Register t then holds a[2t] (lanes
    // 0..8) and a[2t + 1] (8..16).
    let halves: [__m512; 8] = std::array::from_fn(|t| {
        let (u, v) = (a[2 * t], a[2 * t + 1]);
        _mm512_add_ps(_mm512_shuffle_f32x4::<0x44>(u, v), _mm512_shuffle_f32x4::<0xEE>(u, v))
    });
    // Lanes l + 4: blocks 0, 2 plus 1, 3. Register t holds a[4t..4t + 4],
    // one per 128-bit block.
    let quarters: [__m512; 4] = std::array::from_fn(|t| {
        let (u, v) = (halves[2 * t], halves[2 * t + 1]);
        _mm512_add_ps(_mm512_shuffle_f32x4::<0x88>(u, v), _mm512_shuffle_f32x4::<0xDD>(u, v))
    });
    // Lanes l + 2, within each block: block b of register t holds two
    // lanes of a[8t + b] then two of a[8t + 4 + b].
    let pairs: [__m512; 2] = std::array::from_fn(|t| {
        let (u, v) = (quarters[2 * t], quarters[2 * t + 1]);
        _mm512_add_ps(_mm512_shuffle_ps::<0x44>(u, v), _mm512_shuffle_ps::<0xEE>(u, v))
    });
    // Lanes l + 1: block b holds a[b], a[4 + b], a[8 + b], a[12 + b].
    let (u, v) = (pairs[0], pairs[1]);
    _mm512_add_ps(_mm512_shuffle_ps::<0x88>(u, v), _mm512_shuffle_ps::<0xDD>(u, v))
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use crate::simd::hsum;

    /// The shared tree of an `MR x NR` tile gives every accumulator the
    /// bits of [`hsum`] (so tiles of any shape agree), on lanes of mixed
    /// magnitudes where another order of the additions would round apart.
    fn tree_is_hsum<const MR: usize, const NR: usize>(seed: &mut u32) {
        let mut next = || {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 17;
            *seed ^= *seed << 5;
            let scale = f32::powi(2.0, (*seed % 40) as i32 - 20);
            (((*seed >> 8) as f32 / (1u32 << 24) as f32) - 0.5) * scale
        };
        let lanes: Vec<[f32; 8]> = (0..MR * NR).map(|_| std::array::from_fn(|_| next())).collect();
        // SAFETY: the caller checked that the CPU has AVX2, FMA and F16C;
        // every load reads one 8-lane array.
        unsafe {
            let acc: [[__m256; NR]; MR] =
                std::array::from_fn(|i| std::array::from_fn(|j| _mm256_loadu_ps(lanes[i * NR + j].as_ptr())));
            let mut out = [[f32::NAN; NR]; MR];
            reduce_tile8(&acc, &mut out);
            for i in 0..MR {
                for j in 0..NR {
                    assert_eq!(out[i][j].to_bits(), hsum(acc[i][j]).to_bits(), "{MR}x{NR} tile, ({i}, {j})");
                }
            }
        }
    }

    #[test]
    fn avx2_lane_tree_is_hsum_for_every_tile_shape() {
        if Isa::detected() < Isa::Avx2 {
            return;
        }
        let mut seed = 0x9e37_79b9u32;
        for _ in 0..100 {
            tree_is_hsum::<1, 1>(&mut seed);
            tree_is_hsum::<1, 4>(&mut seed);
            tree_is_hsum::<1, 8>(&mut seed);
            tree_is_hsum::<2, 4>(&mut seed);
            tree_is_hsum::<3, 4>(&mut seed);
            tree_is_hsum::<4, 3>(&mut seed);
            tree_is_hsum::<4, 2>(&mut seed);
            tree_is_hsum::<4, 1>(&mut seed);
            tree_is_hsum::<3, 1>(&mut seed);
        }
    }
}
