//! `y = x · Wᵀ`: f32 activations times weights of any [`DType`].
//!
//! Shapes: `W` is `n x k` (`n` encoded rows of `k` elements), `x` is `m x k`,
//! `y` is `m x n`. Quantized weights first quantize every activation row once
//! into the caller's [`Scratch`] (Q8 blocks of 32 for Q8_0/Q4_0/Q4_1/Q5_0/Q5_1/MXFP4, Q8_K
//! super-blocks of 256 for the K-quants; see `activation`), then run integer
//! tiles; float weights run f32 FMA tiles straight on `x`.
//!
//! Blocking: rows of `x` are taken 64 at a time (they stay in L2); within
//! that, weight rows are taken in chunks of about 32 KiB (they stay in L1/L2)
//! and, for each chunk, every 4-row tile of `x` is multiplied against it
//! 2 weight rows at a time (a 4 x 2 micro-kernel; 4 x 4 for float weights
//! with AVX-512, whose 32 registers hold 16 accumulators, and 4 x 3 for
//! float weights with AVX2, 12 accumulators), so each weight vector loaded
//! serves 4 activation rows. A lone activation row (decode) takes 4 weight
//! rows at a time (8 for float weights with AVX2), or, for Q8_0 weights
//! larger than L2, one at a time: one sequential stream, which the hardware
//! prefetcher follows best.
//!
//! Threads: [`matmul`] splits the output columns (weight rows) into one
//! contiguous range per thread; each thread writes only its columns of `y`.
//!
//! # Row invariance
//!
//! Element `y[i][j]` depends only on row `x[i]`, row `W[j]`, the shape
//! (`k` and the weight type) and the instruction set
//! ([`Isa::current`](crate::Isa::current)), bit for bit: never on `m`, on which other rows `x` holds, on the thread count,
//! or on the column range ([`matmul_columns`]) that computes it. So a
//! sequence's logits are the same whether it runs alone (decode, `m = 1`)
//! or batched with others, which batch-invariant serving relies on. It
//! holds because every tile shape (4 x 2, 4 x 3 or 4 x 4, the remainders
//! 3 x 2, 2 x 2, 3 x 4, 2 x 4, 1 x 4, 1 x 8, 1 x 1, the one-column tails)
//! sums each output in one fixed order (the AVX-512 and AVX2 float tiles
//! sum the lanes of all their accumulators together, in a tree that is the
//! same for each output),
//! a lone row included; activation rows are quantized one by one; and the
//! K-quants' AVX-512 tile, which a lone row against Q2_K, Q4_K or Q5_K does
//! not take, folds its exact integer sums into the AVX2 tile's lanes and
//! then does the AVX2 tile's float operations, so both give the same bits.
//! Different instruction sets may differ in the last bits (float sums in
//! another order). `tests/it/row_invariance.rs` checks it for every type
//! and level.

use std::ops::Range;

use baton_core::parallel::{split_range, Chunks};
use baton_core::Parallel;

use baton_core::DType;

use crate::activation::{quantize_activations, quantize_super_activations, ActBlock, SuperActBlock};
use crate::error::KernelError;
use crate::isa::Isa;
use crate::matrix::{check_columns, validate};
pub use crate::matrix::{MatMut, MatRef, WeightMatrix};
use crate::quant::{BLOCK_ELEMS, SUPER_ELEMS};
use crate::tiling::{compute, Activations, DisjointWrites};

/// Reusable memory for quantized activations, so that a decode loop that
/// keeps one `Scratch` per thread allocates nothing per call once warm.
///
/// It remembers which rows each of its two forms last quantized, so that
/// products of the same input (the query, key and value projections; the
/// gate and up projections) quantize it once: see
/// [`Scratch::reuse_next`].
#[derive(Debug, Default)]
pub struct Scratch {
    blocks: Vec<ActBlock>,
    super_blocks: Vec<SuperActBlock>,
    /// What `blocks` and `super_blocks` hold the quantized form of.
    blocks_of: Option<Quantized>,
    super_blocks_of: Option<Quantized>,
    /// Whether the next call may take what a buffer holds (see
    /// [`Scratch::reuse_next`]).
    reuse: bool,
}

/// The rows a buffer of a [`Scratch`] holds quantized: where they were and
/// their shape, and the level that quantized them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Quantized {
    data: usize,
    rows: usize,
    cols: usize,
    row_stride: usize,
    isa: Isa,
}

impl Scratch {
    /// An empty scratch; it grows on first use.
    pub fn new() -> Self {
        Scratch::default()
    }

