//! The host arithmetic of the multi-token-prediction head: matrices read
//! row by row from the file's bytes (dequantized one row at a time, so a
//! quantized head costs no more memory than its file), RMS norms, NeoX
//! RoPE and the SiLU gate. Sums accumulate in f64.

use baton_core::DType;
use baton_gguf::GgufFile;

use crate::error::ModelError;

/// A matrix of the file: `rows` rows of `cols` values of `dtype` (ggml's
/// `[cols, rows]`), or a stack of `count` such matrices (experts).
pub(super) struct Matrix {
    /// The tensor's name in the file.
    name: String,
    dtype: DType,
    cols: usize,
    rows: usize,
    row_bytes: usize,
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
        let dtype = DType::from_ggml_id(gtype.id()).ok_or_else(|| ModelError::UnsupportedType {
            name: name.to_string(),
            type_name: gtype.name().unwrap_or("unknown").to_string(),
        })?;
        let row_bytes = dtype.row_bytes(cols).ok_or_else(|| ModelError::UnsupportedType {
            name: name.to_string(),
            type_name: format!("{dtype} (rows of {cols} values are not whole blocks)"),
        })?;
        Ok(Matrix { name: name.to_string(), dtype, cols, rows, row_bytes })
    }

    /// Row `row` of matrix `index` of the stack, as f32.
    pub(super) fn row(&self, file: &GgufFile, index: usize, row: usize, out: &mut [f32]) -> Result<(), ModelError> {
        let data = file.tensor(&self.name).ok_or_else(|| ModelError::MissingTensor(self.name.clone()))?.data();
        let start = (index * self.rows + row) * self.row_bytes;
        let bytes = data.get(start..start + self.row_bytes).ok_or_else(|| {
            ModelError::Input(format!("row {row} of matrix {index} of {:?} is past its data", self.name))
        })?;
        baton_kernels::dequantize_row(self.dtype, bytes, &mut out[..self.cols])
            .map_err(|e| ModelError::Input(format!("{}: {e}", self.name)))
    }

    /// The product of matrix `index` of the stack with `x` (`cols` values).
    pub(super) fn times(&self, file: &GgufFile, index: usize, x: &[f32]) -> Result<Vec<f32>, ModelError> {
        let mut row = vec![0.0; self.cols];
        let mut out = Vec::with_capacity(self.rows);
        for r in 0..self.rows {
            self.row(file, index, r, &mut row)?;
            out.push(dot(&row, x));
        }
        Ok(out)
    }

    /// Rows of each matrix.
    pub(super) fn rows(&self) -> usize {
        self.rows
    }
}

/// The dot product of two rows, summed in f64.
pub(super) fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(&x, &y)| f64::from(x) * f64::from(y)).sum::<f64>() as f32
}

/// `x / rms(x) * weight`, `rms(x) = sqrt(mean(x²) + eps)`.
pub(super) fn rms_norm(x: &[f32], weight: &[f32], eps: f32) -> Vec<f32> {
    let mean = x.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>() / x.len() as f64;
    let scale = 1.0 / (mean + f64::from(eps)).sqrt();
    x.iter().zip(weight).map(|(&v, &w)| (f64::from(v) * scale) as f32 * w).collect()
}

/// NeoX RoPE over the first `dims` values of `head` at `position`: pairs
/// `(i, i + dims/2)` rotate by `position · base^(-2i/dims)`.
pub(super) fn rope_neox(head: &mut [f32], dims: usize, base: f32, position: usize) {
    let half = dims / 2;
    for i in 0..half {
        let theta = position as f64 * f64::from(base).powf(-2.0 * i as f64 / dims as f64);
        let (sin, cos) = theta.sin_cos();
        let (x0, x1) = (f64::from(head[i]), f64::from(head[i + half]));
        head[i] = (x0 * cos - x1 * sin) as f32;
        head[i + half] = (x0 * sin + x1 * cos) as f32;
    }
}

/// The logistic function.
pub(super) fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// `silu(gate) · up`, element by element.
pub(super) fn swiglu(gate: &[f32], up: &[f32]) -> Vec<f32> {
    gate.iter().zip(up).map(|(&g, &u)| g * sigmoid(g) * u).collect()
}

/// A norm or vector of the file as f32, checked to hold `len` values.
pub(super) fn vector(file: &GgufFile, name: &str, len: usize) -> Result<Vec<f32>, ModelError> {
    let matrix = Matrix::find(file, name, (len, 1, 1))?;
    let mut out = vec![0.0; len];
    matrix.row(file, 0, 0, &mut out)?;
    Ok(out)
}
