//! The scores of a decode step's few query rows (at most [`TILE_ROWS`]:
//! a group of query heads over one key-value head) against a block of keys
//! read where the cache holds them, on AVX-512: sixteen keys' elements
//! `i..i + 16` are loaded (f16 and bf16 widened, Q8_0 and Q4_0 decoded as
//! they load, [`Elements::load16`]), transposed in registers, and fed to
//! the rows' fused multiply-adds at once, so a key is read and converted
//! once for all the rows and no transposed block goes through memory
//! (`transpose` then `scores`, which a prompt's many rows share instead).
//!
//! The arithmetic is `scores`' own: key `j`'s score for row `r` is
//! `Σ_i q_r[i] k_j[i]`, fused multiply-adds in order of `i` from 0, in
//! lane `j % KEY_LANES` of a register; so the bits are those of the
//! transposed path at every level.

use baton_core::graph::ATTENTION_BLOCK as BLOCK;

use super::block::{first, KEY_LANES, TILE_ROWS};
use super::source::{with_elements, Elements, Source};
use crate::isa::Isa;

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Whether [`scores_direct`] takes keys of `d` elements at level `isa`.
pub(super) fn applies(isa: Isa, d: usize) -> bool {
    cfg!(target_arch = "x86_64") && isa == Isa::Avx512 && d > 0 && d.is_multiple_of(KEY_LANES)
}