    /// Grows the scratch now for `rows` activation rows of `cols` elements,
    /// so that later calls of that size do not allocate (Q8_K room only when
    /// `cols` is a whole number of K-quant super-blocks).
    pub fn reserve(&mut self, rows: usize, cols: usize) {
        grow(&mut self.blocks, rows * cols.div_ceil(BLOCK_ELEMS));
        if cols.is_multiple_of(SUPER_ELEMS) {
            grow(&mut self.super_blocks, rows * cols / SUPER_ELEMS);
        }
    }

    /// Lets the next product through this scratch take the quantized rows
    /// it holds instead of quantizing again, where they are the same rows
    /// (same memory, shape and level) in the form the weights need. The
    /// caller states with `unchanged` that the values there are still
    /// those quantized (no write since: e.g. the same graph node's output
    /// read by two products in a row); with `false` the next call
    /// quantizes. Either way it applies to the next call only. The reused
    /// blocks are the bits quantizing again would give.
    pub fn reuse_next(&mut self, unchanged: bool) {
        self.reuse = unchanged;
    }
}

fn grow<B: Clone + Default>(buffer: &mut Vec<B>, len: usize) {
    if buffer.len() < len {
        buffer.resize(len, B::default());
    }
}

/// Computes `y[:, n_range] = x · W[n_range, :]ᵀ` on the calling thread, for
/// all `m` rows; other columns of `y` are not touched. For callers that
/// parallelise over something else (attention heads, batches).
///
/// # Errors
/// A [`KernelError`] if the shapes disagree (`x.cols == w.cols`,
/// `y.cols == w.rows`, `y.rows == x.rows`), a buffer is too small for its
/// shape and stride, or `n_range` is outside `0..w.rows`.
pub fn matmul_columns(
    w: &WeightMatrix<'_>,
    x: &MatRef<'_>,
    y: &mut MatMut<'_>,
    n_range: Range<usize>,
    scratch: &mut Scratch,
) -> Result<(), KernelError> {
    let row_bytes = validate(w, x, y)?;
    check_columns(&n_range, w.rows)?;
    let isa = Isa::current();
    let out = DisjointWrites::new(y.data);
    let acts = scratch.activations(isa, w.dtype, x, &SingleThreadQuantize);
    // SAFETY: `validate` checked y holds `m` rows of `w.rows` columns at its
    // stride and `n_range` is inside `0..w.rows`; this thread is the only
    // writer (it holds `y` mutably).
    unsafe { compute(isa, w, row_bytes, acts, x.rows, n_range, out, y.row_stride) };
    Ok(())
}

/// Computes `y = x · Wᵀ`, the output columns (weight rows) taken in chunks
/// by the threads of `parallel` as each is free ([`Chunks`]). Results do not
/// depend on the thread count: every output is computed by the same tile
/// code whichever thread runs it.
///
/// # Errors
/// As [`matmul_columns`] (without the range).
pub fn matmul(
    parallel: &dyn Parallel,
    w: &WeightMatrix<'_>,
    x: &MatRef<'_>,
    y: &mut MatMut<'_>,
    scratch: &mut Scratch,
) -> Result<(), KernelError> {
    let row_bytes = validate(w, x, y)?;
    let isa = Isa::current();
    let threads = parallel.threads();
    let (m, n, y_stride) = (x.rows, w.rows, y.row_stride);
    let out = DisjointWrites::new(y.data);
    let acts = scratch.activations_for(isa, w.dtype, x, parallel, m >= 8 && threads > 1);
    // 24 columns: a multiple of every tile width (`tile::TileShapes`),
    // so a thread's chunk splits into whole tiles.
    let chunks = Chunks::new(n, threads, THREAD_CHUNK_ALIGN);
    let task = |_: usize| {
        while let Some(cols) = chunks.next() {
            // SAFETY: `validate` checked y holds `m` rows of `n` columns at
            // its stride; `Chunks` hands each column range of `0..n` to one
            // thread only, so no two threads write the same element, and
            // nobody reads `y` until `run` has returned.
            unsafe { compute(isa, w, row_bytes, acts, m, cols, out, y_stride) };
        }
    };
    if threads == 1 {
        task(0);
    } else {
        parallel.run(&task);
    }
    Ok(())
}

/// Output columns per thread chunk are a multiple of this.
const THREAD_CHUNK_ALIGN: usize = 24;

/// How [`Scratch::quantize`] spreads rows over threads.
trait RowSplit {
    fn for_each_part(&self, rows: usize, part: &(dyn Fn(Range<usize>) + Sync));
}

struct SingleThreadQuantize;
impl RowSplit for SingleThreadQuantize {
    fn for_each_part(&self, rows: usize, part: &(dyn Fn(Range<usize>) + Sync)) {
        part(0..rows)
    }
}

