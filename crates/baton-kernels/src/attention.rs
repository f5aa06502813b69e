//! Streamed attention of query rows over one key-value head: keys and
//! values are decoded to f32 a block of [`BLOCK`] positions at a time and
//! each row keeps a running maximum, sum and output (online softmax), so
//! no row of scores is held whole and the scratch does not grow with the
//! context.
//!
//! Each row's arithmetic depends only on its own query, its key range and
//! the keys: blocks are counted from position 0, a row takes the part of
//! each block inside its range, in order, and every sum runs in a fixed
//! order (a dot product sums its terms in order of the head's elements, an
//! output element its terms in order of the keys, each term a fused
//! multiply-add, which every instruction level rounds alike; several rows
//! or keys at once only share loads).
//! So a row gives the same bits alone or among any other rows, at any
//! instruction level, which is what keeps batching and tensor-parallel
//! splits exact.

use std::ops::Range;

use baton_core::graph::ATTENTION_BLOCK;
use baton_core::DType;

use crate::error::KernelError;
use crate::isa::{multiversion, Isa};
use crate::ops::exp;
use crate::quant::dequantize_row;

/// Key positions decoded and taken at a time.
pub const BLOCK: usize = ATTENTION_BLOCK;

/// Keys or values of one key-value head: position `s` is `dim` elements of
/// `dtype` (whole blocks) at byte `(s mod len) * stride` of `data` (a
/// cache of every position, or a ring of the last `len`).
#[derive(Clone, Copy, Debug)]
pub struct KvRows<'a> {
    /// Element type.
    pub dtype: DType,
    /// The rows' bytes.
    pub data: &'a [u8],
    /// Bytes from one position's row to the next.
    pub stride: usize,
    /// Elements per row (the head size).
    pub dim: usize,
    /// Positions.
    pub len: usize,
}

impl KvRows<'_> {
    fn check(&self, what: &'static str) -> Result<usize, KernelError> {
        let row = self.dtype.row_bytes(self.dim).ok_or(KernelError::PartialBlock {
            dtype: self.dtype,
            block_elems: self.dtype.block_elems(),
            elems: self.dim,
        })?;
        if self.len > 1 && self.stride < row {
            return Err(KernelError::StrideTooSmall { what, stride: self.stride, row });
        }
        let needed = if self.len == 0 { 0 } else { (self.len - 1) * self.stride + row };
        if self.data.len() < needed {
            return Err(KernelError::BufferTooSmall { what, needed, actual: self.data.len() });
        }
        Ok(row)
    }

    /// Decodes positions `range` (at most `len` of them) into `out`
    /// (`range.len() * dim` values).
    fn decode(&self, range: Range<usize>, row: usize, out: &mut [f32]) -> Result<(), KernelError> {
        let first = range.start % self.len;
        if self.stride == row && first + range.len() <= self.len {
            let bytes = &self.data[first * row..(first + range.len()) * row];
            return dequantize_row(self.dtype, bytes, out);
        }
        for (s, o) in range.zip(out.chunks_exact_mut(self.dim)) {
            let at = (s % self.len) * self.stride;
            dequantize_row(self.dtype, &self.data[at..at + row], o)?;
        }
        Ok(())
    }
}

/// One query row: its query (head size), the key positions it sees (at
/// most the keys' `len`), and where its output goes (head size).
#[derive(Debug)]
pub struct QueryRow<'a> {
    /// The query.
    pub q: &'a [f32],
    /// Positions it attends (`start..end`, inside the keys).
    pub keys: Range<usize>,
    /// Its output.
    pub out: &'a mut [f32],
}

/// One thread's buffers: a block of keys and of values in f32, scores, and
/// each row's running maximum and sum. Reused from call to call.
#[derive(Debug, Default)]
pub struct AttentionScratch {
    keys: Vec<f32>,
    transposed: Vec<f32>,
    values: Vec<f32>,
    scores: Vec<[f32; BLOCK]>,
    state: Vec<(f32, f32)>,
}

