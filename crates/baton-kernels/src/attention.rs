//! Streamed attention of query rows over one key-value head: keys and
//! values are decoded to f32 a block of [`BLOCK`] positions at a time and
//! each row keeps a running maximum, sum and output (online softmax), so
//! no row of scores is held whole and the scratch does not grow with the
//! context.
//!
//! Each row's arithmetic depends only on its own query, its key range and
//! the keys: blocks are counted from position 0, a row takes the part of
//! each block inside its range, in order, and every sum runs in a fixed
//! order (the dot products keep 16 partial sums, as [`crate::ops`] does).
//! So a row gives the same bits alone or among any other rows, at any
//! instruction level, which is what keeps batching and tensor-parallel
//! splits exact.

use std::ops::Range;

use baton_core::graph::ATTENTION_BLOCK;
use baton_core::DType;

use crate::error::KernelError;
use crate::isa::{multiversion, Isa};
use crate::ops::{dot_body, exp};
use crate::quant::dequantize_row;

/// Key positions decoded and taken at a time.
pub const BLOCK: usize = ATTENTION_BLOCK;

/// Keys or values of one key-value head: position `s` is `dim` elements of
/// `dtype` (whole blocks) at byte `s * stride` of `data`, for `s < len`.
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

    /// Decodes positions `range` into `out` (`range.len() * dim` values).
    fn decode(&self, range: Range<usize>, row: usize, out: &mut [f32]) -> Result<(), KernelError> {
        if self.stride == row {
            let bytes = &self.data[range.start * row..range.end * row];
            return dequantize_row(self.dtype, bytes, out);
        }
        for (s, o) in range.zip(out.chunks_exact_mut(self.dim)) {
            dequantize_row(self.dtype, &self.data[s * self.stride..s * self.stride + row], o)?;
        }
        Ok(())
    }
}

/// One query row: its query (head size), the key positions it sees, and
/// where its output goes (head size).
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
    values: Vec<f32>,
    scores: Vec<f32>,
    state: Vec<(f32, f32)>,
}

multiversion! {
    /// Folds keys and values `j` (rows of `q.len()`) into a row's running
    /// state and output.
    fn update_impl(
        q: &[f32],
        kv: (&[f32], &[f32]),
        scale: f32,
        scores: &mut [f32],
        state: &mut (f32, f32),
        acc: &mut [f32],
    ) {
        let (keys, values) = kv;
        let d = q.len();
        let mut top = f32::NEG_INFINITY;
        for (s, k) in scores.iter_mut().zip(keys.chunks_exact(d)) {
            *s = dot_body(q, k) * scale;
            top = top.max(*s);
        }
        let (max, sum) = *state;
        let new_max = max.max(top);
        // exp(-inf) is exactly 0: the first block scales nothing.
        let correction = exp(max - new_max);
        for s in scores.iter_mut() {
            *s = exp(*s - new_max);
        }
        let mut block_sum = 0.0;
        for &p in scores.iter() {
            block_sum += p;
        }
        *state = (new_max, sum * correction + block_sum);
        for a in acc.iter_mut() {
            *a *= correction;
        }
        for (&p, v) in scores.iter().zip(values.chunks_exact(d)) {
            for (a, &x) in acc.iter_mut().zip(v) {
                *a += p * x;
            }
        }
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
        if row.keys.end > k.len {
            return Err(KernelError::RangeOutOfBounds {
                what: "attended keys",
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
    let AttentionScratch { keys, values, scores, state } = scratch;
    keys.resize(BLOCK * d, 0.0);
    values.resize(BLOCK * d, 0.0);
    scores.resize(BLOCK, 0.0);
    state.clear();
    state.resize(rows.len(), (f32::NEG_INFINITY, 0.0));
    let isa = Isa::current();
    for block in lo / BLOCK..hi.div_ceil(BLOCK) {
        let (b0, b1) = ((block * BLOCK).max(lo), ((block + 1) * BLOCK).min(hi));
        if !rows.iter().any(|r| r.keys.start < b1 && b0 < r.keys.end) {
            continue;
        }
        let n = b1 - b0;
        k.decode(b0..b1, k_row, &mut keys[..n * d])?;
        v.decode(b0..b1, v_row, &mut values[..n * d])?;
        for (row, st) in rows.iter_mut().zip(state.iter_mut()) {
            let (r0, r1) = (row.keys.start.max(b0), row.keys.end.min(b1));
            if r0 >= r1 {
                continue;
            }
            let (j0, j1) = (r0 - b0, r1 - b0);
            update_impl(
                isa,
                row.q,
                (&keys[j0 * d..j1 * d], &values[j0 * d..j1 * d]),
                scale,
                &mut scores[..j1 - j0],
                st,
                row.out,
            );
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
