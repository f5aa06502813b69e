//! The register kernels of one block of keys: the block's keys transposed,
//! the scores of a tile of query rows, and the online-softmax update of
//! each row's running state and output (see the parent module for the
//! order of the arithmetic they keep).

use crate::isa::multiversion;
use crate::ops::exp;
use baton_core::graph::ATTENTION_BLOCK as BLOCK;

/// Keys whose scores one pass of [`scores_impl`] keeps in registers.
pub(super) const KEY_LANES: usize = 16;
/// Query rows scored together against each loaded key vector.
pub(super) const TILE_ROWS: usize = 4;

/// `out[r][j] = Σ_i q_r[i] k_j[i]` (fused multiply-adds in order of `i`)
/// for the `R` queries `qs` and the `BLOCK` keys of the transposed block
/// `kt` (`kt[i * BLOCK + j]`): every row and key in a register lane of its
/// own, so the sums run side by side.
#[inline(always)]
fn scores_body<const R: usize>(qs: [&[f32]; R], kt: &[f32], out: &mut [[f32; BLOCK]; R]) {
    const CHUNKS: usize = BLOCK / KEY_LANES;
    let d = qs[0].len();
    let kt = &kt[..d * BLOCK];
    let mut acc = [[[0.0f32; KEY_LANES]; CHUNKS]; R];
    for i in 0..d {
        let k = &kt[i * BLOCK..(i + 1) * BLOCK];
        for r in 0..R {
            let q = qs[r][i];
            for c in 0..CHUNKS {
                for l in 0..KEY_LANES {
                    acc[r][c][l] = q.mul_add(k[c * KEY_LANES + l], acc[r][c][l]);
                }
            }
        }
    }
    for r in 0..R {
        for c in 0..CHUNKS {
            out[r][c * KEY_LANES..(c + 1) * KEY_LANES].copy_from_slice(&acc[r][c]);
        }
    }
}

/// The first `rows` of an array of `TILE_ROWS`, as an array of `R`.
#[inline(always)]
fn first<T, const R: usize>(items: [T; TILE_ROWS]) -> [T; R] {
    let mut items = items.into_iter();
    std::array::from_fn(|_| items.next().expect("R <= TILE_ROWS"))
}

multiversion! {
    /// [`scores_body`] for the first `rows` (1 to `TILE_ROWS`) of `qs` and
    /// `out`: a decode step's group of query heads costs its own rows only.
    pub(super) fn scores_impl(qs: [&[f32]; TILE_ROWS], rows: usize, kt: &[f32], out: &mut [[f32; BLOCK]; TILE_ROWS]) {
        match rows {
            1 => scores_body::<1>(first(qs), kt, (&mut out[..1]).try_into().expect("1 row")),
            2 => scores_body::<2>(first(qs), kt, (&mut out[..2]).try_into().expect("2 rows")),
            3 => scores_body::<3>(first(qs), kt, (&mut out[..3]).try_into().expect("3 rows")),
            _ => scores_body::<TILE_ROWS>(qs, kt, out),
        }
    }
}

/// Turns one row's dot products with keys `j` into the weights
/// `exp(scale · dot_j - max)` under the row's new running maximum, updates
/// its running `(max, sum)`, and returns the factor its output is scaled by.
/// The block's sum is kept in `KEY_LANES` partial sums (key `j` in lane `j %
/// KEY_LANES` of the row's own keys), added up as a fixed tree.
#[inline(always)]
fn softmax_step(scores: &mut [f32], scale: f32, state: &mut (f32, f32)) -> f32 {
    let mut tops = [f32::NEG_INFINITY; KEY_LANES];
    for chunk in scores.chunks_mut(KEY_LANES) {
        for (t, s) in tops.iter_mut().zip(chunk.iter_mut()) {
            *s *= scale;
            *t = t.max(*s);
        }
    }
    // The maximum of a set, whatever order it is taken in.
    let top = tops.iter().fold(f32::NEG_INFINITY, |m, &t| m.max(t));
    let (max, sum) = *state;
    let new_max = max.max(top);
    // exp(-inf) is exactly 0: the first block scales nothing.
    let correction = exp(max - new_max);
    let mut sums = [0.0f32; KEY_LANES];
    for chunk in scores.chunks_mut(KEY_LANES) {
        for (total, s) in sums.iter_mut().zip(chunk.iter_mut()) {
            *s = exp(*s - new_max);
            *total += *s;
        }
    }
    let mut width = KEY_LANES / 2;
    while width > 0 {
        for l in 0..width {
            sums[l] += sums[l + width];
        }
        width /= 2;
    }
    *state = (new_max, sum * correction + sums[0]);
    correction
}

