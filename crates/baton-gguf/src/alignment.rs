//! Where tensor data starts: the metadata key that sets the alignment, its
//! default, and the rounding the reader and the writer share.

/// The metadata key holding the data alignment.
pub const ALIGNMENT_KEY: &str = "general.alignment";
/// The alignment used when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// Rounds `offset` up to a multiple of `alignment` (a power of two),
/// saturating near `u64::MAX`.
pub(crate) fn align_up(offset: u64, alignment: u64) -> u64 {
    match offset % alignment {
        0 => offset,
        rem => offset.saturating_add(alignment - rem),
    }
}
