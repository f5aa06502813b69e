//! The online-softmax update of each row's running state and output after
//! a block's scores (`scores`), its values folded in by `values` (see the parent module for the
//! order of the arithmetic they keep).

use super::source::{with_elements, Source};
use super::values::accumulate;
use crate::isa::{multiversion, Isa};
use crate::ops::exp;
use baton_core::graph::ATTENTION_BLOCK as BLOCK;

/// Keys whose scores one register holds (`scores`), and the softmax's
/// partial sums of its maximum and total.
pub(super) const KEY_LANES: usize = 16;
/// Query rows scored together against each loaded key vector.
pub(super) const TILE_ROWS: usize = 4;

/// The first `rows` of an array of `TILE_ROWS`, as an array of `R`.
#[inline(always)]
pub(super) fn first<T, const R: usize>(items: [T; TILE_ROWS]) -> [T; R] {
    let mut items = items.into_iter();
    std::array::from_fn(|_| items.next().expect("R <= TILE_ROWS"))
}

/// Turns one row's dot products with keys `j` into the weights
/// `exp(scale · dot_j - max)` under the row's new running maximum (into
/// `probs[j]`), updates its running `(max, sum)`, and returns the factor its
/// output is scaled by. The block's sum is kept in `KEY_LANES` partial sums
/// (key `j` in lane `j % KEY_LANES` of the row's own keys), added up as a
/// fixed tree. The keys are taken a whole register at a time, those past
/// the row's as a score of minus infinity and a weight of 0 (neither moves
/// a maximum or a sum).
#[inline(always)]
fn softmax_step(scores: &[f32], scale: f32, state: &mut (f32, f32), probs: &mut [f32; BLOCK]) -> f32 {
    let n = scores.len().min(BLOCK);
    let chunks = n.div_ceil(KEY_LANES);
    let mut scaled = [f32::NEG_INFINITY; BLOCK];
    for (s, &dot) in scaled.iter_mut().zip(&scores[..n]) {
        *s = dot * scale;
    }
    // `f32::max` where only the new value can be NaN (then the old one
    // stays), without the NaN test that keeps the compiler from `vmaxps`.
    let larger = |a: f32, b: f32| if b > a { b } else { a };
    let mut tops = [f32::NEG_INFINITY; KEY_LANES];
    for chunk in scaled[..chunks * KEY_LANES].chunks_exact(KEY_LANES) {
        for (t, &s) in tops.iter_mut().zip(chunk) {
            *t = larger(*t, s);
        }
    }
    // The maximum of a set, whatever order it is taken in.
    let top = tops.iter().fold(f32::NEG_INFINITY, |m, &t| larger(m, t));
    let (max, sum) = *state;
    let new_max = max.max(top);
    // exp(-inf) is exactly 0: the first block scales nothing.
    let correction = exp(max - new_max);
    let mut sums = [0.0f32; KEY_LANES];
    for (c, chunk) in scaled[..chunks * KEY_LANES].chunks_exact(KEY_LANES).enumerate() {
        let weights = &mut probs[c * KEY_LANES..(c + 1) * KEY_LANES];
        for (l, ((total, &s), w)) in sums.iter_mut().zip(chunk).zip(weights.iter_mut()).enumerate() {
            *w = if c * KEY_LANES + l < n { exp(s - new_max) } else { 0.0 };
            *total += *w;
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
/// state and output (`values::accumulate`, at the level of the thread:
/// `Isa::current`, the one its caller dispatched on).
#[inline(always)]
#[allow(clippy::needless_range_loop)]
fn update_body<const R: usize>(
    scores: [&[f32]; R],
    values: Source<'_>,
    scale: f32,
    states: [&mut (f32, f32); R],
    mut outs: [&mut [f32]; R],
) {
    let keys = scores[0].len();
    let d = outs[0].len();
    let mut corrections = [0.0f32; R];
    let mut probs = [[0.0f32; BLOCK]; R];
    for r in 0..R {
        assert!(scores[r].len() == keys && outs[r].len() == d, "rows folded together see the same keys");
        corrections[r] = softmax_step(scores[r], scale, &mut *states[r], &mut probs[r]);
    }
    let keys = keys.min(BLOCK);
    with_elements!(values, values => accumulate(Isa::current(), &probs, keys, values, &corrections, &mut outs));
}

multiversion! {
    /// [`update_body`] for one row.
    pub(super) fn update_one(
        scores: &[f32],
        values: Source<'_>,
        scale: f32,
        state: &mut (f32, f32),
        out: &mut [f32],
    ) {
        update_body::<1>([scores], values, scale, [state], [out])
    }
}

multiversion! {
    /// [`update_body`] for the first `rows` (2 to `TILE_ROWS`) of a tile of
    /// rows that see the same keys (the others are not touched).
    pub(super) fn update_tile(
        scores: [&[f32]; TILE_ROWS],
        rows: usize,
        values: Source<'_>,
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
