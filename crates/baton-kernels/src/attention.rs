//! Streamed attention of query rows over one key-value head: keys and
//! values are taken a block of [`BLOCK`] positions at a time and
//! each row keeps a running maximum, sum and output (online softmax), so
//! no row of scores is held whole and the scratch does not grow with the
//! context.
//!
//! Each row's arithmetic depends only on its own query, its key range and
//! the keys: blocks are counted from position 0, a row takes the part of
//! each block inside its range, in order, and every sum runs in a fixed
//! order (a dot product sums its terms in order of the head's elements,
//! `scores`; an output element its terms in order of the keys, `values`;
//! each term a fused multiply-add), which every instruction level rounds
//! alike; several rows or keys at once only share loads. Keys are
//! transposed a block at a time (on AVX-512, a decode step's few rows take
//! them where the cache holds them and transpose sixteen at a time in
//! registers: `direct_scores`); values are read where the cache holds
//! them (f32, f16, bf16, Q8_0 and Q4_0 rows in one run of bytes, widened or
//! decoded as they are loaded), else decoded to f32 a block at a time
//! (`source`).
//! So a row gives the same bits alone or among any other rows, at any
//! instruction level, which is what keeps batching and tensor-parallel
//! splits exact.
//!
//! The positions are also cut into segments of [`SEGMENT`] (counted from
//! 0 like the blocks): a row's keys inside one segment give a [`Partial`]
//! result of their own, and the segments' results are folded in order of
//! position ([`fold`]). So the keys of one row can be split over threads
//! by segment ([`attend_segments`], then [`combine`]: what a decode step
//! of few rows over a long context needs) and give the bits of one thread
//! taking them all ([`attend`]).

use std::ops::Range;

use baton_core::graph::ATTENTION_BLOCK;

use crate::error::KernelError;
use crate::isa::{multiversion, Isa};
use crate::ops::exp;

mod block;
mod direct_scores;
mod kv_rows;
mod scores;
mod source;
mod transpose;
#[allow(clippy::needless_range_loop)]
mod values;

use block::{update_one, update_tile, TILE_ROWS};
pub use kv_rows::KvRows;
use scores::scores;

/// Key positions decoded and taken at a time.
pub const BLOCK: usize = ATTENTION_BLOCK;

/// Key positions a row folds into one [`Partial`] before it joins the
/// others: segment `s` is positions `s * SEGMENT..(s + 1) * SEGMENT`.
pub const SEGMENT: usize = 8 * BLOCK;

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
    /// A sink logit its softmax also counts, of a key with a zero value
    /// (gpt-oss's attention sinks; see [`add_sink`]).
    pub sink: Option<f32>,
}

/// A query row without an output, for [`attend_segments`].
#[derive(Clone, Debug)]
pub struct Query<'a> {
    /// The query.
    pub q: &'a [f32],
    /// Positions it attends (`start..end`, inside the keys).
    pub keys: Range<usize>,
}

/// One row's result over some keys before normalising: the running
/// maximum of its scaled scores and the sum of their exponentials under it
/// (the output beside it is `Σ exp(score - max) v`). A sum of 0 means no
/// key was seen.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Partial {
    /// The largest scaled score.
    pub max: f32,
    /// `Σ exp(score - max)`.
    pub sum: f32,
}

impl Default for Partial {
    fn default() -> Partial {
        Partial { max: f32::NEG_INFINITY, sum: 0.0 }
    }
}

/// One thread's buffers: a block of keys and of values in f32, scores,
/// each row's partial result over the current segment, and the results
/// folded so far. Reused from call to call.
#[derive(Debug, Default)]
pub struct AttentionScratch {
    block: BlockScratch,
    folded: Vec<f32>,
    folded_state: Vec<Partial>,
}

#[derive(Debug, Default)]
struct BlockScratch {
    keys: Vec<f32>,
    values: Vec<f32>,
    scores: Vec<[f32; BLOCK]>,
    transposed: Vec<f32>,
    state: Vec<(f32, f32)>,
    partial: Vec<f32>,
    /// A query of zeros for the spare rows of a tile (never written).
    zeros: Vec<f32>,
}

/// The rows of one tile: at most [`TILE_ROWS`], without an allocation.
#[derive(Default)]
struct Tile {
    rows: [usize; TILE_ROWS],
    len: usize,
}

impl Tile {
    fn push(&mut self, r: usize) {
        self.rows[self.len] = r;
        self.len += 1;
    }
}

impl std::ops::Deref for Tile {
    type Target = [usize];
    fn deref(&self) -> &[usize] {
        &self.rows[..self.len]
    }
}

