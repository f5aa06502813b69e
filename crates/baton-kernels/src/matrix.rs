//! The matrix views `matmul` takes, and the checks that make every later
//! raw-pointer access in the tiles stay inside them.

use baton_core::DType;

use crate::error::{expect_len, KernelError};

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
    pub fn contiguous(dtype: DType, data: &'a [u8], rows: usize, cols: usize) -> Result<Self, KernelError> {
        let row_stride_bytes = encoded_row_bytes(dtype, cols)?;
        Ok(WeightMatrix { dtype, data, rows, cols, row_stride_bytes })
    }

    /// Checks the layout and returns the bytes of one encoded row.
    pub(crate) fn validate(&self) -> Result<usize, KernelError> {
        if !crate::weight_types::is_weight_type(self.dtype) {
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
        check_extent("weight data", self.rows, self.row_stride_bytes, row_bytes, self.data.len())?;
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
        MatRef { data, rows, cols, row_stride: cols }
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
        MatMut { data, rows, cols, row_stride: cols }
    }
}

fn encoded_row_bytes(dtype: DType, cols: usize) -> Result<usize, KernelError> {
    dtype.row_bytes(cols).ok_or(KernelError::PartialBlock { dtype, elems: cols, block_elems: dtype.block_elems() })
}

/// Checks that `rows` rows of `row` units at `stride` fit in `len`.
fn check_extent(what: &'static str, rows: usize, stride: usize, row: usize, len: usize) -> Result<(), KernelError> {
    if rows == 0 {
        return Ok(());
    }
    let needed = (rows - 1).checked_mul(stride).and_then(|s| s.checked_add(row));
    match needed {
        Some(needed) if needed <= len => Ok(()),
        _ => Err(KernelError::BufferTooSmall { what, needed: needed.unwrap_or(usize::MAX), actual: len }),
    }
}

fn check_matrix(what: &'static str, rows: usize, cols: usize, stride: usize, len: usize) -> Result<(), KernelError> {
    if stride < cols {
        return Err(KernelError::StrideTooSmall { what, stride, row: cols });
    }
    check_extent(what, rows, stride, cols, len)
}

pub(crate) fn validate(w: &WeightMatrix<'_>, x: &MatRef<'_>, y: &MatMut<'_>) -> Result<usize, KernelError> {
    let row_bytes = w.validate()?;
    validate_io(w.cols, w.rows, x, y)?;
    Ok(row_bytes)
}

/// Checks `x` and `y` against a weight matrix of `rows` rows of `cols`
/// elements: `x` is `m x cols`, `y` is `m x rows`, both inside their data.
pub(crate) fn validate_io(cols: usize, rows: usize, x: &MatRef<'_>, y: &MatMut<'_>) -> Result<(), KernelError> {
    expect_len("x columns (= weight columns)", cols, x.cols)?;
    expect_len("y columns (= weight rows)", rows, y.cols)?;
    expect_len("y rows (= x rows)", x.rows, y.rows)?;
    check_matrix("x", x.rows, x.cols, x.row_stride, x.data.len())?;
    check_matrix("y", y.rows, y.cols, y.row_stride, y.data.len())
}

/// Checks that the output columns `n_range` lie inside `0..rows`.
pub(crate) fn check_columns(n_range: &std::ops::Range<usize>, rows: usize) -> Result<(), KernelError> {
    if n_range.start > n_range.end || n_range.end > rows {
        return Err(KernelError::RangeOutOfBounds {
            what: "output columns",
            start: n_range.start,
            end: n_range.end,
            len: rows,
        });
    }
    Ok(())
}
