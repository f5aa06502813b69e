//! The blocked loop nest of `matmul` over micro-kernel tiles, and the
//! shared-output wrapper that lets threads write disjoint columns.

use std::ops::Range;

use baton_core::DType;
use half::{bf16, f16};

use crate::activation::{ActBlock, SuperActBlock};
use crate::block_tiles::BlockTiles;
use crate::float_tile::FloatTiles;
use crate::isa::Isa;
use crate::matrix::WeightMatrix;
use crate::quant::{match_format, BLOCK_ELEMS, SUPER_ELEMS};
use crate::tile::{TileKernel, TileShapes};

/// The activations in the form the weight type's tiles read.
#[derive(Clone, Copy)]
pub(crate) enum Activations<'a> {
    /// f32 rows at a stride (float weights).
    Float { x: &'a [f32], stride: usize },
    /// `m * k / 32` blocks, row after row (32-value quantized weights).
    Blocks(&'a [ActBlock]),
    /// `m * k / 256` Q8_K super-blocks, row after row (K-quant weights).
    SuperBlocks(&'a [SuperActBlock]),
}

impl<'a> Activations<'a> {
    /// Blocks `start..end` (in blocks, rows after rows); float activations
    /// are returned whole (their rows are addressed by stride).
    pub(crate) fn rows(self, start: usize, end: usize) -> Activations<'a> {
        match self {
            Activations::Float { .. } => self,
            Activations::Blocks(b) => Activations::Blocks(&b[start..end]),
            Activations::SuperBlocks(b) => Activations::SuperBlocks(&b[start..end]),
        }
    }
}

/// A mutable buffer that several threads write to at disjoint indices.
pub(crate) struct DisjointWrites<T> {
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
    pub(crate) fn new(data: &mut [T]) -> Self {
        DisjointWrites { ptr: data.as_mut_ptr() }
    }

    /// The start of the buffer (a method, so closures capture the whole
    /// `Sync` wrapper rather than its raw pointer field).
    pub(crate) fn ptr(self) -> *mut T {
        self.ptr
    }
}

/// Activation rows per L2 block.
const M_BLOCK: usize = 64;
/// Target bytes of a chunk of weight rows reused across an activation block.
const W_CHUNK_BYTES: usize = 32 * 1024;
/// Weight bytes above which a lone activation row takes Q8_0 weight rows
/// one at a time (see `run_tiles`).
const STREAM_BYTES: usize = 256 * 1024;

/// Runs the tiles of the weight type for rows `0..m`, columns `cols`.
///
/// # Safety
/// `out` points at a buffer holding `m` rows of at least `cols.end` elements
/// at stride `out_stride`, whose elements in `cols` no other thread accesses
/// during the call; `w` and `acts` were validated against `m` and `cols`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn compute(
    isa: Isa,
    w: &WeightMatrix<'_>,
    row_bytes: usize,
    acts: Activations<'_>,
    m: usize,
    cols: Range<usize>,
    out: DisjointWrites<f32>,
    out_stride: usize,
) {
    // Q8_0 rows only: the 4-bit tiles are bound by their integer work, which
    // one row at a time does not speed up, and float weights were no faster
    // so (docs/measurements.md). A property of the matrix (not of this
    // thread's share), so results do not depend on the thread count or the
    // column ranges; and since every tile shape sums each output in the same
    // order, not on `m` either (row invariance, see `matmul`).
    let stream = w.dtype == DType::Q8_0 && m == 1 && w.rows * row_bytes > STREAM_BYTES;
    macro_rules! run {
        ($kernel:expr) => {
            // SAFETY: forwarded from this function's contract.
            unsafe { run_tiles(&$kernel, m, cols, row_bytes, stream, out, out_stride) }
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
        (dtype, acts) => match_format!(dtype,
            F => {
                let Activations::Blocks(acts) = acts else { unreachable!("{dtype} weights get Q8 blocks") };
                run!(BlockTiles::<ActBlock, F> {
                    isa,
                    acts,
                    blocks: w.cols / BLOCK_ELEMS,
                    w: w.data,
                    w_stride: w.row_stride_bytes,
                    format: std::marker::PhantomData,
                })
            },
            K => {
                let Activations::SuperBlocks(acts) = acts else { unreachable!("{dtype} weights get Q8_K blocks") };
                run!(BlockTiles::<SuperActBlock, K> {
                    isa,
                    acts,
                    blocks: w.cols / SUPER_ELEMS,
                    w: w.data,
                    w_stride: w.row_stride_bytes,
                    format: std::marker::PhantomData,
                })
            },
            plain => unreachable!("float weights always get float activations")),
    }
}

/// The blocked loop nest over tiles (see the module docs), over chunks of
/// weight rows of about [`W_CHUNK_BYTES`] (`row_bytes` each). A lone
/// activation row multiplies 4 weight rows at a time (8 with
/// [`TileShapes::Twelve`]), unless `stream` (Q8_0 weights larger than L2)
/// asks for one row at a time.
///
/// # Safety
/// As [`compute`].
unsafe fn run_tiles<K: TileKernel>(
    kernel: &K,
    m: usize,
    cols: Range<usize>,
    row_bytes: usize,
    stream: bool,
    out: DisjointWrites<f32>,
    out_stride: usize,
) {
    let shapes = kernel.shapes();
    let step = shapes.chunk_step();
    let chunk = (W_CHUNK_BYTES / row_bytes.max(1) / step * step).clamp(step, 64 / step * step);
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
                    match (rows, shapes) {
                        (4, TileShapes::Wide) => row_tiles::<K, 4, 4>(kernel, m0, c0..c1, out, out_stride),
                        (4, TileShapes::Twelve) => row_tiles::<K, 4, 3>(kernel, m0, c0..c1, out, out_stride),
                        (3, TileShapes::Wide | TileShapes::Twelve) => {
                            row_tiles::<K, 3, 4>(kernel, m0, c0..c1, out, out_stride)
                        }
                        (2, TileShapes::Wide | TileShapes::Twelve) => {
                            row_tiles::<K, 2, 4>(kernel, m0, c0..c1, out, out_stride)
                        }
                        (4, _) => row_tiles::<K, 4, 2>(kernel, m0, c0..c1, out, out_stride),
                        (3, _) => row_tiles::<K, 3, 2>(kernel, m0, c0..c1, out, out_stride),
                        (2, _) => row_tiles::<K, 2, 2>(kernel, m0, c0..c1, out, out_stride),
                        // Q8_0 from beyond L2: one weight row at a time is
                        // one sequential stream, which the prefetcher
                        // follows better than four interleaved rows
                        // (docs/measurements.md); from L2, four rows give
                        // more independent work per step. Either way the
                        // same tile code sums each output.
                        _ if stream => row_tiles::<K, 1, 1>(kernel, m0, c0..c1, out, out_stride),
                        (_, TileShapes::Twelve) => row_tiles::<K, 1, 8>(kernel, m0, c0..c1, out, out_stride),
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