/// Keys whose scores one pass of [`scores_impl`] keeps in registers.
const KEY_LANES: usize = 16;
/// Query rows scored together against each loaded key vector.
const TILE_ROWS: usize = 4;

multiversion! {
    /// `out[r][j] = Σ_i q_r[i] k_j[i]` (fused multiply-adds in order of
    /// `i`) for the `TILE_ROWS` queries `qs` and the `BLOCK` keys of the
    /// transposed block `kt` (`kt[i * BLOCK + j]`): every row and key in a
    /// register lane of its own, so the sums run side by side.
    fn scores_impl(qs: [&[f32]; TILE_ROWS], kt: &[f32], out: &mut [[f32; BLOCK]; TILE_ROWS]) {
        const CHUNKS: usize = BLOCK / KEY_LANES;
        let d = qs[0].len();
        let kt = &kt[..d * BLOCK];
        let mut acc = [[[0.0f32; KEY_LANES]; CHUNKS]; TILE_ROWS];
        for i in 0..d {
            let k = &kt[i * BLOCK..(i + 1) * BLOCK];
            for r in 0..TILE_ROWS {
                let q = qs[r][i];
                for c in 0..CHUNKS {
                    for l in 0..KEY_LANES {
                        acc[r][c][l] = q.mul_add(k[c * KEY_LANES + l], acc[r][c][l]);
                    }
                }
            }
        }
        for r in 0..TILE_ROWS {
            for c in 0..CHUNKS {
                out[r][c * KEY_LANES..(c + 1) * KEY_LANES].copy_from_slice(&acc[r][c]);
            }
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
    fn update_one(scores: &mut [f32], values: &[f32], scale: f32, state: &mut (f32, f32), out: &mut [f32]) {
        update_body::<1>([scores], values, scale, [state], [out])
    }
}

multiversion! {
    /// [`update_body`] for a tile of rows that see the same keys.
    fn update_tile(
        scores: [&mut [f32]; TILE_ROWS],
        values: &[f32],
        scale: f32,
        states: [&mut (f32, f32); TILE_ROWS],
        outs: [&mut [f32]; TILE_ROWS],
    ) {
        update_body::<TILE_ROWS>(scores, values, scale, states, outs)
    }
}

/// Attention of `rows` over keys `k` and values `v` of one key-value head:
/// each row's output is `Σ_s softmax_s(scale · q · k_s) v_s` over its key
/// range (0 for an empty range). See the module doc for the order of the
/// arithmetic.
///
/// # Errors
/// [`KernelError`] if the keys and values disagree in length or size,
/// their bytes are short, a row's query or output is not the head size, or
/// a row's keys reach past them.
pub fn attend(
    rows: &mut [QueryRow<'_>],
    k: KvRows<'_>,
    v: KvRows<'_>,
    scale: f32,
    scratch: &mut AttentionScratch,
) -> Result<(), KernelError> {
    let (k_row, v_row) = (k.check("keys")?, v.check("values")?);
    let d = k.dim;
    crate::error::expect_len("values per key", d, v.dim)?;
    crate::error::expect_len("value positions", k.len, v.len)?;
    let (mut lo, mut hi) = (usize::MAX, 0);
    for row in rows.iter() {
        crate::error::expect_len("query size", d, row.q.len())?;
        crate::error::expect_len("output size", d, row.out.len())?;
        if row.keys.len() > k.len {
            return Err(KernelError::RangeOutOfBounds {
                what: "attended key positions (more than the cache holds)",
                start: row.keys.start,
                end: row.keys.end,
                len: k.len,
            });
        }
        if !row.keys.is_empty() {
            lo = lo.min(row.keys.start);
            hi = hi.max(row.keys.end);
        }
    }
    for row in rows.iter_mut() {
        row.out.fill(0.0);
    }
    if lo >= hi {
        return Ok(());
    }
    let AttentionScratch { keys, transposed, values, scores, state } = scratch;
    keys.resize(BLOCK * d, 0.0);
    transposed.resize(BLOCK * d, 0.0);
    values.resize(BLOCK * d, 0.0);
    scores.resize(TILE_ROWS, [0.0; BLOCK]);
    state.clear();
    state.resize(rows.len(), (f32::NEG_INFINITY, 0.0));
    let isa = Isa::current();
    let zeros = vec![0.0f32; d];
    let mut tile: Vec<usize> = Vec::with_capacity(TILE_ROWS);
    for block in lo / BLOCK..hi.div_ceil(BLOCK) {
        let (b0, b1) = ((block * BLOCK).max(lo), ((block + 1) * BLOCK).min(hi));
        let sees = |r: &QueryRow<'_>| r.keys.start < b1 && b0 < r.keys.end;
        if !rows.iter().any(sees) {
            continue;
        }
        let n = b1 - b0;
        k.decode(b0..b1, k_row, &mut keys[..n * d])?;
        v.decode(b0..b1, v_row, &mut values[..n * d])?;
        // Keys transposed (`[d][BLOCK]`), so a key's score is a lane of a
        // vector; past `n` they are zeros, whose scores nothing reads.
        for i in 0..d {
            let column = &mut transposed[i * BLOCK..(i + 1) * BLOCK];
            for (j, t) in column.iter_mut().enumerate() {
                *t = if j < n { keys[j * d + i] } else { 0.0 };
            }
        }
        let mut next = 0;
        while next < rows.len() {
            tile.clear();
            while tile.len() < TILE_ROWS && next < rows.len() {
                if sees(&rows[next]) {
                    tile.push(next);
                }
                next += 1;
            }
            if tile.is_empty() {
                break;
            }
            let mut qs = [&zeros[..]; TILE_ROWS];
            for (q, &r) in qs.iter_mut().zip(&tile) {
                *q = rows[r].q;
            }
            let tile_scores: &mut [[f32; BLOCK]; TILE_ROWS] =
                (&mut scores[..TILE_ROWS]).try_into().expect("TILE_ROWS score rows");
            scores_impl(isa, qs, transposed, tile_scores);
            // Rows that see the same keys of the block (all but those on
            // the causal diagonal or a window's edge) fold them together.
            let range = |r: &QueryRow<'_>| (r.keys.start.max(b0) - b0, r.keys.end.min(b1) - b0);
            let (j0, j1) = range(&rows[tile[0]]);
            let together = tile.iter().all(|&r| range(&rows[r]) == (j0, j1));
            if together && tile.len() == TILE_ROWS {
                let at: [usize; TILE_ROWS] = std::array::from_fn(|i| tile[i]);
                let picked_rows = rows.get_disjoint_mut(at).expect("distinct rows of the tile");
                let states = state.get_disjoint_mut(at).expect("distinct rows of the tile");
                let mut ss = tile_scores.iter_mut().map(|s| &mut s[j0..j1]);
                let scores: [&mut [f32]; TILE_ROWS] = std::array::from_fn(|_| ss.next().expect("a score row"));
                let outs = picked_rows.map(|row| &mut *row.out);
                update_tile(isa, scores, &values[j0 * d..j1 * d], scale, states, outs);
            } else {
                for (&r, s) in tile.iter().zip(tile_scores.iter_mut()) {
                    let (j0, j1) = range(&rows[r]);
                    update_one(isa, &mut s[j0..j1], &values[j0 * d..j1 * d], scale, &mut state[r], rows[r].out);
                }
            }
        }
    }
    for (row, &(_, sum)) in rows.iter_mut().zip(state.iter()) {
        if sum > 0.0 {
            let inverse = 1.0 / sum;
            for o in row.out.iter_mut() {
                *o *= inverse;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
