//! A block of keys turned to f32 and transposed (`out[i * BLOCK + j]` is
//! element `i` of key `j`) in one pass over their rows: eight keys by eight
//! elements at a time, widened and transposed in AVX2 registers, straight
//! from the cache's f16 or bf16 rows or from rows already decoded to f32.
//! Values are only moved (widening is exact), so this gives the bits of
//! decoding and transposing one element at a time.

use baton_core::graph::ATTENTION_BLOCK as BLOCK;

use super::block::KEY_LANES;
use crate::isa::Isa;

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// The element type of the rows handed to [`transpose_rows`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum RowType {
    /// f32, 4 bytes a value.
    F32,
    /// IEEE half, 2 bytes a value.
    F16,
    /// bfloat16, 2 bytes a value.
    Bf16,
}

impl RowType {
    fn bytes(self) -> usize {
        match self {
            RowType::F32 => 4,
            RowType::F16 | RowType::Bf16 => 2,
        }
    }

    /// Element `i` of `row` as f32.
    fn element(self, row: &[u8], i: usize) -> f32 {
        let at = i * self.bytes();
        match self {
            RowType::F32 => f32::from_le_bytes(row[at..at + 4].try_into().expect("4 bytes")),
            RowType::F16 => half::f16::from_le_bytes([row[at], row[at + 1]]).to_f32(),
            RowType::Bf16 => half::bf16::from_le_bytes([row[at], row[at + 1]]).to_f32(),
        }
    }
}

/// Zero bytes: a row of zeros that pads the last group of eight keys.
static ZEROS: [u8; 2048] = [0; 2048];

/// The columns of a transposed block that hold `keys` keys: whole
/// registers of scores ([`KEY_LANES`]), so a block that is not full (a
/// decode step's last block) costs its keys, not [`BLOCK`].
pub(super) fn columns(keys: usize) -> usize {
    keys.div_ceil(KEY_LANES) * KEY_LANES
}

/// Writes keys `rows` (at most [`BLOCK`], each `d` values of `kind`) to
/// `out` transposed, zeros in the columns past them up to
/// [`columns`]`(rows.len())` (scores nobody reads); the columns past those
/// are not touched.
///
/// # Panics
/// If a row is shorter than `d` values, there are more than [`BLOCK`]
/// rows, or `out` is shorter than `d * BLOCK` (caller bugs).
pub(super) fn transpose_rows(isa: Isa, kind: RowType, rows: &[&[u8]], d: usize, out: &mut [f32]) {
    let n = rows.len();
    assert!(n <= BLOCK && out.len() >= d * BLOCK, "transpose_rows: a block of keys");
    assert!(rows.iter().all(|r| r.len() >= d * kind.bytes()), "transpose_rows: rows of d values");
    let cols = columns(n);
    // Columns written by the vector path: every key, then rows of zeros up
    // to `cols` (so the columns past the keys are zeros as the scalar path
    // writes them).
    let mut whole = 0;
    #[cfg(target_arch = "x86_64")]
    if isa.has_avx2() && d.is_multiple_of(8) {
        let zero: &[u8] = &ZEROS;
        let padded = if d * kind.bytes() <= zero.len() { cols } else { n / 8 * 8 };
        let mut group: [&[u8]; BLOCK] = [zero; BLOCK];
        group[..n].copy_from_slice(rows);
        whole = padded;
        // SAFETY: `isa` comes from `Isa::current`, so the CPU has AVX2, FMA
        // and F16C; the asserts above give every row `d` values and `out`
        // `d * BLOCK`, the zero rows hold `d` values when they are used
        // (checked above), `d` is a multiple of 8, and `padded <= BLOCK`
        // is a multiple of 8 (KEY_LANES and BLOCK are).
        unsafe { transpose_avx2(kind, &group[..padded], d, out) };
    }
    let _ = isa;
    if whole < cols {
        for i in 0..d {
            let column = &mut out[i * BLOCK..i * BLOCK + cols];
            for (j, t) in column.iter_mut().enumerate().take(n).skip(whole) {
                *t = kind.element(rows[j], i);
            }
            column[whole.max(n)..].fill(0.0);
        }
    }
}

/// Eight values of `kind` at element `i` of `row`, as f32.
///
/// # Safety
/// AVX2, FMA and F16C; `row` is readable for `i + 8` values of `kind`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn load8(kind: RowType, row: *const u8, i: usize) -> __m256 {
    // SAFETY: `i + 8` values readable at `row` (this function's contract);
    // the loads take any alignment.
    unsafe {
        match kind {
            RowType::F32 => _mm256_loadu_ps(row.cast::<f32>().add(i)),
            RowType::F16 => _mm256_cvtph_ps(_mm_loadu_si128(row.cast::<u16>().add(i).cast())),
            RowType::Bf16 => {
                let wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(row.cast::<u16>().add(i).cast()));
                _mm256_castsi256_ps(_mm256_slli_epi32::<16>(wide))
            }
        }
    }
}