/// Folds the dot products `scores[r]` of `R` rows with the same keys `j`,
/// and the values `j` (rows of the outputs' size), into each row's running
/// state and output. Every output element is scaled once, then gets
/// `p_j v_j[i]` added in order of `j` (fused multiply-adds), a register's
/// worth of elements at a time; the rows only share the loads of the values.
#[inline(always)]
#[allow(clippy::needless_range_loop)]
fn update_body<const R: usize>(
    scores: [&mut [f32]; R],
    values: &[f32],
    scale: f32,
    states: [&mut (f32, f32); R],
    mut outs: [&mut [f32]; R],
) {
    let keys = scores[0].len();
    let d = outs[0].len();
    let values = &values[..keys * d];
    let mut corrections = [0.0f32; R];
    for r in 0..R {
        assert!(scores[r].len() == keys && outs[r].len() == d, "rows folded together see the same keys");
        corrections[r] = softmax_step(&mut *scores[r], scale, &mut *states[r]);
    }
    // Output elements a group of `G` registers at a time (as many as fit
    // side by side), then one register, then one element.
    // The weights in a fixed-size copy, so the loops below index them
    // without bounds checks.
    let keys = keys.min(BLOCK);
    let mut probs = [[0.0f32; BLOCK]; R];
    for r in 0..R {
        probs[r][..keys].copy_from_slice(&scores[r][..keys]);
    }
    let mut start = 0;
    start = accumulate::<R, 2>(&probs, keys, values, &corrections, &mut outs, start);
    start = accumulate::<R, 1>(&probs, keys, values, &corrections, &mut outs, start);
    for r in 0..R {
        for i in start..d {
            let mut a = outs[r][i] * corrections[r];
            for j in 0..keys {
                a = scores[r][j].mul_add(values[j * d + i], a);
            }
            outs[r][i] = a;
        }
    }
}

/// The output elements from `start` on in groups of `G` registers, as far
/// as whole groups go: each element `i` of row `r` becomes
/// `out[i] · correction_r + Σ_j p_rj v_j[i]`, added in order of `j`.
/// Returns where the whole groups end.
#[inline(always)]
#[allow(clippy::needless_range_loop)]
fn accumulate<const R: usize, const G: usize>(
    probs: &[[f32; BLOCK]; R],
    keys: usize,
    values: &[f32],
    corrections: &[f32; R],
    outs: &mut [&mut [f32]; R],
    start: usize,
) -> usize {
    let d = outs[0].len();
    let width = G * KEY_LANES;
    let end = start + (d - start) / width * width;
    for c in (start..end).step_by(width) {
        let mut a = [[[0.0f32; KEY_LANES]; G]; R];
        for r in 0..R {
            let out = &outs[r][c..c + width];
            for g in 0..G {
                for l in 0..KEY_LANES {
                    a[r][g][l] = out[g * KEY_LANES + l] * corrections[r];
                }
            }
        }
        for (j, row) in values.chunks_exact(d).take(keys.min(BLOCK)).enumerate() {
            let v: &[f32; KEY_LANES * 4] = {
                let mut chunk = [0.0f32; KEY_LANES * 4];
                chunk[..width].copy_from_slice(&row[c..c + width]);
                // A copy LLVM folds into the loads below.
                &{ chunk }
            };
            let p: [f32; R] = std::array::from_fn(|r| probs[r][j % BLOCK]);
            for r in 0..R {
                for g in 0..G {
                    for l in 0..KEY_LANES {
                        a[r][g][l] = p[r].mul_add(v[g * KEY_LANES + l], a[r][g][l]);
                    }
                }
            }
        }
        for r in 0..R {
            let out = &mut outs[r][c..c + width];
            for g in 0..G {
                out[g * KEY_LANES..(g + 1) * KEY_LANES].copy_from_slice(&a[r][g]);
            }
        }
    }
    end
}

multiversion! {
    /// [`update_body`] for one row.
    pub(super) fn update_one(scores: &mut [f32], values: &[f32], scale: f32, state: &mut (f32, f32), out: &mut [f32]) {
        update_body::<1>([scores], values, scale, [state], [out])
    }
}

multiversion! {
    /// [`update_body`] for the first `rows` (2 to `TILE_ROWS`) of a tile of
    /// rows that see the same keys (the others are not touched).
    pub(super) fn update_tile(
        scores: [&mut [f32]; TILE_ROWS],
        rows: usize,
        values: &[f32],
        scale: f32,
        states: [&mut (f32, f32); TILE_ROWS],
        outs: [&mut [f32]; TILE_ROWS],
    ) {
        match rows {
            2 => update_body::<2>(first(scores), values, scale, first(states), first(outs)),
            3 => update_body::<3>(first(scores), values, scale, first(states), first(outs)),
            _ => update_body::<TILE_ROWS>(scores, values, scale, states, outs),
        }
    }
}
