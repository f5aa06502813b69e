//! `y = x · Wᵀ`: f32 activations times weights of any [`DType`].
//!
//! Shapes: `W` is `n x k` (`n` encoded rows of `k` elements), `x` is `m x k`,
//! `y` is `m x n`. Quantized weights first quantize every activation row once
//! into the caller's [`Scratch`] (Q8 blocks, see `activation`), then run
//! integer tiles; float weights run f32 FMA tiles straight on `x`.
//!
//! Blocking: rows of `x` are taken 64 at a time (they stay in L2); within
//! that, weight rows are taken in chunks of about 32 KiB (they stay in L1/L2)
//! and, for each chunk, every 4-row tile of `x` is multiplied against it
//! 2 weight rows at a time (a 4 x 2 micro-kernel; 1 x 4 for a lone row), so
//! each weight vector loaded serves 4 activation rows.
//!
//! Threads: [`matmul`] splits the output columns (weight rows) into one
//! contiguous range per thread; each thread writes only its columns of `y`.

use std::ops::Range;

use baton_core::parallel::split_range;
use baton_core::{DType, Parallel};
use half::{bf16, f16};

use crate::activation::{quantize_activations, ActBlock};
use crate::error::{expect_len, KernelError};
use crate::float_tile::FloatTiles;
use crate::isa::Isa;
use crate::quant::{match_format, BLOCK_ELEMS};
use crate::quant_tile::QuantTiles;

/// A weight matrix of `rows` encoded rows, each `cols` elements of `dtype`,
/// row `r` starting at byte `r * row_stride_bytes` of `data`.
#[derive(Clone, Copy, Debug)]
pub struct WeightMatrix<'a> {
    /// Element type of every row.
    pub dtype: DType,
    /// The encoded rows (little-endian, any alignment).
    pub data: &'a [u8],
    /// Number of rows (`n`, the output width).
    pub rows: usize,
    /// Elements per row (`k`); whole blocks for quantized types.
    pub cols: usize,
    /// Bytes from one row's start to the next; at least one encoded row.
    pub row_stride_bytes: usize,
}

impl<'a> WeightMatrix<'a> {
    /// A matrix whose rows follow each other with no gap.
    ///
    /// # Errors
    /// [`KernelError::PartialBlock`] if `cols` is not whole blocks.
    pub fn contiguous(
        dtype: DType,
        data: &'a [u8],
        rows: usize,
        cols: usize,
    ) -> Result<Self, KernelError> {
        let row_stride_bytes = encoded_row_bytes(dtype, cols)?;
        Ok(WeightMatrix {
            dtype,
            data,
            rows,
            cols,
            row_stride_bytes,
        })
    }

    /// Checks the layout and returns the bytes of one encoded row.
    fn validate(&self) -> Result<usize, KernelError> {
        if !self.dtype.is_float() {
            return Err(KernelError::NotFloat { dtype: self.dtype });
        }
        let row_bytes = encoded_row_bytes(self.dtype, self.cols)?;
        if self.row_stride_bytes < row_bytes {
            return Err(KernelError::StrideTooSmall {
                what: "weight rows (bytes)",
                stride: self.row_stride_bytes,
                row: row_bytes,
            });
        }
        check_extent(
            "weight data",
            self.rows,
            self.row_stride_bytes,
            row_bytes,
            self.data.len(),
        )?;
        Ok(row_bytes)
    }
}

/// A read-only f32 matrix: row `r` is `data[r * row_stride ..][..cols]`.
#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a> {
    /// The elements.
    pub data: &'a [f32],
    /// Number of rows.
    pub rows: usize,
    /// Elements per row.
    pub cols: usize,
    /// Elements from one row's start to the next; at least `cols`.
    pub row_stride: usize,
}

impl<'a> MatRef<'a> {
    /// A matrix whose rows follow each other with no gap.
    pub fn contiguous(data: &'a [f32], rows: usize, cols: usize) -> Self {
        MatRef {
            data,
            rows,
            cols,
            row_stride: cols,
        }
    }
}

/// A writable f32 matrix: row `r` is `data[r * row_stride ..][..cols]`.
#[derive(Debug)]
pub struct MatMut<'a> {
    /// The elements.
    pub data: &'a mut [f32],
    /// Number of rows.
    pub rows: usize,
    /// Elements per row.
    pub cols: usize,
    /// Elements from one row's start to the next; at least `cols`.
    pub row_stride: usize,
}