struct ParallelQuantize<'p>(&'p dyn Parallel);
impl RowSplit for ParallelQuantize<'_> {
    fn for_each_part(&self, rows: usize, part: &(dyn Fn(Range<usize>) + Sync)) {
        let threads = self.0.threads();
        self.0.run(&|t| part(split_range(rows, threads, t, 1)));
    }
}

/// A block of quantized activations, and where a [`Scratch`] keeps them.
trait ActivationBlock: Copy + Default + Send + Sync {
    /// Values per block.
    const ELEMS: usize;
    /// Quantizes `src` (whole blocks) into `dst`.
    fn quantize(isa: Isa, src: &[f32], dst: &mut [Self]);
    /// The scratch buffer of this block type.
    fn buffer(scratch: &mut Scratch) -> &mut Vec<Self>;
}

impl ActivationBlock for ActBlock {
    const ELEMS: usize = BLOCK_ELEMS;
    fn quantize(isa: Isa, src: &[f32], dst: &mut [Self]) {
        quantize_activations(isa, src, dst)
    }
    fn buffer(scratch: &mut Scratch) -> &mut Vec<Self> {
        &mut scratch.blocks
    }
}

impl ActivationBlock for SuperActBlock {
    const ELEMS: usize = SUPER_ELEMS;
    fn quantize(isa: Isa, src: &[f32], dst: &mut [Self]) {
        quantize_super_activations(isa, src, dst)
    }
    fn buffer(scratch: &mut Scratch) -> &mut Vec<Self> {
        &mut scratch.super_blocks
    }
}

impl Scratch {
    /// [`Self::activations`], the rows spread over `parallel` if `spread`.
    pub(crate) fn activations_for<'a>(
        &'a mut self,
        isa: Isa,
        dtype: DType,
        x: &MatRef<'a>,
        parallel: &dyn Parallel,
        spread: bool,
    ) -> Activations<'a> {
        if spread {
            self.activations(isa, dtype, x, &ParallelQuantize(parallel))
        } else {
            self.activations(isa, dtype, x, &SingleThreadQuantize)
        }
    }

    /// The activations in the form weights of `dtype` multiply against:
    /// `x` itself for float weights, else `x` quantized into this scratch.
    fn activations<'a>(&'a mut self, isa: Isa, dtype: DType, x: &MatRef<'a>, split: &dyn RowSplit) -> Activations<'a> {
        let reuse = std::mem::take(&mut self.reuse);
        let of =
            Quantized { data: x.data.as_ptr() as usize, rows: x.rows, cols: x.cols, row_stride: x.row_stride, isa };
        if dtype.is_k_quant() {
            let fresh = !reuse || self.super_blocks_of != Some(of);
            self.super_blocks_of = Some(of);
            Activations::SuperBlocks(self.quantize(isa, x, split, fresh))
        } else if dtype.is_quantized() {
            let fresh = !reuse || self.blocks_of != Some(of);
            self.blocks_of = Some(of);
            Activations::Blocks(self.quantize(isa, x, split, fresh))
        } else {
            Activations::Float { x: x.data, stride: x.row_stride }
        }
    }

    /// Quantizes every row of `x` (whole blocks, checked by the caller) and
    /// returns the blocks, row after row; with `fresh` false, returns the
    /// blocks it holds of those rows.
    fn quantize<B: ActivationBlock>(&mut self, isa: Isa, x: &MatRef<'_>, split: &dyn RowSplit, fresh: bool) -> &[B] {
        let blocks_per_row = x.cols / B::ELEMS;
        let buffer = B::buffer(self);
        if !fresh {
            // The caller's word (`reuse_next`) and the same rows, shape and
            // level as the blocks held: they are what quantizing gives.
            return &buffer[..x.rows * blocks_per_row];
        }
        grow(buffer, x.rows * blocks_per_row);
        let dst = DisjointWrites::new(&mut buffer[..x.rows * blocks_per_row]);
        split.for_each_part(x.rows, &|rows| {
            for r in rows {
                let src = &x.data[r * x.row_stride..][..x.cols];
                // SAFETY: `grow` sized the buffer for `x.rows` rows, and the
                // parts are disjoint row ranges, so this row's blocks are
                // written by this call only; the buffer is borrowed mutably
                // for the whole call.
                let out = unsafe { std::slice::from_raw_parts_mut(dst.ptr().add(r * blocks_per_row), blocks_per_row) };
                B::quantize(isa, src, out);
            }
        });
        &buffer[..x.rows * blocks_per_row]
    }
}
