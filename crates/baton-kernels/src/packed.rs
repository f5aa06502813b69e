//! Weights repacked for the CPU's matmul: groups of [`GROUP_ROWS`] weight
//! rows interleaved block by block, so that one tile reads a single
//! sequential stream and its vector lanes hold different output columns
//! (no horizontal sums per block, scales of the whole group in one load).
//!
//! A [`PackedWeights`] is built once from a [`WeightMatrix`] (at load time,
//! or on a weight buffer's first use by the CPU backend) and then
//! multiplied with [`matmul_packed`] / [`matmul_packed_columns`], which take
//! the same activations, shapes and threads as [`matmul`](crate::matmul()).
//!
//! # Layout
//!
//! Rows are taken [`GROUP_ROWS`] at a time; a last group with fewer rows is
//! padded with zero rows (their outputs are computed and dropped). Group `g`
//! is `blocks × F::PACKED_BYTES` bytes at `g * group_bytes`: block `b` of
//! all its rows, then block `b + 1`, so a group is read front to back. What
//! a packed block holds is each format's choice (`PackedFormat`).
//!
//! # Row invariance
//!
//! As for [`matmul`](crate::matmul()): `y[i][j]` depends only on `x[i]`, row
//! `W[j]` (packed), the shape and the instruction set, never on `m`, on the
//! other rows of `x`, on the thread count or on the column range. Every
//! tile computes each output in its own lane, with the same operations in
//! the same order whatever `MR` is. A packed matrix's outputs may differ in
//! the last bits from the unpacked matrix's (other sums order), so a
//! program uses one form or the other for a given matrix, consistently.

use std::ops::Range;

use baton_core::parallel::{split_range, Chunks};
use baton_core::{DType, Parallel};

use crate::error::KernelError;
use crate::isa::Isa;
use crate::matmul::Scratch;
use crate::matrix::{check_columns, validate_io, MatMut, MatRef, WeightMatrix};
use crate::tiling::{Activations, DisjointWrites};

mod blocks;
mod format;
mod kquant;

use format::PackedFormat;
pub use format::GROUP_ROWS;

/// Activation rows per tile below 8 (see [`tile_rows`]).
const TILE_ROWS: usize = 4;

/// The most activation rows one tile takes at `isa`: 8 at AVX-512, whose
/// 32 registers hold them (the 32-value tile: 8 sums and 16 halves of
/// accumulators; the K-quant tile: one chain of sums per row), so each
/// block is unpacked once for 8 rows; 4 at the other levels.
fn tile_rows(isa: Isa) -> usize {
    if isa == Isa::Avx512 {
        8
    } else {
        TILE_ROWS
    }
}

/// Calls `$body` with `$F` bound to the packed format of `$dtype`, or
/// evaluates `$none` if the type has no packed form.
macro_rules! match_packed {
    ($dtype:expr, $F:ident => $body:expr, _ => $none:expr) => {
        match_packed!(@arms $dtype, $F, $body, $none;
            Q8_0 => blocks::Blocks<crate::quant::Q8_0>,
            Q4_0 => blocks::Blocks<crate::quant::Q4_0>,
            Q4_1 => blocks::Blocks<crate::quant::Q4_1>,
            Q5_0 => blocks::Blocks<crate::quant::Q5_0>,
            Q5_1 => blocks::Blocks<crate::quant::Q5_1>,
            MXFP4 => blocks::Blocks<crate::quant::MXFP4>,
            Q2_K => kquant::PackedK<crate::quant::kquant_low_bits::Q2K>,
            Q3_K => kquant::PackedK<crate::quant::kquant_low_bits::Q3K>,
            Q4_K => kquant::PackedK<crate::quant::kquant::Q4K>,
            Q5_K => kquant::PackedK<crate::quant::kquant::Q5K>,
            Q6_K => kquant::PackedK<crate::quant::kquant::Q6K>)
    };
    (@arms $dtype:expr, $F:ident, $body:expr, $none:expr; $($dt:ident => $format:ty),*) => {
        match $dtype {
            $(DType::$dt => {
                type $F = $format;
                $body
            })*
            _ => $none,
        }
    };
}

