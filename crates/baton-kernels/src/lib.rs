//! Fast CPU kernels for Baton: pure functions on slices, no allocation in
//! the hot paths, no global state beyond CPU feature detection.
//!
//! Depends on baton-core alone (for [`DType`] and [`Parallel`]); the CPU
//! backend (baton-cpu) runs its ops with these kernels, and baton-model takes
//! its weight types ([`WEIGHT_TYPES`]) and quantizers from here.
//!
//! # Modules
//! - [`quant`]: GGML block formats (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, MXFP4 and the
//!   K-quants Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K) byte-exact with GGUF, the reference quantizers, and
//!   row encode/decode for every [`DType`].
//! - [`mod@matmul`]: `y = x · Wᵀ` with weights of any type, single-threaded over
//!   a column range or split across a [`Parallel`]'s threads.
//! - [`ops`]: f32 row kernels of a llama decoder (RMS norm, softmax, SiLU,
//!   SwiGLU, add, mul, scale, dot).
//! - [`rope`]: rotary position embedding, normal and NeoX.
//! - [`attention`]: streamed attention over a KV cache of any type (online
//!   softmax over blocks of keys).
//! - [`convert`]: f16/bf16 <-> f32 rows.
//!
//! # Layouts
//! Encoded rows are little-endian bytes at any alignment (as mapped from a
//! GGUF file); a weight matrix is `rows` such rows at a byte stride. f32
//! matrices are row-major with an element stride. Quantized weights multiply
//! against activations quantized once per call into Q8 blocks kept in a
//! caller-owned [`Scratch`]: for the 32-value formats, an f32 scale and the
//! block sum (an internal layout, not a GGUF one); for the K-quants, GGML's
//! Q8_K super-blocks (f32 scale, 256 bytes, sums of 16).
//!
//! # Instruction sets
//! Every kernel has a portable path and, on x86_64, SIMD paths chosen at
//! run time ([`Isa::detected`], cached by the standard library): AVX2+FMA+
//! F16C, AVX-VNNI on top of it, and AVX-512 (F, BW, VL, DQ, VNNI) where the
//! CPU has them. Integer dot products use `maddubs`/`madd` on AVX2, the
//! 256-bit VEX `vpdpbusd`/`vpdpwssd` on AVX-VNNI and the 512-bit ones on
//! AVX-512; f16 weights are widened with F16C and multiplied with FMA.
//! [`with_isa`] limits the calling thread to any lower level the CPU has
//! (tests run every kernel at every level in [`Isa::available`]); the
//! `BATON_ISA` environment variable (`scalar`, `avx2`, `avxvnni`) limits a
//! whole process, to measure a program at a lower level. Under Miri only
//! the portable path runs.
//!
//! # Threading
//! Kernels never spawn threads. [`matmul()`] takes `&dyn Parallel` and gives
//! each thread a disjoint range of output columns (weight rows), so results
//! are bit-identical for any thread count; everything else is
//! single-threaded and meant to be called from the caller's own split (rows,
//! heads).
//!
//! # Errors
//! Shapes that come from model data (row lengths, matrix extents) are
//! checked and reported as [`KernelError`]; mismatched slice lengths in the
//! element-wise kernels are caller bugs and panic.

#![deny(missing_docs)]

#[cfg(target_endian = "big")]
compile_error!("baton-kernels assumes a little-endian host (GGUF data is little-endian)");

pub mod attention;
pub mod convert;
pub mod delta_chunk;
mod error;
mod isa;
pub mod matmul;
pub mod ops;
pub mod packed;
pub mod quant;
pub mod recurrent;
pub mod rope;

mod activation;
mod block_tiles;
mod float_tile;
mod huge_pages;
mod kquant_tile;
mod matrix;
mod quant_tile;
#[cfg(target_arch = "x86_64")]
mod simd;
mod tile;
mod tiling;
mod weight_types;

pub use attention::{
    add_sink, attend, attend_segments, combine, AttentionScratch, KvRows, Partial, Query, QueryRow, SEGMENT,
};
pub use baton_core::{DType, Parallel};
pub use error::KernelError;
pub use isa::{with_isa, Isa};
pub use matmul::{matmul, matmul_columns, MatMut, MatRef, Scratch, WeightMatrix};
pub use packed::{matmul_packed, matmul_packed_columns, matmul_packed_each, matmul_packed_many, PackedWeights};
pub use quant::{dequantize_row, quantize_row};
pub use rope::{rope_in_place, RopeAngles, RopeMode};
pub use weight_types::{is_weight_type, WEIGHT_TYPES};
