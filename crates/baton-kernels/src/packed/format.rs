//! What every packed weight format provides: its sizes, packing and
//! unpacking of one block, and its micro-kernel (the tile); and the rows a
//! packed group interleaves.

use baton_core::DType;

use crate::isa::Isa;
use crate::tiling::Activations;

/// Weight rows interleaved in one packed group.
pub const GROUP_ROWS: usize = 8;

/// A weight block format's packed form and its micro-kernel.
pub(crate) trait PackedFormat {
    /// The type packed.
    const DTYPE: DType;
    /// Values per block (32 or 256).
    const BLOCK_ELEMS: usize;
    /// Bytes of one block of one row as GGUF stores it.
    const BLOCK_BYTES: usize;
    /// Bytes of one packed block of [`GROUP_ROWS`] rows.
    const PACKED_BYTES: usize;

    /// Packs block `b` of each of the group's rows (`rows[r]` is row `r`'s
    /// block, [`Self::BLOCK_BYTES`] bytes; padding rows are all zero bytes)
    /// into `out` ([`Self::PACKED_BYTES`] bytes).
    fn pack_block(rows: &[&[u8]; GROUP_ROWS], out: &mut [u8]);

    /// Writes row `r`'s block back in GGUF's layout (the inverse of
    /// [`Self::pack_block`]).
    fn unpack_block(packed: &[u8], r: usize, out: &mut [u8]);

    /// `out[i][r] = x[i] · W[r]` for the group at `group` (all `blocks`
    /// packed blocks) and `MR` activation rows.
    ///
    /// # Safety
    /// `group` is readable for `blocks * PACKED_BYTES` bytes; `acts` holds
    /// `MR` rows of `blocks` activation blocks of the format's partner
    /// (`Activations::Blocks` for 32-value formats, `SuperBlocks` for the
    /// K-quants); `isa` is supported by this CPU.
    unsafe fn tile<const MR: usize>(
        isa: Isa,
        acts: Activations<'_>,
        blocks: usize,
        group: *const u8,
        out: &mut [[f32; GROUP_ROWS]; MR],
    );

    /// Whether [`Self::tile_pair`] is faster than two calls of
    /// [`Self::tile`] at `isa` for `rows` activation rows.
    fn pairs_faster(_isa: Isa, _rows: usize) -> bool {
        false
    }

    /// [`Self::tile`] for two groups at once: `out[i][..GROUP_ROWS]` for
    /// the group at `groups[0]`, `out[i][GROUP_ROWS..]` for the one at
    /// `groups[1]`, the same bits. This default takes them one at a time.
    ///
    /// # Safety
    /// As [`Self::tile`], for each of `groups`.
    unsafe fn tile_pair<const MR: usize>(
        isa: Isa,
        acts: Activations<'_>,
        blocks: usize,
        groups: [*const u8; 2],
        out: &mut [[f32; 2 * GROUP_ROWS]; MR],
    ) where
        Self: Sized,
    {
        // SAFETY: forwarded.
        unsafe { two_tiles::<Self, MR>(isa, acts, blocks, groups, out) }
    }
}

/// [`PackedFormat::tile_pair`] as two calls of [`PackedFormat::tile`].
///
/// # Safety
/// As [`PackedFormat::tile`], for each of `groups`.
pub(crate) unsafe fn two_tiles<F: PackedFormat, const MR: usize>(
    isa: Isa,
    acts: Activations<'_>,
    blocks: usize,
    groups: [*const u8; 2],
    out: &mut [[f32; 2 * GROUP_ROWS]; MR],
) {
    for (half, group) in groups.into_iter().enumerate() {
        let mut one = [[0.0f32; GROUP_ROWS]; MR];
        // SAFETY: forwarded (the caller's guarantee for each group).
        unsafe { F::tile::<MR>(isa, acts, blocks, group, &mut one) };
        for (out, one) in out.iter_mut().zip(&one) {
            out[half * GROUP_ROWS..][..GROUP_ROWS].copy_from_slice(one);
        }
    }
}