/// Whether weights of `dtype` have a packed form.
pub fn packable(dtype: DType) -> bool {
    match_packed!(dtype, F => { let _ = F::DTYPE; true }, _ => false)
}

/// A weight matrix repacked for [`matmul_packed`] (see the module docs).
#[derive(Clone)]
pub struct PackedWeights {
    dtype: DType,
    rows: usize,
    cols: usize,
    blocks: usize,
    group_bytes: usize,
    data: Box<[u8]>,
}

impl std::fmt::Debug for PackedWeights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedWeights")
            .field("dtype", &self.dtype)
            .field("rows", &self.rows)
            .field("cols", &self.cols)
            .field("bytes", &self.data.len())
            .finish()
    }
}

impl PackedWeights {
    /// Packs `w`, spreading the groups over `parallel`'s threads; `None` if
    /// its type has no packed form ([`packable`]).
    ///
    /// # Errors
    /// A [`KernelError`] if `w`'s layout is invalid (as `matmul` checks it).
    pub fn pack(w: &WeightMatrix<'_>, parallel: &dyn Parallel) -> Result<Option<PackedWeights>, KernelError> {
        Self::pack_releasing(w, parallel, &|_| {})
    }

    /// As [`pack`](Self::pack), calling `packed_rows` with the bytes of
    /// `w`'s rows as they are packed (about a MiB at a time, from every
    /// thread): a caller whose weights are a file's pages gives them back
    /// while the matrix is packed, so that packing never holds a large
    /// matrix twice.
    pub fn pack_releasing(
        w: &WeightMatrix<'_>,
        parallel: &dyn Parallel,
        packed_rows: &(dyn Fn(&[u8]) + Sync),
    ) -> Result<Option<PackedWeights>, KernelError> {
        match_packed!(w.dtype, F => pack_as::<F>(w, parallel, packed_rows).map(Some), _ => Ok(None))
    }

    /// The weight type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Rows (`n`, output columns of a matmul).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Elements per row (`k`).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.data.len()
    }

    /// Row `r` in GGUF's encoding (as it was before packing) into `out`
    /// (`dtype.row_bytes(cols)` bytes).
    ///
    /// # Errors
    /// [`KernelError::RangeOutOfBounds`] if `r >= rows`, a length error if
    /// `out` has the wrong size.
    pub fn unpack_row(&self, r: usize, out: &mut [u8]) -> Result<(), KernelError> {
        match_packed!(self.dtype, F => self.unpack_row_as::<F>(r, out), _ => unreachable!("only packable types are packed"))
    }

    fn unpack_row_as<F: PackedFormat>(&self, r: usize, out: &mut [u8]) -> Result<(), KernelError> {
        if r >= self.rows {
            return Err(KernelError::RangeOutOfBounds { what: "packed row", start: r, end: r + 1, len: self.rows });
        }
        crate::error::expect_len("unpacked row bytes", self.blocks * F::BLOCK_BYTES, out.len())?;
        let group = &self.data[(r / GROUP_ROWS) * self.group_bytes..][..self.group_bytes];
        for (b, out) in out.chunks_exact_mut(F::BLOCK_BYTES).enumerate() {
            F::unpack_block(&group[b * F::PACKED_BYTES..][..F::PACKED_BYTES], r % GROUP_ROWS, out);
        }
        Ok(())
    }

    /// Checks `x` and `y` against this matrix, as `matmul` does.
    fn validate(&self, x: &MatRef<'_>, y: &MatMut<'_>) -> Result<(), KernelError> {
        validate_io(self.cols, self.rows, x, y)
    }
}

/// Source bytes packed between two calls of `pack_releasing`'s callback.
const RELEASE_BYTES: usize = 1 << 20;