/// The query rows of a call, with or without outputs.
trait Rows {
    fn count(&self) -> usize;
    fn q(&self, r: usize) -> &[f32];
    fn keys(&self, r: usize) -> Range<usize>;
}

/// [`Rows`] for a slice of row types with fields `q` and `keys`.
macro_rules! rows_of {
    ($($row:ident),*) => {$(
        impl Rows for [$row<'_>] {
            fn count(&self) -> usize {
                self.len()
            }
            fn q(&self, r: usize) -> &[f32] {
                self[r].q
            }
            fn keys(&self, r: usize) -> Range<usize> {
                self[r].keys.clone()
            }
        }
    )*};
}

rows_of!(QueryRow, Query);

/// Checks the keys, values and rows agree; returns the bytes of a key and
/// of a value row and the span of positions any row sees (empty if none).
fn check<R: Rows + ?Sized>(
    rows: &R,
    k: &KvRows<'_>,
    v: &KvRows<'_>,
) -> Result<(usize, usize, Range<usize>), KernelError> {
    let (k_row, v_row) = (k.check("keys")?, v.check("values")?);
    let d = k.dim;
    crate::error::expect_len("values per key", d, v.dim)?;
    crate::error::expect_len("value positions", k.len, v.len)?;
    let (mut lo, mut hi) = (usize::MAX, 0);
    for r in 0..rows.count() {
        crate::error::expect_len("query size", d, rows.q(r).len())?;
        let keys = rows.keys(r);
        if keys.len() > k.len {
            return Err(KernelError::RangeOutOfBounds {
                what: "attended key positions (more than the cache holds)",
                start: keys.start,
                end: keys.end,
                len: k.len,
            });
        }
        if !keys.is_empty() {
            lo = lo.min(keys.start);
            hi = hi.max(keys.end);
        }
    }
    Ok((k_row, v_row, if lo < hi { lo..hi } else { 0..0 }))
}

