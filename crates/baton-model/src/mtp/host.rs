//! The multi-token-prediction head's arithmetic, on the CPU backend's
//! kernels (baton-kernels): each matrix multiplied where it lies in the
//! file's mapped bytes by the kernels' matmul (the activation row
//! quantized once into Q8 blocks for quantized weights, then integer
//! tiles; f32 FMA tiles for float weights; the instruction set, AVX-512,
//! AVX2 or portable, chosen at run time), the large ones split over the
//! host threads given; norms, RoPE and SwiGLU are the kernels' f32 row
//! ops. No matrix is copied: the head's memory beyond the file's pages is
//! its activation scratch, its rows' keys and values, and a row's logits.

use baton_core::parallel::SingleThread;
use baton_core::{DType, Parallel};
use baton_gguf::GgufFile;
use baton_kernels::{matmul, ops, MatMut, MatRef, RopeMode, Scratch, WeightMatrix};

use crate::error::ModelError;

/// Weight bytes from which a product is split over the threads: below it
/// waking them costs more than the rows they would take.
const SPLIT_BYTES: usize = 1 << 16;

/// A matrix of the file: `rows` rows of `cols` values of `dtype` (ggml's
/// `[cols, rows]`), or a stack of `count` such matrices (experts).
pub(super) struct Matrix {
    /// The tensor's name in the file.
    name: String,
    dtype: DType,
    cols: usize,
    rows: usize,
    row_bytes: usize,
    /// Where its data starts in the file, and the matrices it holds.
    offset: usize,
    count: usize,
}

impl Matrix {
    /// The tensor `name` of `file`, checked to be `count` matrices of
    /// `rows` rows of `cols` values.
    pub(super) fn find(
        file: &GgufFile,
        name: &str,
        (cols, rows, count): (usize, usize, usize),
    ) -> Result<Matrix, ModelError> {
        let tensor = file.tensor(name).ok_or_else(|| ModelError::MissingTensor(name.to_string()))?;
        let found: Vec<usize> = tensor.dims().iter().rev().map(|&d| d as usize).collect();
        let expected = match count {
            1 => vec![rows, cols],
            n => vec![n, rows, cols],
        };
        // A vector is a matrix of one row.
        let found_as_matrix = match found.len() {
            1 => vec![1, found[0]],
            _ => found.clone(),
        };
        if found_as_matrix != expected {
            return Err(ModelError::TensorShape { name: name.to_string(), found, expected });
        }
        let gtype = tensor.ggml_type();
        let unsupported = |type_name: String| ModelError::UnsupportedType { name: name.to_string(), type_name };
        let dtype = DType::from_ggml_id(gtype.id())
            .filter(|&d| baton_kernels::is_weight_type(d))
            .ok_or_else(|| unsupported(gtype.name().unwrap_or("unknown").to_string()))?;
        let row_bytes = dtype
            .row_bytes(cols)
            .ok_or_else(|| unsupported(format!("{dtype} (rows of {cols} values are not whole blocks)")))?;
        let matrix = Matrix {
            name: name.to_string(),
            dtype,
            cols,
            rows,
            row_bytes,
            offset: tensor.info().file_offset() as usize,
            count,
        };
        // The tensor's bytes lie in the file (its reader checked them).
        matrix.bytes(file, count.saturating_sub(1))?;
        Ok(matrix)
    }

    /// The encoded rows of matrix `index` of the stack.
    fn bytes<'f>(&self, file: &'f GgufFile, index: usize) -> Result<&'f [u8], ModelError> {
        let size = self.rows * self.row_bytes;
        let start = self.offset + index * size;
        (index < self.count)
            .then(|| file.as_bytes().get(start..start + size))
            .flatten()
            .ok_or_else(|| ModelError::Input(format!("matrix {index} of {:?} is past its data", self.name)))
    }

    /// Row `row` of matrix `index` of the stack, as f32.
    pub(super) fn row(&self, file: &GgufFile, index: usize, row: usize, out: &mut [f32]) -> Result<(), ModelError> {
        let bytes =
            self.bytes(file, index)?.get(row * self.row_bytes..(row + 1) * self.row_bytes).ok_or_else(|| {
                ModelError::Input(format!("row {row} of matrix {index} of {:?} is past its data", self.name))
            })?;
        baton_kernels::dequantize_row(self.dtype, bytes, &mut out[..self.cols])
            .map_err(|e| ModelError::Input(format!("{}: {e}", self.name)))
    }

    /// Rows of each matrix.
    pub(super) fn rows(&self) -> usize {
        self.rows
    }

    /// The tensor's name in the file.
    pub(super) fn name(&self) -> &str {
        &self.name
    }

    /// The weights' type.
    pub(super) fn dtype(&self) -> DType {
        self.dtype
    }
}

/// What the head multiplies with: the host threads its large products
/// split over (none: the calling thread), and the activations' scratch.
#[derive(Default)]
pub(super) struct Kernels {
    pub(super) threads: Option<std::sync::Arc<dyn baton_core::backend::Device>>,
    scratch: Scratch,
}

impl Kernels {
    /// The product of matrix `index` of `m`'s stack with `x` (`cols`
    /// values): `rows` values.
    pub(super) fn times(
        &mut self,
        m: &Matrix,
        file: &GgufFile,
        index: usize,
        x: &[f32],
    ) -> Result<Vec<f32>, ModelError> {
        let w = WeightMatrix {
            dtype: m.dtype,
            data: m.bytes(file, index)?,
            rows: m.rows,
            cols: m.cols,
            row_stride_bytes: m.row_bytes,
        };
        let mut out = vec![0.0; m.rows];
        let pool = self.threads.as_ref().and_then(|d| d.host_threads());
        let threads: &dyn Parallel = match pool {
            Some(pool) if m.rows * m.row_bytes >= SPLIT_BYTES => pool,
            _ => &SingleThread,
        };
        let (xm, mut ym) = (MatRef::contiguous(x, 1, m.cols), MatMut::contiguous(&mut out, 1, m.rows));
        matmul(threads, &w, &xm, &mut ym, &mut self.scratch)
            .map_err(|e| ModelError::Input(format!("{}: {e}", m.name)))?;
        Ok(out)
    }
}

/// `x / rms(x) * weight`, `rms(x) = sqrt(mean(x²) + eps)`.
pub(super) fn rms_norm(x: &[f32], weight: &[f32], eps: f32) -> Vec<f32> {
    let mut out = vec![0.0; x.len()];
    ops::rms_norm(x, eps, &mut out);
    ops::mul_in_place(&mut out, weight);
    out
}

/// NeoX RoPE over the first `dims` values of `head` at `position`: pairs
/// `(i, i + dims/2)` rotate by `position · base^(-2i/dims)`.
pub(super) fn rope_neox(head: &mut [f32], dims: usize, base: f32, position: usize) {
    baton_kernels::rope_in_place(head, position, dims, base, 1.0, RopeMode::NeoX);
}

/// The logistic function.
pub(super) fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// `silu(gate) · up`, element by element.
pub(super) fn swiglu(gate: &[f32], up: &[f32]) -> Vec<f32> {
    let mut out = vec![0.0; gate.len()];
    ops::swiglu(gate, up, &mut out);
    out
}

/// A norm or vector of the file as f32, checked to hold `len` values.
pub(super) fn vector(file: &GgufFile, name: &str, len: usize) -> Result<Vec<f32>, ModelError> {
    let matrix = Matrix::find(file, name, (len, 1, 1))?;
    let mut out = vec![0.0; len];
    matrix.row(file, 0, 0, &mut out)?;
    Ok(out)
}