/// The 8x8 transpose of `r`: lane `c` of row `x` becomes lane `x` of row `c`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn transpose8(r: [__m256; 8]) -> [__m256; 8] {
    let t0 = _mm256_unpacklo_ps(r[0], r[1]);
    let t1 = _mm256_unpackhi_ps(r[0], r[1]);
    let t2 = _mm256_unpacklo_ps(r[2], r[3]);
    let t3 = _mm256_unpackhi_ps(r[2], r[3]);
    let t4 = _mm256_unpacklo_ps(r[4], r[5]);
    let t5 = _mm256_unpackhi_ps(r[4], r[5]);
    let t6 = _mm256_unpacklo_ps(r[6], r[7]);
    let t7 = _mm256_unpackhi_ps(r[6], r[7]);
    let s0 = _mm256_shuffle_ps::<0x44>(t0, t2);
    let s1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
    let s2 = _mm256_shuffle_ps::<0x44>(t1, t3);
    let s3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
    let s4 = _mm256_shuffle_ps::<0x44>(t4, t6);
    let s5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
    let s6 = _mm256_shuffle_ps::<0x44>(t5, t7);
    let s7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
    [
        _mm256_permute2f128_ps::<0x20>(s0, s4),
        _mm256_permute2f128_ps::<0x20>(s1, s5),
        _mm256_permute2f128_ps::<0x20>(s2, s6),
        _mm256_permute2f128_ps::<0x20>(s3, s7),
        _mm256_permute2f128_ps::<0x31>(s0, s4),
        _mm256_permute2f128_ps::<0x31>(s1, s5),
        _mm256_permute2f128_ps::<0x31>(s2, s6),
        _mm256_permute2f128_ps::<0x31>(s3, s7),
    ]
}

/// The whole groups of eight rows of `rows`, transposed into `out`.
///
/// # Safety
/// AVX2, FMA and F16C; `rows.len()` is a multiple of 8 and at most
/// [`BLOCK`]; each row holds `d` values of `kind`; `d` is a multiple of 8;
/// `out` holds `d * BLOCK`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn transpose_avx2(kind: RowType, rows: &[&[u8]], d: usize, out: &mut [f32]) {
    for (j0, group) in rows.chunks_exact(8).enumerate().map(|(g, rows)| (8 * g, rows)) {
        for i0 in (0..d).step_by(8) {
            let mut loaded = [_mm256_setzero_ps(); 8];
            for (l, row) in loaded.iter_mut().zip(group) {
                // SAFETY: `i0 + 8 <= d` (d is a multiple of 8) values of
                // each row.
                *l = unsafe { load8(kind, row.as_ptr(), i0) };
            }
            for (c, column) in transpose8(loaded).into_iter().enumerate() {
                // SAFETY: `(i0 + c) * BLOCK + j0 + 8 <= d * BLOCK` since
                // `i0 + c < d` and `j0 + 8 <= BLOCK`.
                unsafe { _mm256_storeu_ps(out.as_mut_ptr().add((i0 + c) * BLOCK + j0), column) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every level writes each key's elements to its column and zeros past
    /// the keys up to the columns of their registers, whatever `out` held,
    /// and leaves the columns past those as they were, for keys that fill
    /// no whole group of eight, several, and head sizes past the zero row
    /// (f32 576).
    #[test]
    fn every_level_gives_the_columns_and_zeros_past_the_keys() {
        let levels = Isa::available();
        for level in levels {
            for kind in [RowType::F32, RowType::F16, RowType::Bf16] {
                for d in [8, 12, 40, 64, 256, 576] {
                    let bytes: Vec<u8> =
                        (0..BLOCK * d * kind.bytes()).map(|i| (i * 37 % 251) as u8 & 0x3f | 0x40).collect();
                    let all: Vec<&[u8]> = bytes.chunks_exact(d * kind.bytes()).collect();
                    for n in [0, 1, 3, 7, 8, 9, 16, 17, 32, 33, 48, 63, BLOCK] {
                        let mut out = vec![f32::NAN; d * BLOCK];
                        transpose_rows(level, kind, &all[..n], d, &mut out);
                        for i in 0..d {
                            for j in 0..BLOCK {
                                let want = match j {
                                    _ if j < n => kind.element(all[j], i),
                                    _ if j < columns(n) => 0.0,
                                    _ => f32::NAN,
                                };
                                let got = out[i * BLOCK + j];
                                assert!(
                                    got.to_bits() == want.to_bits(),
                                    "{level:?} {kind:?} d {d} n {n}: element {i} of key {j} is {got}, not {want}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}