/// `out[r][j] = Σ_i qs[r][i] k_j[i]` for the first `rows` (1 to
/// [`TILE_ROWS`]) of `qs` and the first `keys` rows of `source` (at most
/// [`BLOCK`]); the scores of the columns past `keys` up to a whole
/// register are those of zero keys, and the columns past those are not
/// touched (as `scores` leaves them).
///
/// # Panics
/// If [`applies`] is false for `isa` and the queries' size, `keys` exceeds
/// [`BLOCK`] or the rows `source` holds, or a query is shorter than the
/// first (caller bugs).
pub(super) fn scores_direct(
    isa: Isa,
    source: Source<'_>,
    keys: usize,
    qs: [&[f32]; TILE_ROWS],
    rows: usize,
    out: &mut [[f32; BLOCK]; TILE_ROWS],
) {
    let d = qs[0].len();
    assert!(applies(isa, d), "scores_direct: AVX-512 and whole registers of elements");
    assert!(keys <= BLOCK, "scores_direct: a block of keys");
    assert!(qs[..rows.clamp(1, TILE_ROWS)].iter().all(|q| q.len() >= d), "scores_direct: queries of the head size");
    with_elements!(source, source => {
        assert!(source.len() >= keys, "scores_direct: the block's keys");
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `applies` gave `Isa::Avx512` (which `Isa::current` returns
        // only where the CPU has its features) and `d` a multiple of 16;
        // the asserts give `keys` rows of the source and queries of `d`;
        // the source's rows are `d` long (its builder cut them with the
        // head size, as for the values).
        unsafe {
            match rows {
                // No rows asked for: one (the first query, whose length
                // is `d`), never the four whose lengths were not checked.
                0 | 1 => avx512::scores::<_, 1>(&source, keys, first(qs), d, out),
                2 => avx512::scores::<_, 2>(&source, keys, first(qs), d, out),
                3 => avx512::scores::<_, 3>(&source, keys, first(qs), d, out),
                _ => avx512::scores::<_, TILE_ROWS>(&source, keys, qs, d, out),
            }
        }
    });
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::*;

    /// The 16x16 transpose of `r`: lane `c` of row `x` becomes lane `x` of
    /// row `c` (pairs of lanes, then of 64-bit halves, within 128-bit
    /// quarters, then a 4x4 transpose of the quarters).
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
    #[inline]
    fn transpose16(r: &[__m512; 16]) -> [__m512; 16] {
        // t[2p] holds lanes 4q, 4q+1 of rows 2p and 2p+1 (quarter q), t[2p+1]
        // lanes 4q+2, 4q+3.
        let t: [__m512; 16] = std::array::from_fn(|x| {
            let (a, b) = (r[x & !1], r[x | 1]);
            if x % 2 == 0 {
                _mm512_unpacklo_ps(a, b)
            } else {
                _mm512_unpackhi_ps(a, b)
            }
        });
        // u[4g + e] holds, in quarter q, lane 4q + e of rows 4g..4g + 4.
        let u: [__m512; 16] = std::array::from_fn(|x| {
            let (g, e) = (x / 4, x % 4);
            let (a, b) = (_mm512_castps_pd(t[4 * g + e / 2]), _mm512_castps_pd(t[4 * g + 2 + e / 2]));
            _mm512_castpd_ps(if e % 2 == 0 { _mm512_unpacklo_pd(a, b) } else { _mm512_unpackhi_pd(a, b) })
        });
        // Row 4q + e of the result: quarter q of u[e], u[4 + e], u[8 + e],
        // u[12 + e].
        let mut out = [_mm512_setzero_ps(); 16];
        for e in 0..4 {
            let (a, b, c, d) = (u[e], u[4 + e], u[8 + e], u[12 + e]);
            let (ab_low, ab_high) = (_mm512_shuffle_f32x4::<0x44>(a, b), _mm512_shuffle_f32x4::<0xEE>(a, b));
            let (cd_low, cd_high) = (_mm512_shuffle_f32x4::<0x44>(c, d), _mm512_shuffle_f32x4::<0xEE>(c, d));
            out[e] = _mm512_shuffle_f32x4::<0x88>(ab_low, cd_low);
            out[4 + e] = _mm512_shuffle_f32x4::<0xDD>(ab_low, cd_low);
            out[8 + e] = _mm512_shuffle_f32x4::<0x88>(ab_high, cd_high);
            out[12 + e] = _mm512_shuffle_f32x4::<0xDD>(ab_high, cd_high);
        }
        out
    }

    /// [`scores_direct`] for `R` rows.
    ///
    /// # Safety
    /// The CPU has the `Isa::Avx512` features; `source` holds `keys <=
    /// BLOCK` rows of `d` elements, `d` a multiple of 16; each query holds
    /// `d`.
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
    pub(super) unsafe fn scores<S: Elements, const R: usize>(
        source: &S,
        keys: usize,
        qs: [&[f32]; R],
        d: usize,
        out: &mut [[f32; BLOCK]; TILE_ROWS],
    ) {
        for j0 in (0..keys).step_by(KEY_LANES) {
            let here = (keys - j0).min(KEY_LANES);
            let mut acc = [_mm512_setzero_ps(); R];
            for i0 in (0..d).step_by(KEY_LANES) {
                let loaded: [__m512; KEY_LANES] = if here == KEY_LANES {
                    // Whole groups (all but a decode step's last): loads
                    // straight into registers.
                    // SAFETY: row j0 + l < keys of the source, elements
                    // i0..i0 + 16 <= d (the caller's guarantees).
                    std::array::from_fn(|l| unsafe { source.load16(j0 + l, i0) })
                } else {
                    std::array::from_fn(|l| {
                        if l < here {
                            // SAFETY: as above, l < here.
                            unsafe { source.load16(j0 + l, i0) }
                        } else {
                            _mm512_setzero_ps()
                        }
                    })
                };
                let columns = transpose16(&loaded);
                for (t, column) in columns.iter().enumerate() {
                    for r in 0..R {
                        // SAFETY: i0 + t < d, inside each query.
                        let q = unsafe { *qs[r].as_ptr().add(i0 + t) };
                        acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(q), *column, acc[r]);
                    }
                }
            }
            for r in 0..R {
                // SAFETY: j0 + 16 <= BLOCK (BLOCK is whole registers of keys).
                unsafe { _mm512_storeu_ps(out[r].as_mut_ptr().add(j0), acc[r]) };
            }
        }
    }
}