impl<'a> MatMut<'a> {
    /// A matrix whose rows follow each other with no gap.
    pub fn contiguous(data: &'a mut [f32], rows: usize, cols: usize) -> Self {
        MatMut {
            data,
            rows,
            cols,
            row_stride: cols,
        }
    }
}

/// Reusable memory for quantized activations, so that a decode loop that
/// keeps one `Scratch` per thread allocates nothing per call once warm.
#[derive(Debug, Default)]
pub struct Scratch {
    blocks: Vec<ActBlock>,
}

impl Scratch {
    /// An empty scratch; it grows on first use.
    pub fn new() -> Self {
        Scratch::default()
    }

    /// Grows the scratch now for `rows` activation rows of `cols` elements,
    /// so that later calls of that size do not allocate.
    pub fn reserve(&mut self, rows: usize, cols: usize) {
        let blocks = rows * cols.div_ceil(BLOCK_ELEMS);
        if self.blocks.len() < blocks {
            self.blocks.resize(blocks, ActBlock::default());
        }
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
    if n_range.start > n_range.end || n_range.end > w.rows {
        return Err(KernelError::RangeOutOfBounds {
            what: "output columns",
            start: n_range.start,
            end: n_range.end,
            len: w.rows,
        });
    }
    let isa = Isa::current();
    let out = DisjointWrites::new(y.data);
    if w.dtype.is_quantized() {
        let blocks = scratch.quantize(isa, x, &SingleThreadQuantize);
        // SAFETY: `validate` checked y holds `m` rows of `w.rows` columns at
        // its stride and `n_range` is inside `0..w.rows`; this thread is the
        // only writer (it holds `y` mutably).
        unsafe {
            compute(
                isa,
                w,
                row_bytes,
                Activations::Blocks(blocks),
                x.rows,
                n_range,
                out,
                y.row_stride,
            )
        };
    } else {
        let acts = Activations::Float {
            x: x.data,
            stride: x.row_stride,
        };
        // SAFETY: as above.
        unsafe { compute(isa, w, row_bytes, acts, x.rows, n_range, out, y.row_stride) };
    }
    Ok(())
}

/// Computes `y = x · Wᵀ`, splitting the output columns (weight rows) across
/// the threads of `parallel`. Results do not depend on the thread count:
/// every output is computed by the same tile code whichever thread runs it.
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
    let blocks;
    let acts = if w.dtype.is_quantized() {
        blocks = if m >= 8 && threads > 1 {
            scratch.quantize(isa, x, &ParallelQuantize(parallel))
        } else {
            scratch.quantize(isa, x, &SingleThreadQuantize)
        };
        Activations::Blocks(blocks)
    } else {
        Activations::Float {
            x: x.data,
            stride: x.row_stride,
        }
    };
    let task = |t: usize| {
        let cols = split_range(n, threads, t, 8);
        // SAFETY: `validate` checked y holds `m` rows of `n` columns at its
        // stride; `split_range` gives the threads disjoint column ranges
        // covering `0..n`, so no two threads write the same element, and
        // nobody reads `y` until `run` has returned.
        unsafe { compute(isa, w, row_bytes, acts, m, cols, out, y_stride) };
    };
    if threads == 1 {
        task(0);
    } else {
        parallel.run(&task);
    }
    Ok(())
}

fn encoded_row_bytes(dtype: DType, cols: usize) -> Result<usize, KernelError> {
    dtype.row_bytes(cols).ok_or(KernelError::PartialBlock {
        dtype,
        elems: cols,
        block_elems: dtype.block_elems(),
    })
}

/// Checks that `rows` rows of `row` units at `stride` fit in `len`.
fn check_extent(
    what: &'static str,
    rows: usize,
    stride: usize,
    row: usize,
    len: usize,
) -> Result<(), KernelError> {
    if rows == 0 {
        return Ok(());
    }
    let needed = (rows - 1)
        .checked_mul(stride)
        .and_then(|s| s.checked_add(row));
    match needed {
        Some(needed) if needed <= len => Ok(()),
        _ => Err(KernelError::BufferTooSmall {
            what,
            needed: needed.unwrap_or(usize::MAX),
            actual: len,
        }),
    }
}

fn check_matrix(
    what: &'static str,
    rows: usize,
    cols: usize,
    stride: usize,
    len: usize,
) -> Result<(), KernelError> {
    if stride < cols {
        return Err(KernelError::StrideTooSmall {
            what,
            stride,
            row: cols,
        });
    }
    check_extent(what, rows, stride, cols, len)
}