fn pack_as<F: PackedFormat>(
    w: &WeightMatrix<'_>,
    parallel: &dyn Parallel,
    packed_rows: &(dyn Fn(&[u8]) + Sync),
) -> Result<PackedWeights, KernelError> {
    w.validate()?;
    let blocks = w.cols / F::BLOCK_ELEMS;
    let groups = w.rows.div_ceil(GROUP_ROWS);
    let group_bytes = blocks * F::PACKED_BYTES;
    // Zeroed pages from the kernel, not yet touched: huge ones if it agrees.
    let mut data = vec![0u8; groups * group_bytes].into_boxed_slice();
    crate::huge_pages::advise(&mut data);
    let out = DisjointWrites::new(&mut data);
    let zero = vec![0u8; F::BLOCK_BYTES];
    let threads = parallel.threads();
    let per_release = (RELEASE_BYTES / (GROUP_ROWS * w.row_stride_bytes).max(1)).max(1);
    // The source bytes of groups `from..to` (rows past the end excluded).
    let source = |from: usize, to: usize| {
        let (first, end) = (from * GROUP_ROWS, (to * GROUP_ROWS).min(w.rows));
        &w.data[(first * w.row_stride_bytes).min(w.data.len())..(end * w.row_stride_bytes).min(w.data.len())]
    };
    let task = |t: usize| {
        let range = split_range(groups, threads, t, 1);
        let mut released = range.start;
        for g in range.clone() {
            if g - released == per_release {
                packed_rows(source(released, g));
                released = g;
            }
            // SAFETY: group `g`'s bytes are written by this thread only
            // (disjoint group ranges per thread), inside `data`.
            let group = unsafe { std::slice::from_raw_parts_mut(out.ptr().add(g * group_bytes), group_bytes) };
            for (b, packed) in group.chunks_exact_mut(F::PACKED_BYTES).enumerate() {
                let rows: [&[u8]; GROUP_ROWS] = std::array::from_fn(|r| {
                    let row = g * GROUP_ROWS + r;
                    if row < w.rows {
                        &w.data[row * w.row_stride_bytes + b * F::BLOCK_BYTES..][..F::BLOCK_BYTES]
                    } else {
                        &zero[..]
                    }
                });
                F::pack_block(&rows, packed);
            }
        }
        if range.end > released {
            packed_rows(source(released, range.end));
        }
    };
    if threads == 1 {
        task(0);
    } else {
        parallel.run(&task);
    }
    Ok(PackedWeights { dtype: w.dtype, rows: w.rows, cols: w.cols, blocks, group_bytes, data })
}

/// Computes `y[:, n_range] = x · W[n_range, :]ᵀ` on the calling thread (as
/// [`matmul_columns`](crate::matmul_columns) for a packed matrix).
///
/// # Errors
/// As [`matmul_columns`](crate::matmul_columns).
pub fn matmul_packed_columns(
    w: &PackedWeights,
    x: &MatRef<'_>,
    y: &mut MatMut<'_>,
    n_range: Range<usize>,
    scratch: &mut Scratch,
) -> Result<(), KernelError> {
    w.validate(x, y)?;
    check_columns(&n_range, w.rows)?;
    let isa = Isa::current();
    let out = DisjointWrites::new(y.data);
    let acts = scratch.activations_for(isa, w.dtype, x, &baton_core::parallel::SingleThread, false);
    // SAFETY: `validate` checked y's extent for `m` rows of `w.rows`
    // columns; `n_range` lies inside them; this thread holds `y` mutably.
    unsafe { compute_packed(isa, w, acts, x.rows, n_range, out, y.row_stride) };
    Ok(())
}

