//! The scores of a tile of query rows against a block of keys transposed
//! (`kt[i * BLOCK + j]` is element `i` of key `j`, `transpose`): every row
//! and key in a register lane of its own, so the sums run side by side.
//!
//! A dot product sums its terms in order of the head's elements, each a
//! fused multiply-add. The order matters beyond the last bits: rotary
//! embeddings pair neighbouring dimensions whose products can be large and
//! nearly opposite (massive activations), and this order adds such a pair
//! before anything else meets it. Row-form kernels that kept 16 lane sums
//! added as a tree moved SmolLM2's perplexity over the Debian license texts
//! by +0.17% (`docs/measurements.md`); summing in f64 restored it but cost
//! prompts 16% at 4,096 positions.

use baton_core::graph::ATTENTION_BLOCK as BLOCK;

use super::block::{first, KEY_LANES, TILE_ROWS};
use crate::isa::multiversion;

/// `out[r][j] = Σ_i q_r[i] k_j[i]` (fused multiply-adds in order of `i`)
/// for the `R` queries `qs` and the first `C` registers of keys
/// (`C * KEY_LANES` of the `BLOCK` columns) of the transposed block `kt`.
#[inline(always)]
fn scores_body<const R: usize, const C: usize>(qs: [&[f32]; R], kt: &[f32], out: &mut [[f32; BLOCK]; R]) {
    let d = qs[0].len();
    let kt = &kt[..d * BLOCK];
    let mut acc = [[[0.0f32; KEY_LANES]; C]; R];
    for i in 0..d {
        let k = &kt[i * BLOCK..i * BLOCK + C * KEY_LANES];
        for r in 0..R {
            let q = qs[r][i];
            for c in 0..C {
                for l in 0..KEY_LANES {
                    acc[r][c][l] = q.mul_add(k[c * KEY_LANES + l], acc[r][c][l]);
                }
            }
        }
    }
    for r in 0..R {
        for c in 0..C {
            out[r][c * KEY_LANES..(c + 1) * KEY_LANES].copy_from_slice(&acc[r][c]);
        }
    }
}

/// [`scores_body`] for `R` rows and the registers that hold `cols` keys.
#[inline(always)]
fn scores_rows<const R: usize>(qs: [&[f32]; R], cols: usize, kt: &[f32], out: &mut [[f32; BLOCK]; R]) {
    const { assert!(BLOCK == 4 * KEY_LANES, "a block is four registers of keys") };
    match cols.div_ceil(KEY_LANES) {
        0 => {}
        1 => scores_body::<R, 1>(qs, kt, out),
        2 => scores_body::<R, 2>(qs, kt, out),
        3 => scores_body::<R, 3>(qs, kt, out),
        _ => scores_body::<R, 4>(qs, kt, out),
    }
}

multiversion! {
    /// [`scores_body`] for the first `rows` (1 to `TILE_ROWS`) of `qs` and
    /// `out` and the first `cols` keys (rounded up to whole registers; the
    /// scores past them are not written): a decode step's group of query
    /// heads costs its own rows only, and its last block its own keys.
    pub(super) fn scores(
        qs: [&[f32]; TILE_ROWS],
        rows: usize,
        cols: usize,
        kt: &[f32],
        out: &mut [[f32; BLOCK]; TILE_ROWS],
    ) {
        match rows {
            1 => scores_rows::<1>(first(qs), cols, kt, (&mut out[..1]).try_into().expect("1 row")),
            2 => scores_rows::<2>(first(qs), cols, kt, (&mut out[..2]).try_into().expect("2 rows")),
            3 => scores_rows::<3>(first(qs), cols, kt, (&mut out[..3]).try_into().expect("3 rows")),
            _ => scores_rows::<TILE_ROWS>(qs, cols, kt, out),
        }
    }
}
