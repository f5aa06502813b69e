//! The errors kernels return for inputs whose shapes do not fit.

use baton_core::DType;

/// A shape or length problem found before any work was done.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    /// The type holds integers, not numbers a kernel computes with.
    #[error("{dtype} is not a floating-point or quantized type")]
    NotFloat {
        /// The element type.
        dtype: DType,
    },
    /// A row of a block-quantized type must hold whole blocks.
    #[error("a {dtype} row must be whole blocks of {block_elems} elements, got {elems} elements")]
    PartialBlock {
        /// The element type.
        dtype: DType,
        /// The number of elements given.
        elems: usize,
        /// Elements per block of `dtype`.
        block_elems: usize,
    },
    /// Two lengths that must agree do not.
    #[error("{what}: expected {expected}, got {actual}")]
    LengthMismatch {
        /// Which length, in words (`"encoded row bytes"`).
        what: &'static str,
        /// The length the other arguments require.
        expected: usize,
        /// The length given.
        actual: usize,
    },
    /// A buffer is shorter than its shape and stride require.
    #[error("{what}: needs at least {needed} elements or bytes, has {actual}")]
    BufferTooSmall {
        /// Which buffer, in words (`"weight data"`).
        what: &'static str,
        /// The minimum length the shape requires.
        needed: usize,
        /// The length given.
        actual: usize,
    },
    /// A row stride is smaller than a row.
    #[error("{what}: stride {stride} is smaller than a row of {row}")]
    StrideTooSmall {
        /// Which matrix, in words.
        what: &'static str,
        /// The stride given.
        stride: usize,
        /// The row length it must be at least.
        row: usize,
    },
    /// Matrices multiplied in one pass have different types.
    #[error("matrices of one pass must share a type: {first} and {other}")]
    MixedTypes {
        /// The first matrix's type.
        first: DType,
        /// The type of a later one.
        other: DType,
    },
    /// A range of rows or columns reaches past the end.
    #[error("{what}: range {start}..{end} is outside 0..{len}")]
    RangeOutOfBounds {
        /// Which range, in words.
        what: &'static str,
        /// Start of the range.
        start: usize,
        /// End of the range.
        end: usize,
        /// The length it must fit in.
        len: usize,
    },
}

/// Fails with [`KernelError::LengthMismatch`] unless `expected == actual`.
pub(crate) fn expect_len(what: &'static str, expected: usize, actual: usize) -> Result<(), KernelError> {
    if expected == actual {
        Ok(())
    } else {
        Err(KernelError::LengthMismatch { what, expected, actual })
    }
}