/// Computes `y = x · Wᵀ` for a packed matrix, the groups taken in chunks by
/// the threads of `parallel` as each is free (as [`matmul`](crate::matmul());
/// results do not depend on the thread count).
///
/// # Errors
/// As [`matmul`](crate::matmul()).
pub fn matmul_packed(
    parallel: &dyn Parallel,
    w: &PackedWeights,
    x: &MatRef<'_>,
    y: &mut MatMut<'_>,
    scratch: &mut Scratch,
) -> Result<(), KernelError> {
    matmul_packed_many(parallel, &[w], x, std::slice::from_mut(y), scratch)
}

/// Computes `ys[j] = x · W_jᵀ` for packed matrices of one type that share
/// the input `x` (a layer's q, k and v; gate and up) in one pass of the
/// threads: the activations are quantized once, and the matrices' groups
/// form one range of chunks, so a small matrix shares the threads with the
/// others and the pool is woken once. Each output gets the bits
/// [`matmul_packed`] gives it (the same tiles over the same activations).
///
/// # Errors
/// As [`matmul_packed`] for each pair, [`KernelError::LengthMismatch`]
/// unless there are as many outputs as matrices, and
/// [`KernelError::MixedTypes`] if the matrices' types differ.
pub fn matmul_packed_many(
    parallel: &dyn Parallel,
    ws: &[&PackedWeights],
    x: &MatRef<'_>,
    ys: &mut [MatMut<'_>],
    scratch: &mut Scratch,
) -> Result<(), KernelError> {
    crate::error::expect_len("outputs of the matrices", ws.len(), ys.len())?;
    let Some(dtype) = ws.first().map(|w| w.dtype) else { return Ok(()) };
    for (w, y) in ws.iter().zip(ys.iter()) {
        if w.dtype != dtype {
            return Err(KernelError::MixedTypes { first: dtype, other: w.dtype });
        }
        w.validate(x, y)?;
    }
    let isa = Isa::current();
    let threads = parallel.threads();
    let m = x.rows;
    let acts = scratch.activations_for(isa, dtype, x, parallel, m >= 8 && threads > 1);
    let pairs = match_packed!(dtype, F => F::pairs_faster(isa, m.min(tile_rows(isa))), _ => false);
    let align = if pairs { 2 * GROUP_ROWS } else { GROUP_ROWS };
    let inputs = vec![(acts, m); ws.len()];
    // SAFETY: every y was validated for its matrix and `x`, whose rows
    // `acts` holds in the form the common type needs.
    unsafe { run_chunks(parallel, isa, ws, &inputs, ys, align) };
    Ok(())
}

/// Computes `ys[j] = xs[j] · W_jᵀ` for packed matrices that each have their
/// own input (the experts of a mixture, each with the rows routed to it)
/// in one pass of the threads: every input is quantized into its own
/// scratch (`scratches[j]`), then the matrices' groups form one range of
/// chunks, so a decode step's few experts share the threads and the pool
/// is woken once. Each output gets the bits [`matmul_packed`] gives it.
///
/// # Errors
/// As [`matmul_packed`] for each triple, and
/// [`KernelError::LengthMismatch`] unless there are as many inputs,
/// outputs and scratches (at least) as matrices.
pub fn matmul_packed_each(
    parallel: &dyn Parallel,
    ws: &[&PackedWeights],
    xs: &[MatRef<'_>],
    ys: &mut [MatMut<'_>],
    scratches: &mut [Scratch],
) -> Result<(), KernelError> {
    crate::error::expect_len("inputs of the matrices", ws.len(), xs.len())?;
    crate::error::expect_len("outputs of the matrices", ws.len(), ys.len())?;
    crate::error::expect_len("scratches of the matrices", ws.len(), scratches.len().min(ws.len()))?;
    for ((w, x), y) in ws.iter().zip(xs).zip(ys.iter()) {
        w.validate(x, y)?;
    }
    let isa = Isa::current();
    let threads = parallel.threads();
    let acts: Vec<Activations<'_>> = scratches
        .iter_mut()
        .zip(ws.iter().zip(xs))
        .map(|(scratch, (w, x))| scratch.activations_for(isa, w.dtype, x, parallel, x.rows >= 64 && threads > 1))
        .collect();
    let inputs: Vec<(Activations<'_>, usize)> = acts.into_iter().zip(xs.iter().map(|x| x.rows)).collect();
    // SAFETY: every y was validated for its matrix and input, whose rows
    // `inputs[j]` holds in the form matrix j's type needs. Chunks start on
    // pairs of groups, whatever each matrix's type and rows.
    unsafe { run_chunks(parallel, isa, ws, &inputs, ys, 2 * GROUP_ROWS) };
    Ok(())
}

/// Computes `ys[j]` from matrix `ws[j]` and the activations of
/// `inputs[j]` (with its row count) in one pass of the threads: matrix
/// j's columns sit at `starts[j]..starts[j] + rows` of one range, each
/// start a multiple of `align`, so every chunk's piece of a matrix starts
/// on a group (or a pair) of it.
///
/// # Safety
/// Each `ys[j]` was validated for `ws[j]` and `inputs[j]`'s row count, and
/// `inputs[j]`'s activations are its rows in the form `ws[j]`'s type
/// needs; `align` is a multiple of [`GROUP_ROWS`] (of two where a type
/// pairs groups).
unsafe fn run_chunks(
    parallel: &dyn Parallel,
    isa: Isa,
    ws: &[&PackedWeights],
    inputs: &[(Activations<'_>, usize)],
    ys: &mut [MatMut<'_>],
    align: usize,
) {
    let mut starts = Vec::with_capacity(ws.len());
    let mut total = 0;
    for w in ws {
        starts.push(total);
        total += w.rows.div_ceil(align) * align;
    }
    let outs: Vec<(DisjointWrites<f32>, usize)> =
        ys.iter_mut().map(|y| (DisjointWrites::new(y.data), y.row_stride)).collect();
    let threads = parallel.threads();
    let chunks = Chunks::new(total, threads, align);
    let task = |_: usize| {
        while let Some(range) = chunks.next() {
            for (((w, &start), &(out, stride)), &(acts, m)) in ws.iter().zip(&starts).zip(&outs).zip(inputs) {
                let cols = range.start.max(start) - start..range.end.min(start + w.rows).saturating_sub(start);
                if cols.start < cols.end {
                    // SAFETY: the caller validated each y; `Chunks` hands
                    // each range to one thread only, and a matrix's pieces
                    // of different ranges are disjoint columns.
                    unsafe { compute_packed(isa, w, acts, m, cols, out, stride) };
                }
            }
        }
    };
    if threads == 1 {
        task(0);
    } else {
        parallel.run(&task);
    }
}

/// Runs the packed tiles for rows `0..m`, columns `cols`.
///
/// # Safety
/// `out` holds `m` rows of at least `cols.end` elements at `out_stride`,
/// whose elements in `cols` no other thread accesses during the call;
/// `acts` are the activations of `m` rows for `w`'s type.
unsafe fn compute_packed(
    isa: Isa,
    w: &PackedWeights,
    acts: Activations<'_>,
    m: usize,
    cols: Range<usize>,
    out: DisjointWrites<f32>,
    out_stride: usize,
) {
    match_packed!(w.dtype, F => {
        // SAFETY: forwarded.
        unsafe { compute_as::<F>(isa, w, acts, m, cols, out, out_stride) }
    }, _ => unreachable!("only packable types are packed"))
}

/// The loop nest: for each group overlapping `cols`, every 8-row tile of
/// the activations where the level's tile takes 8, then 4-row tiles
/// (remainders 3, 2, 1), storing the columns in `cols`.
///
/// # Safety
/// As [`compute_packed`].
unsafe fn compute_as<F: PackedFormat>(
    isa: Isa,
    w: &PackedWeights,
    acts: Activations<'_>,
    m: usize,
    cols: Range<usize>,
    out: DisjointWrites<f32>,
    out_stride: usize,
) {
    if cols.is_empty() {
        return;
    }
    let act_rows = |m0: usize, rows: usize| acts.rows(m0 * w.blocks, (m0 + rows) * w.blocks);
    // The tiles' rows: 8 where the level's tile takes them, else 4, 3, 2, 1.
    let row_tiles = || {
        let mut m0 = 0;
        std::iter::from_fn(move || {
            let rows = match (m - m0).min(tile_rows(isa)) {
                0 => return None,
                r if r >= 8 => 8,
                r => r.min(TILE_ROWS),
            };
            m0 += rows;
            Some((m0 - rows, rows))
        })
    };
    let groups = cols.start / GROUP_ROWS..cols.end.div_ceil(GROUP_ROWS);
    let group = |g: usize| w.data[g * w.group_bytes..][..w.group_bytes].as_ptr();
    let mut g = groups.start;
    while g < groups.end {
        // Two groups at once where the level's pair tile is faster.
        let pair = g + 1 < groups.end && F::pairs_faster(isa, m.min(tile_rows(isa)));
        let count = if pair { 2 } else { 1 };
        let first = g * GROUP_ROWS;
        let keep = cols.start.max(first)..cols.end.min(first + count * GROUP_ROWS);
        for (m0, rows) in row_tiles() {
            macro_rules! tile {
                ($mr:literal) => {{
                    // Row m0 + i's first output column of the group(s)
                    // (row m0 + i < m: inside `out`, the caller's contract).
                    let to = |i: usize| out.ptr().wrapping_add((m0 + i) * out_stride + first);
                    if pair {
                        let mut tile = [[0.0f32; 2 * GROUP_ROWS]; $mr];
                        // SAFETY: both groups are whole (sliced above);
                        // `act_rows` holds rows m0..m0 + $mr; `isa` is
                        // current.
                        unsafe {
                            F::tile_pair::<$mr>(isa, act_rows(m0, $mr), w.blocks, [group(g), group(g + 1)], &mut tile)
                        };
                        for (i, row) in tile.iter().enumerate() {
                            let kept = &row[keep.start - first..keep.end - first];
                            // SAFETY: columns `keep` of the row are inside
                            // `cols` (caller's contract); `kept` is this
                            // frame's array, apart from `out`.
                            unsafe {
                                std::ptr::copy_nonoverlapping(kept.as_ptr(), to(i).add(keep.start - first), kept.len())
                            };
                        }
                    } else {
                        let mut tile = [[0.0f32; GROUP_ROWS]; $mr];
                        // SAFETY: as above, for the one group.
                        unsafe { F::tile::<$mr>(isa, act_rows(m0, $mr), w.blocks, group(g), &mut tile) };
                        for (i, row) in tile.iter().enumerate() {
                            // SAFETY: as above.
                            unsafe { store(row, keep.start - first..keep.end - first, to(i)) };
                        }
                    }
                }};
            }
            match rows {
                8 => tile!(8),
                4 => tile!(4),
                3 => tile!(3),
                2 => tile!(2),
                _ => tile!(1),
            }
        }
        g += count;
    }
}

/// Writes columns `keep` of a tile's row to `to` (its column 0): the whole
/// row as one fixed-size move (vector stores, not a library call) when it
/// is kept whole, else element by element.
///
/// # Safety
/// `to + c` is writable for every `c` in `keep`, and no other thread
/// accesses those elements meanwhile; `keep` lies inside `0..W`.
#[inline(always)]
unsafe fn store<const W: usize>(row: &[f32; W], keep: Range<usize>, to: *mut f32) {
    if keep == (0..W) {
        // SAFETY: `to..to + W` is writable (the caller's guarantee).
        unsafe { to.cast::<[f32; W]>().write_unaligned(*row) };
    } else {
        for c in keep {
            // SAFETY: as above, for column c.
            unsafe { *to.add(c) = row[c] };
        }
    }
}
