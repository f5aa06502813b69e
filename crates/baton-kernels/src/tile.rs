//! The micro-kernel tile every weight type implements ([`TileKernel`]) and
//! the tile shapes a kernel's registers fit ([`TileShapes`]); `tiling` runs
//! the loop nest over them.

/// One tile of dot products: `out[i][j] = x[m0 + i] · W[n0 + j]`.
///
/// Every tile shape computes each output with the same operations in the
/// same order, so an output does not depend on `MR`, `NR` or the tile's
/// other rows and columns (row invariance, see `matmul`).
pub(crate) trait TileKernel: Sync {
    /// Computes the `MR x NR` tile at activation row `m0`, weight row `n0`.
    fn tile<const MR: usize, const NR: usize>(&self, m0: usize, n0: usize, out: &mut [[f32; NR]; MR]);

    /// The tile shapes that fit the kernel's registers.
    fn shapes(&self) -> TileShapes {
        TileShapes::Narrow
    }
}

/// The tile shapes (`MR x NR`) a kernel runs, by the registers it has.
/// Whatever the shapes, an output gets the same bits (see [`TileKernel`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum TileShapes {
    /// 16 registers (the quantized AVX2 tiles): 4 x 2, 3 x 2, 2 x 2; a
    /// lone activation row 1 x 4.
    Narrow,
    /// 32 registers (AVX-512): 4 x 4, 3 x 4, 2 x 4; a lone row 1 x 4.
    Wide,
    /// 16 registers of plain f32 accumulators (the float AVX2 tile): 12
    /// accumulators, a weight vector per column and an activation vector
    /// in 4 x 3 and 3 x 4, then 2 x 4; a lone row 1 x 8 (8 independent
    /// FMA chains, 2 ports of 4 cycles' latency).
    Twelve,
}

impl TileShapes {
    /// Weight rows per chunk are a multiple of this (every `NR` divides
    /// it, so no column of a chunk falls to a 1-wide tile).
    pub(crate) fn chunk_step(self) -> usize {
        match self {
            TileShapes::Twelve => 24,
            _ => 4,
        }
    }
}
