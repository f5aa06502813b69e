//! Shapes and strided layouts of up to four dimensions.
//!
//! Dimensions are listed outermost first, as in NumPy and PyTorch: a matrix
//! of `rows` rows of `cols` elements is `[rows, cols]`. (GGUF lists them
//! innermost first; the loader reverses them.) Strides are in bytes, so one
//! layout type serves plain and block-quantized types; for a quantized type
//! the innermost dimension must be contiguous and a whole number of blocks.

use std::fmt;

use crate::DType;

/// Most dimensions a tensor may have.
pub const MAX_DIMS: usize = 4;

/// A shape of 1 to 4 dimensions, outermost first.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shape {
    dims: [usize; MAX_DIMS],
    rank: usize,
}

/// Errors of shape arithmetic.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    /// Rank outside 1..=4.
    #[error("a tensor has 1 to {MAX_DIMS} dimensions, not {0}")]
    Rank(usize),
    /// The element count or byte size overflows `usize`.
    #[error("shape {0:?} is too large")]
    Overflow(Vec<usize>),
    /// A quantized row is not a whole number of blocks.
    #[error("{dtype} rows hold whole blocks of {block} elements; {elems} is not a multiple")]
    PartialBlock {
        /// The type.
        dtype: DType,
        /// Its block size.
        block: usize,
        /// The row length given.
        elems: usize,
    },
    /// Two shapes that must agree do not.
    #[error("{what}: {left:?} and {right:?} do not agree")]
    Mismatch {
        /// What was being combined.
        what: &'static str,
        /// The first shape.
        left: Vec<usize>,
        /// The second shape.
        right: Vec<usize>,
    },
    /// A view reaches outside its source.
    #[error("view {view:?} reaches byte {end} of a source of {len} bytes")]
    OutOfBounds {
        /// The view's shape.
        view: Vec<usize>,
        /// One past the last byte it touches.
        end: usize,
        /// The source's size in bytes.
        len: usize,
    },
    /// A permutation is not one.
    #[error("{0:?} is not a permutation of the dimensions")]
    BadPermutation(Vec<usize>),
    /// A reshape of a non-contiguous tensor.
    #[error("only a contiguous tensor can be reshaped; make it contiguous first")]
    NotContiguous,
}

impl Shape {
    /// A shape from its dimensions, outermost first.
    pub fn new(dims: &[usize]) -> Result<Shape, ShapeError> {
        if dims.is_empty() || dims.len() > MAX_DIMS {
            return Err(ShapeError::Rank(dims.len()));
        }
        let mut all = [1; MAX_DIMS];
        all[..dims.len()].copy_from_slice(dims);
        let shape = Shape { dims: all, rank: dims.len() };
        shape
            .dims()
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| ShapeError::Overflow(dims.to_vec()))?;
        Ok(shape)
    }

    /// The dimensions, outermost first.
    pub fn dims(&self) -> &[usize] {
        &self.dims[..self.rank]
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Number of elements.
    pub fn elems(&self) -> usize {
        self.dims().iter().product()
    }

    /// The innermost dimension (row length).
    pub fn last(&self) -> usize {
        self.dims[self.rank - 1]
    }

    /// Number of rows (elements / row length).
    pub fn rows(&self) -> usize {
        self.elems() / self.last().max(1)
    }

    /// The dimensions right-aligned into four, padded with 1 on the outside.
    pub fn dims4(&self) -> [usize; MAX_DIMS] {
        let mut out = [1; MAX_DIMS];
        out[MAX_DIMS - self.rank..].copy_from_slice(self.dims());
        out
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.dims())
    }
}

/// A strided view: shape, byte strides, and byte offset into its storage.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Layout {
    /// The shape.
    pub shape: Shape,
    /// Bytes between consecutive indices of each dimension (per block for
    /// the innermost dimension of a quantized type).
    pub strides: [usize; MAX_DIMS],
    /// Byte offset of element 0 from the start of the storage.
    pub offset: usize,
}

impl Layout {
    /// The contiguous row-major layout of `shape` in `dtype`.
    pub fn contiguous(dtype: DType, shape: Shape) -> Result<Layout, ShapeError> {
        let row = dtype.row_bytes(shape.last()).ok_or(ShapeError::PartialBlock {
            dtype,
            block: dtype.block_elems(),
            elems: shape.last(),
        })?;
        let mut strides = [0; MAX_DIMS];
        let rank = shape.rank();
        strides[rank - 1] = dtype.block_bytes();
        let mut acc = row;
        for d in (0..rank - 1).rev() {
            strides[d] = acc;
            acc = acc.checked_mul(shape.dims()[d]).ok_or_else(|| ShapeError::Overflow(shape.dims().to_vec()))?;
        }
        // Also check the outermost product fits.
        shape.dims()[0].checked_mul(strides[0]).ok_or_else(|| ShapeError::Overflow(shape.dims().to_vec()))?;
        Ok(Layout { shape, strides, offset: 0 })
    }

    /// The strides of the used dimensions.
    pub fn strides(&self) -> &[usize] {
        &self.strides[..self.shape.rank()]
    }

    /// Whether the layout is the contiguous row-major one (ignoring offset).
    pub fn is_contiguous(&self, dtype: DType) -> bool {
        match Layout::contiguous(dtype, self.shape) {
            Ok(c) => (0..self.shape.rank()).all(|d| self.shape.dims()[d] == 1 || c.strides[d] == self.strides[d]),
            Err(_) => false,
        }
    }

    /// Whether rows (the innermost dimension) are contiguous.
    pub fn rows_contiguous(&self, dtype: DType) -> bool {
        self.shape.last() == 1 || self.strides[self.shape.rank() - 1] == dtype.block_bytes()
    }

    /// One past the last byte the layout touches (offset included).
    pub fn end_byte(&self, dtype: DType) -> usize {
        if self.shape.elems() == 0 {
            return self.offset;
        }
        let rank = self.shape.rank();
        let mut end = self.offset;
        for d in 0..rank - 1 {
            end += (self.shape.dims()[d] - 1) * self.strides[d];
        }
        let last_blocks = self.shape.last() / dtype.block_elems();
        end + last_blocks.saturating_sub(1) * self.strides[rank - 1] + dtype.block_bytes()
    }

    /// Byte strides right-aligned to four dimensions (outer padding 0).
    pub fn strides4(&self) -> [usize; MAX_DIMS] {
        let mut out = [0; MAX_DIMS];
        let rank = self.shape.rank();
        out[MAX_DIMS - rank..].copy_from_slice(self.strides());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_strides_are_row_major_in_bytes() {
        let l = Layout::contiguous(DType::F32, Shape::new(&[2, 3, 4]).unwrap()).unwrap();
        assert_eq!(l.strides(), &[48, 16, 4]);
        assert_eq!(l.end_byte(DType::F32), 96);
        let q = Layout::contiguous(DType::Q8_0, Shape::new(&[3, 64]).unwrap()).unwrap();
        assert_eq!(q.strides(), &[68, 34]);
        assert_eq!(q.end_byte(DType::Q8_0), 204);
    }

    #[test]
    fn bad_shapes_are_errors() {
        assert_eq!(Shape::new(&[]), Err(ShapeError::Rank(0)));
        assert!(Shape::new(&[1, 2, 3, 4, 5]).is_err());
        assert!(matches!(Shape::new(&[usize::MAX, 2]), Err(ShapeError::Overflow(_))));
        let s = Shape::new(&[2, 33]).unwrap();
        assert!(matches!(Layout::contiguous(DType::Q4_0, s), Err(ShapeError::PartialBlock { .. })));
    }
}