/// Each row's [`Partial`] result and unnormalised output over each of
/// `segments` it sees, handed to `sink(row, segment, result, output)` in
/// order of segment.
#[allow(clippy::too_many_arguments)]
fn run_segments<R: Rows + ?Sized>(
    rows: &R,
    (k, k_row): (&KvRows<'_>, usize),
    (v, v_row): (&KvRows<'_>, usize),
    span: Range<usize>,
    scale: f32,
    segments: Range<usize>,
    scratch: &mut BlockScratch,
    mut sink: impl FnMut(usize, usize, Partial, &[f32]),
) -> Result<(), KernelError> {
    let d = k.dim;
    let n_rows = rows.count();
    let BlockScratch { keys, transposed, values, scores: score_rows, state, partial, zeros } = scratch;
    keys.resize(BLOCK * d, 0.0);
    transposed.resize(BLOCK * d, 0.0);
    values.resize(BLOCK * d, 0.0);
    score_rows.resize(TILE_ROWS, [0.0; BLOCK]);
    // Each row's running state and output, then TILE_ROWS spare ones.
    state.resize(n_rows + TILE_ROWS, (f32::NEG_INFINITY, 0.0));
    partial.resize((n_rows + TILE_ROWS) * d, 0.0);
    let isa = Isa::current();
    zeros.resize(d, 0.0);
    let zeros = &zeros[..d];
    let mut tile = Tile::default();
    // A decode step's rows fit one tile: each block's keys are read and
    // scored where the cache holds them (`direct_scores`), not transposed
    // through memory first.
    let direct = n_rows <= TILE_ROWS && direct_scores::applies(isa, d);
    // The first block's keys and values are asked for together (each later
    // block is asked for while the one before it is used): a batched decode
    // step starts a call per sequence and head on rows that left the caches
    // a step ago, and waited for their misses one after another (attention
    // of 8 sequences of SmolLM2: 132 -> 106 us a token).
    let first_block = span.start / BLOCK * BLOCK..(span.start / BLOCK * BLOCK + BLOCK).min(span.end);
    k.prefetch(first_block.clone(), k_row);
    v.prefetch(first_block, v_row);
    for segment in segments {
        let (s0, s1) = ((segment * SEGMENT).max(span.start), ((segment + 1) * SEGMENT).min(span.end));
        let in_segment = |r: usize| {
            let keys = rows.keys(r);
            keys.start < s1 && s0 < keys.end
        };
        if s0 >= s1 || !(0..n_rows).any(in_segment) {
            continue;
        }
        state.fill((f32::NEG_INFINITY, 0.0));
        partial.fill(0.0);
        for block in s0 / BLOCK..s1.div_ceil(BLOCK) {
            let (b0, b1) = ((block * BLOCK).max(s0), ((block + 1) * BLOCK).min(s1));
            let sees = |r: usize| {
                let keys = rows.keys(r);
                keys.start < b1 && b0 < keys.end
            };
            if !(0..n_rows).any(sees) {
                continue;
            }
            // Keys transposed (`[d][BLOCK]`), so a key's score is a lane of
            // a vector (or read in place, `direct`); values as the cache
            // holds them where it can.
            let key_rows = if direct {
                Some(k.source(b0..b1, k_row, keys)?)
            } else {
                k.decode_transposed(isa, b0..b1, k_row, keys, transposed)?;
                None
            };
            let value_rows = v.source(b0..b1, v_row, values)?;
            let next = b1..(b1 + BLOCK).min(s1);
            k.prefetch(next.clone(), k_row);
            v.prefetch(next, v_row);
            let range = |r: usize| {
                let keys = rows.keys(r);
                (keys.start.max(b0) - b0, keys.end.min(b1) - b0)
            };
            let mut next = 0;
            while next < n_rows {
                tile.len = 0;
                while tile.len() < TILE_ROWS && next < n_rows {
                    if sees(next) {
                        tile.push(next);
                    }
                    next += 1;
                }
                if tile.is_empty() {
                    break;
                }
                let mut qs = [zeros; TILE_ROWS];
                for (q, &r) in qs.iter_mut().zip(tile.iter()) {
                    *q = rows.q(r);
                }
                let tile_scores: &mut [[f32; BLOCK]; TILE_ROWS] =
                    (&mut score_rows[..TILE_ROWS]).try_into().expect("TILE_ROWS score rows");
                match key_rows {
                    Some(source) => direct_scores::scores_direct(isa, source, b1 - b0, qs, tile.len(), tile_scores),
                    None => scores(isa, qs, tile.len(), b1 - b0, transposed, tile_scores),
                }
                // Rows that see the same keys of the block (all but those on
                // the causal diagonal or a window's edge) fold them together.
                let (j0, j1) = range(tile[0]);
                let together = tile.iter().all(|&r| range(r) == (j0, j1));
                if together && tile.len() > 1 {
                    // A short tile is filled up with spare rows (after the
                    // real ones) that the kernel does not touch, so the
                    // real rows share one pass over the values.
                    let at: [usize; TILE_ROWS] = std::array::from_fn(|i| tile.get(i).copied().unwrap_or(n_rows + i));
                    let states = state.get_disjoint_mut(at).expect("distinct rows of the tile");
                    let outs = partial.get_disjoint_mut(at.map(|r| r * d..(r + 1) * d)).expect("distinct rows");
                    let mut ss = tile_scores.iter().map(|s| &s[j0..j1]);
                    let scores: [&[f32]; TILE_ROWS] = std::array::from_fn(|_| ss.next().expect("a score row"));
                    update_tile(isa, scores, tile.len(), value_rows.skip(j0), scale, states, outs);
                } else {
                    for (&r, s) in tile.iter().zip(tile_scores.iter()) {
                        let (j0, j1) = range(r);
                        let out = &mut partial[r * d..(r + 1) * d];
                        update_one(isa, &s[j0..j1], value_rows.skip(j0), scale, &mut state[r], out);
                    }
                }
            }
        }
        for r in (0..n_rows).filter(|&r| in_segment(r)) {
            let (max, sum) = state[r];
            sink(r, segment, Partial { max, sum }, &partial[r * d..(r + 1) * d]);
        }
    }
    Ok(())
}

multiversion! {
    /// Folds a later segment's result `(part, part_out)` into the result
    /// so far `(acc, acc_out)`: both rescaled to the larger maximum, each
    /// element `part_out[i] · c_part + acc_out[i] · c_acc` (one product,
    /// then a fused multiply-add). A segment with nothing seen is skipped;
    /// the first seen one is taken as it is.
    pub fn fold(acc: &mut Partial, acc_out: &mut [f32], part: Partial, part_out: &[f32]) {
        if part.sum == 0.0 {
            return;
        }
        if acc.sum == 0.0 {
            *acc = part;
            acc_out.copy_from_slice(part_out);
            return;
        }
        let max = acc.max.max(part.max);
        let (c_acc, c_part) = (exp(acc.max - max), exp(part.max - max));
        *acc = Partial { max, sum: part.sum.mul_add(c_part, acc.sum * c_acc) };
        for (a, &p) in acc_out.iter_mut().zip(part_out) {
            *a = p.mul_add(c_part, *a * c_acc);
        }
    }
}

/// Counts a key of logit `sink` and value zero in a row's running softmax
/// `acc` over the output `out` (not yet normalised): `m = max(acc.max,
/// sink)`, `out *= exp(acc.max - m)`, `sum = acc.sum · exp(acc.max - m) +
/// exp(sink - m)`. A row that saw no key keeps an output of zeros.
pub fn add_sink(acc: Partial, out: &mut [f32], sink: f32) -> Partial {
    let max = acc.max.max(sink);
    let c = exp(acc.max - max);
    for o in out.iter_mut() {
        *o *= c;
    }
    Partial { max, sum: acc.sum.mul_add(c, exp(sink - max)) }
}

/// `out /= sum`, in place (0 if nothing was seen).
fn normalise(acc: Partial, out: &mut [f32]) {
    if acc.sum > 0.0 {
        let inverse = 1.0 / acc.sum;
        for o in out.iter_mut() {
            *o *= inverse;
        }
    } else {
        out.fill(0.0);
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
    let (k_row, v_row, span) = check(&*rows, &k, &v)?;
    let d = k.dim;
    for row in rows.iter() {
        crate::error::expect_len("output size", d, row.out.len())?;
    }
    let AttentionScratch { block, folded, folded_state } = scratch;
    folded.clear();
    folded.resize(rows.len() * d, 0.0);
    folded_state.clear();
    folded_state.resize(rows.len(), Partial::default());
    if !span.is_empty() {
        let isa = Isa::current();
        let segments = span.start / SEGMENT..span.end.div_ceil(SEGMENT);
        run_segments(&*rows, (&k, k_row), (&v, v_row), span, scale, segments, block, |r, _, part, out| {
            fold(isa, &mut folded_state[r], &mut folded[r * d..(r + 1) * d], part, out);
        })?;
    }
    for ((row, &acc), acc_out) in rows.iter_mut().zip(folded_state.iter()).zip(folded.chunks_exact(d.max(1))) {
        row.out.copy_from_slice(acc_out);
        let acc = match row.sink {
            Some(sink) => add_sink(acc, row.out, sink),
            None => acc,
        };
        normalise(acc, row.out);
    }
    Ok(())
}

/// The per-segment results of `rows` over `segments` (segment indices, see
/// [`SEGMENT`]), for splitting one row's keys over threads: segment `s`'s
/// result for row `r` goes to `states[(s - segments.start) * rows.len() +
/// r]` and its output to the `d` values at the same index of `outs`
/// (`results` is `(states, outs)`); a
/// segment a row does not see gets `Partial::default()` and zeros.
/// [`combine`] folds them into what [`attend`] gives.
///
/// # Errors
/// As [`attend`], and [`KernelError::BufferTooSmall`] if `states` or
/// `outs` is not sized for every row and segment.
pub fn attend_segments(
    rows: &[Query<'_>],
    k: KvRows<'_>,
    v: KvRows<'_>,
    scale: f32,
    segments: Range<usize>,
    (states, outs): (&mut [Partial], &mut [f32]),
    scratch: &mut AttentionScratch,
) -> Result<(), KernelError> {
    let (k_row, v_row, span) = check(rows, &k, &v)?;
    let d = k.dim;
    let n = rows.len() * segments.len();
    crate::error::expect_len("segment results", n, states.len())?;
    crate::error::expect_len("segment outputs", n * d, outs.len())?;
    states.fill(Partial::default());
    outs.fill(0.0);
    if span.is_empty() {
        return Ok(());
    }
    let first = segments.start;
    run_segments(rows, (&k, k_row), (&v, v_row), span, scale, segments, &mut scratch.block, |r, s, part, out| {
        let at = (s - first) * rows.len() + r;
        states[at] = part;
        outs[at * d..(at + 1) * d].copy_from_slice(out);
    })
}

/// One row's output from its per-segment results (in order of segment,
/// from [`attend_segments`]), with its sink logit where it has one: the
/// same bits as [`attend`] gives it.
///
/// # Panics
/// If an output is not the size of `out` (a caller bug).
pub fn combine<'p>(parts: impl IntoIterator<Item = (Partial, &'p [f32])>, sink: Option<f32>, out: &mut [f32]) {
    // `out` holds the folded output (the first seen segment is copied in).
    let isa = Isa::current();
    let mut acc = Partial::default();
    for (part, part_out) in parts {
        assert_eq!(part_out.len(), out.len(), "combine: a segment's output is not the row's size");
        fold(isa, &mut acc, out, part, part_out);
    }
    if let Some(sink) = sink {
        acc = add_sink(acc, out, sink);
    }
    normalise(acc, out);
}

#[cfg(test)]
mod level_tests;
#[cfg(test)]
mod tests;
