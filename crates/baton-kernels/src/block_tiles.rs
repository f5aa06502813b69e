//! Tiles of `x · Wᵀ` for block-quantized weights, over any block format:
//! the activation rows in blocks `A` (the format's partner, quantized once
//! per call) against the weight rows, through the format's micro-kernel
//! ([`BlockKernel`]). `quant_tile` implements it for the 32-value formats
//! against [`ActBlock`](crate::activation::ActBlock)s, `kquant_tile` for the
//! K-quants against [`SuperActBlock`](crate::activation::SuperActBlock)s.

use std::marker::PhantomData;

use crate::isa::Isa;
use crate::tile::TileKernel;

/// A weight block format's micro-kernel against activation blocks `A`.
pub(crate) trait BlockKernel<A> {
    /// Bytes of one weight block.
    const BLOCK_BYTES: usize;

    /// Computes `out[i][j] = Σ_b acts[i * blocks + b] · block b of row j`.
    ///
    /// # Safety
    /// `acts` holds `MR * blocks` blocks; `w` rows `0..NR` (stride
    /// `w_stride` bytes) hold `blocks` readable blocks of the format; `isa`
    /// is supported by this CPU (`Isa::current`).
    unsafe fn tile<const MR: usize, const NR: usize>(
        isa: Isa,
        acts: &[A],
        blocks: usize,
        w: *const u8,
        w_stride: usize,
        out: &mut [[f32; NR]; MR],
    );
}

/// Implements [`BlockKernel`] for every format of `$format` against
/// activation blocks `$act`, dispatching to the calling module's
/// `tile_avx512`, `tile_avx2` and `tile_scalar` (same signature, `F` the
/// format).
macro_rules! block_kernel {
    ($format:ident, $act:ty) => {
        impl<F: $format> $crate::block_tiles::BlockKernel<$act> for F {
            const BLOCK_BYTES: usize = F::BYTES;

            #[inline]
            unsafe fn tile<const MR: usize, const NR: usize>(
                isa: $crate::isa::Isa,
                acts: &[$act],
                blocks: usize,
                w: *const u8,
                w_stride: usize,
                out: &mut [[f32; NR]; MR],
            ) {
                match isa {
                    #[cfg(target_arch = "x86_64")]
                    // SAFETY: the caller's guarantees (BlockKernel::tile);
                    // `isa` came from detection (`Isa::current`), so the CPU
                    // has AVX-512 F, BW, VL, DQ and VNNI besides AVX2.
                    $crate::isa::Isa::Avx512 => unsafe { tile_avx512::<F, MR, NR>(acts, blocks, w, w_stride, out) },
                    #[cfg(target_arch = "x86_64")]
                    // SAFETY: the caller's guarantees (BlockKernel::tile);
                    // `isa` came from detection, so the CPU has AVX2, FMA, F16C.
                    $crate::isa::Isa::Avx2 | $crate::isa::Isa::AvxVnni => unsafe {
                        tile_avx2::<F, MR, NR>(acts, blocks, w, w_stride, out)
                    },
                    // SAFETY: as above.
                    _ => unsafe { tile_scalar::<F, MR, NR>(acts, blocks, w, w_stride, out) },
                }
            }
        }
    };
}
pub(crate) use block_kernel;

/// Tiles of `x · Wᵀ` for activation blocks `A` and weights of format `F`.
pub(crate) struct BlockTiles<'a, A, F> {
    pub isa: Isa,
    /// Activation blocks; row `i` is `acts[i * blocks .. (i + 1) * blocks]`.
    /// Checked by the caller to hold every row used.
    pub acts: &'a [A],
    /// Blocks per row.
    pub blocks: usize,
    /// Weights; row `j` starts at byte `j * w_stride` and holds `blocks`
    /// blocks. Checked by the caller for every row used.
    pub w: &'a [u8],
    pub w_stride: usize,
    pub format: PhantomData<F>,
}

impl<A: Sync, F: BlockKernel<A> + Sync> TileKernel for BlockTiles<'_, A, F> {
    #[inline]
    fn tile<const MR: usize, const NR: usize>(&self, m0: usize, n0: usize, out: &mut [[f32; NR]; MR]) {
        let acts = &self.acts[m0 * self.blocks..(m0 + MR) * self.blocks];
        assert!((n0 + NR - 1) * self.w_stride + self.blocks * F::BLOCK_BYTES <= self.w.len());
        // SAFETY: the assert above keeps rows n0..n0+NR inside `w`.
        let w = unsafe { self.w.as_ptr().add(n0 * self.w_stride) };
        // SAFETY: `acts` holds MR rows (slicing above), `w` NR rows (assert
        // above); `isa` comes from `Isa::current` (the caller's).
        unsafe { F::tile::<MR, NR>(self.isa, acts, self.blocks, w, self.w_stride, out) }
    }
}
