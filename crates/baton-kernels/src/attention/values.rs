//! The values' half of the online-softmax update: each output element `i`
//! of row `r` becomes `out[i] · correction_r` (one product), then gets
//! `p_rj v_j[i]` added in order of `j` (fused multiply-adds). Every level
//! does exactly these operations per element; the SIMD levels take a few
//! registers of elements per pass and share each value load among the
//! rows, widening 16-bit values as they load them (exact).

use baton_core::graph::ATTENTION_BLOCK as BLOCK;

use super::source::Elements;
use crate::isa::Isa;

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Folds values `0..keys` weighted by `probs[r]` into each row's output,
/// as the module docs say.
///
/// The outputs are all `d` long, the head size the values' rows were cut
/// with.
///
/// # Panics
/// If `values` holds fewer than `keys` rows, `keys` exceeds [`BLOCK`], or
/// the outputs' lengths differ (caller bugs).
pub(super) fn accumulate<S: Elements, const R: usize>(
    isa: Isa,
    probs: &[[f32; BLOCK]; R],
    keys: usize,
    values: S,
    corrections: &[f32; R],
    outs: &mut [&mut [f32]; R],
) {
    assert!(keys <= BLOCK && values.len() >= keys, "accumulate: the block's values");
    let d = outs[0].len();
    assert!(outs.iter().all(|o| o.len() == d), "accumulate: outputs of the head size");
    #[cfg(target_arch = "x86_64")]
    {
        if isa == Isa::Avx512 && d.is_multiple_of(16) {
            // SAFETY: `isa` comes from `Isa::current` (AVX-512 features);
            // `keys` rows of `values` and `d`-long outputs (asserts above),
            // `d` a multiple of 16, the values' rows `d` long (the caller
            // built them with the outputs' size).
            unsafe { avx512::accumulate(probs, keys, &values, corrections, outs) };
            return;
        }
        if isa.has_avx2() && d.is_multiple_of(8) {
            // SAFETY: as above, with AVX2, FMA and F16C, `d` a multiple of 8.
            unsafe { avx2::accumulate(probs, keys, &values, corrections, outs) };
            return;
        }
    }
    let _ = isa;
    for r in 0..R {
        for i in 0..d {
            let mut a = outs[r][i] * corrections[r];
            for (j, p) in probs[r][..keys].iter().enumerate() {
                a = p.mul_add(values.get(j, i), a);
            }
            outs[r][i] = a;
        }
    }
}

/// Writes one SIMD level's `accumulate` and its pass over `G` registers of
/// elements from `$lanes` elements each, with its loads, broadcasts and
/// multiply-adds, and the most registers `$most(R)` a pass may take.
macro_rules! level {
    ($level:ident, $features:literal, $reg:ty, $lanes:expr, $load:ident, $loadu:ident, $storeu:ident,
     $set1:ident, $mul:ident, $fmadd:ident, $most:expr) => {
        #[cfg(target_arch = "x86_64")]
        mod $level {
            use super::*;

            /// # Safety
            /// The CPU has this level's features; `values` holds `keys`
            /// rows of `d` elements and each output is `d` long, `d` a
            /// multiple of the register's lanes.
            #[target_feature(enable = $features)]
            pub(super) unsafe fn accumulate<S: Elements, const R: usize>(
                probs: &[[f32; BLOCK]; R],
                keys: usize,
                values: &S,
                corrections: &[f32; R],
                outs: &mut [&mut [f32]; R],
            ) {
                let d = outs[0].len();
                let most: usize = $most(R);
                let mut c = 0;
                while c < d {
                    let g = ((d - c) / $lanes).min(most);
                    // SAFETY: the caller's guarantees; elements c.. c + g
                    // registers lie inside `d`.
                    unsafe {
                        match g {
                            1 => pass::<S, R, 1>(probs, keys, values, corrections, outs, c),
                            2 => pass::<S, R, 2>(probs, keys, values, corrections, outs, c),
                            3 => pass::<S, R, 3>(probs, keys, values, corrections, outs, c),
                            _ => pass::<S, R, 4>(probs, keys, values, corrections, outs, c),
                        }
                    }
                    c += g.min(4) * $lanes;
                }
            }

            /// Elements `c..c + G` registers of every row.
            ///
            /// # Safety
            /// As [`accumulate`], with `c + G * lanes <= d`.
            #[target_feature(enable = $features)]
            #[inline]
            unsafe fn pass<S: Elements, const R: usize, const G: usize>(
                probs: &[[f32; BLOCK]; R],
                keys: usize,
                values: &S,
                corrections: &[f32; R],
                outs: &mut [&mut [f32]; R],
                c: usize,
            ) {
                let mut a: [[$reg; G]; R] = std::array::from_fn(|r| {
                    let correction = $set1(corrections[r]);
                    // SAFETY: c + G lanes' registers lie inside the output.
                    std::array::from_fn(|g| $mul(unsafe { $loadu(outs[r].as_ptr().add(c + g * $lanes)) }, correction))
                });
                for j in 0..keys {
                    // SAFETY: j < keys <= the values' rows, inside `d`.
                    let v: [$reg; G] = std::array::from_fn(|g| unsafe { values.$load(j, c + g * $lanes) });
                    for r in 0..R {
                        let p = $set1(probs[r][j]);
                        for g in 0..G {
                            a[r][g] = $fmadd(p, v[g], a[r][g]);
                        }
                    }
                }
                for r in 0..R {
                    for g in 0..G {
                        // SAFETY: as for the loads.
                        unsafe { $storeu(outs[r].as_mut_ptr().add(c + g * $lanes), a[r][g]) };
                    }
                }
            }
        }
    };
}

level!(
    avx512,
    "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni",
    __m512,
    16,
    load16,
    _mm512_loadu_ps,
    _mm512_storeu_ps,
    _mm512_set1_ps,
    _mm512_mul_ps,
    _mm512_fmadd_ps,
    |_rows: usize| 4
);
level!(
    avx2,
    "avx2,fma,f16c",
    __m256,
    8,
    load8,
    _mm256_loadu_ps,
    _mm256_storeu_ps,
    _mm256_set1_ps,
    _mm256_mul_ps,
    _mm256_fmadd_ps,
    // 16 registers: R * G accumulators, G values and a broadcast.
    |rows: usize| match rows {
        0..=2 => 4,
        3 => 3,
        _ => 2,
    }
);
