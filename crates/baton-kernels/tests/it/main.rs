//! The kernels' tests, one test binary (`--test it`): quantization, K-quants,
//! matmul and row ops, each on every instruction set against f64 references.

mod common;
mod kquant;
mod levels;
mod matmul;
mod ops;
mod packed;
mod packed_kquant;
mod quant;
mod row_invariance;