fn validate(w: &WeightMatrix<'_>, x: &MatRef<'_>, y: &MatMut<'_>) -> Result<usize, KernelError> {
    let row_bytes = w.validate()?;
    expect_len("x columns (= weight columns)", w.cols, x.cols)?;
    expect_len("y columns (= weight rows)", w.rows, y.cols)?;
    expect_len("y rows (= x rows)", x.rows, y.rows)?;
    check_matrix("x", x.rows, x.cols, x.row_stride, x.data.len())?;
    check_matrix("y", y.rows, y.cols, y.row_stride, y.data.len())?;
    Ok(row_bytes)
}

/// The activations in the form the weight type's tiles read.
#[derive(Clone, Copy)]
enum Activations<'a> {
    /// f32 rows at a stride (float weights).
    Float { x: &'a [f32], stride: usize },
    /// `m * k / 32` blocks, row after row (quantized weights).
    Blocks(&'a [ActBlock]),
}

/// A mutable buffer that several threads write to at disjoint indices.
struct DisjointWrites<T> {
    ptr: *mut T,
}

impl<T> Clone for DisjointWrites<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for DisjointWrites<T> {}

// SAFETY: a `DisjointWrites` is only created from a `&mut [T]` held for the
// whole parallel section, and every user writes indices no other thread
// touches (each use site states why), so sharing the pointer cannot race.
unsafe impl<T: Send> Sync for DisjointWrites<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for DisjointWrites<T> {}

impl<T> DisjointWrites<T> {
    fn new(data: &mut [T]) -> Self {
        DisjointWrites {
            ptr: data.as_mut_ptr(),
        }
    }

    /// The start of the buffer (a method, so closures capture the whole
    /// `Sync` wrapper rather than its raw pointer field).
    fn ptr(self) -> *mut T {
        self.ptr
    }
}

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

impl Scratch {
    /// Quantizes every row of `x` (whole blocks, checked by the caller) and
    /// returns the blocks, row after row.
    fn quantize(&mut self, isa: Isa, x: &MatRef<'_>, split: &dyn RowSplit) -> &[ActBlock] {
        let blocks_per_row = x.cols / BLOCK_ELEMS;
        self.reserve(x.rows, x.cols);
        let dst = DisjointWrites::new(&mut self.blocks[..x.rows * blocks_per_row]);
        split.for_each_part(x.rows, &|rows| {
            for r in rows {
                let src = &x.data[r * x.row_stride..][..x.cols];
                // SAFETY: `reserve` sized the buffer for `x.rows` rows, and
                // the parts are disjoint row ranges, so this row's blocks are
                // written by this call only; `self.blocks` is borrowed
                // mutably for the whole call.
                let out = unsafe {
                    std::slice::from_raw_parts_mut(
                        dst.ptr().add(r * blocks_per_row),
                        blocks_per_row,
                    )
                };
                quantize_activations(isa, src, out);
            }
        });
        &self.blocks[..x.rows * blocks_per_row]
    }
}

/// One tile of dot products: `out[i][j] = x[m0 + i] · W[n0 + j]`.
pub(crate) trait TileKernel: Sync {
    /// Computes the `MR x NR` tile at activation row `m0`, weight row `n0`.
    fn tile<const MR: usize, const NR: usize>(
        &self,
        m0: usize,
        n0: usize,
        out: &mut [[f32; NR]; MR],
    );
}

/// Activation rows per L2 block.
const M_BLOCK: usize = 64;
/// Target bytes of a chunk of weight rows reused across an activation block.
const W_CHUNK_BYTES: usize = 32 * 1024;

/// Runs the tiles of the weight type for rows `0..m`, columns `cols`.
///
/// # Safety
/// `out` points at a buffer holding `m` rows of at least `cols.end` elements
/// at stride `out_stride`, whose elements in `cols` no other thread accesses
/// during the call; `w` and `acts` were validated against `m` and `cols`.
#[allow(clippy::too_many_arguments)]
unsafe fn compute(
    isa: Isa,
    w: &WeightMatrix<'_>,
    row_bytes: usize,
    acts: Activations<'_>,
    m: usize,
    cols: Range<usize>,
    out: DisjointWrites<f32>,
    out_stride: usize,
) {
    let chunk = (W_CHUNK_BYTES / row_bytes.max(1)).clamp(4, 64) & !3;
    macro_rules! run {
        ($kernel:expr) => {
            // SAFETY: forwarded from this function's contract.
            unsafe { run_tiles(&$kernel, m, cols, chunk, out, out_stride) }
        };
    }
    match (w.dtype, acts) {
        (DType::F32 | DType::F16 | DType::BF16, Activations::Float { x, stride }) => {
            macro_rules! float_tiles {
                ($elem:ty) => {
                    FloatTiles::<$elem> {
                        isa,
                        x,
                        x_stride: stride,
                        w: w.data,
                        w_stride: w.row_stride_bytes,
                        k: w.cols,
                        elem: std::marker::PhantomData,
                    }
                };
            }
            match w.dtype {
                DType::F16 => run!(float_tiles!(f16)),
                DType::BF16 => run!(float_tiles!(bf16)),
                _ => run!(float_tiles!(f32)),
            }
        }
        (dtype, Activations::Blocks(acts)) => match_format!(dtype, F => run!(QuantTiles::<F> {
            isa,
            acts,
            blocks: w.cols / BLOCK_ELEMS,
            w: w.data,
            w_stride: w.row_stride_bytes,
            format: std::marker::PhantomData,
        }), plain => unreachable!("float weights always get float activations")),
        (dtype, Activations::Float { .. }) => {
            unreachable!("{dtype} weights always get quantized activations")
        }
    }
}

/// The blocked loop nest over tiles (see the module docs).
///
/// # Safety
/// As [`compute`].
unsafe fn run_tiles<K: TileKernel>(
    kernel: &K,
    m: usize,
    cols: Range<usize>,
    chunk: usize,
    out: DisjointWrites<f32>,
    out_stride: usize,
) {
    for block_start in (0..m).step_by(M_BLOCK) {
        let block_end = (block_start + M_BLOCK).min(m);
        let mut c0 = cols.start;
        while c0 < cols.end {
            let c1 = (c0 + chunk).min(cols.end);
            let mut m0 = block_start;
            while m0 < block_end {
                let rows = (block_end - m0).min(4);
                // SAFETY: rows m0..m0+rows < m, columns c0..c1 inside `cols`.
                unsafe {
                    match rows {
                        4 => row_tiles::<K, 4, 2>(kernel, m0, c0..c1, out, out_stride),
                        3 => row_tiles::<K, 3, 2>(kernel, m0, c0..c1, out, out_stride),
                        2 => row_tiles::<K, 2, 2>(kernel, m0, c0..c1, out, out_stride),
                        _ => row_tiles::<K, 1, 4>(kernel, m0, c0..c1, out, out_stride),
                    }
                }
                m0 += rows;
            }
            c0 = c1;
        }
    }
}

/// Tiles of `MR` rows over `cols`, `NR` columns at a time, then one at a time.
///
/// # Safety
/// Rows `m0..m0 + MR` and `cols` are inside the output of [`compute`]'s contract.
unsafe fn row_tiles<K: TileKernel, const MR: usize, const NR: usize>(
    kernel: &K,
    m0: usize,
    cols: Range<usize>,
    out: DisjointWrites<f32>,
    out_stride: usize,
) {
    let mut n0 = cols.start;
    while n0 + NR <= cols.end {
        let mut tile = [[0.0; NR]; MR];
        kernel.tile::<MR, NR>(m0, n0, &mut tile);
        // SAFETY: n0 + NR <= cols.end (loop condition), rows per the contract.
        unsafe { store(&tile, m0, n0, out, out_stride) };
        n0 += NR;
    }
    while n0 < cols.end {
        let mut tile = [[0.0; 1]; MR];
        kernel.tile::<MR, 1>(m0, n0, &mut tile);
        // SAFETY: n0 < cols.end, rows per the contract.
        unsafe { store(&tile, m0, n0, out, out_stride) };
        n0 += 1;
    }
}

/// Writes a tile into the output at row `m0`, column `n0`.
///
/// # Safety
/// The tile's rows and columns are inside the output this thread may write.
#[inline(always)]
unsafe fn store<const MR: usize, const NR: usize>(
    tile: &[[f32; NR]; MR],
    m0: usize,
    n0: usize,
    out: DisjointWrites<f32>,
    out_stride: usize,
) {
    for (i, row) in tile.iter().enumerate() {
        for (j, &value) in row.iter().enumerate() {
            // SAFETY: inside this thread's rows and columns (caller's contract).
            unsafe { *out.ptr().add((m0 + i) * out_stride + n0 + j) = value };
        }
    }
}
