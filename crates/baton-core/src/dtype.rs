//! Element types: plain floats and block-quantized formats.
//!
//! A tensor row of a block-quantized type is a sequence of fixed-size blocks,
//! each encoding `block_elems()` values in `block_bytes()` bytes. Plain types
//! are the special case of one element per block. Every size computation goes
//! through [`DType::row_bytes`], so new formats (K-quants) only add a variant
//! and its two numbers.

use std::fmt;

/// The element type of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// IEEE 754 binary32.
    F32,
    /// IEEE 754 binary16.
    F16,
    /// bfloat16 (the top half of an f32).
    BF16,
    /// Blocks of 32: an f16 scale `d` and 32 signed bytes; `x = d * q`.
    Q8_0,
    /// Blocks of 32: an f16 scale `d` and 32 4-bit values; `x = d * (q - 8)`.
    Q4_0,
    /// Blocks of 32: f16 scale `d`, f16 minimum `m`, 32 4-bit values; `x = d * q + m`.
    Q4_1,
    /// 32-bit signed integers (token ids, positions).
    I32,
}

impl DType {
    /// Every type, in GGML id order.
    pub const ALL: [DType; 7] =
        [DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::I32];

    /// Elements per block (1 for plain types).
    pub const fn block_elems(self) -> usize {
        match self {
            DType::F32 | DType::F16 | DType::BF16 | DType::I32 => 1,
            DType::Q8_0 | DType::Q4_0 | DType::Q4_1 => 32,
        }
    }

    /// Bytes per block.
    pub const fn block_bytes(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::Q8_0 => 34,
            DType::Q4_0 => 18,
            DType::Q4_1 => 20,
        }
    }

    /// Whether the type holds real numbers (everything but `I32`).
    pub const fn is_float(self) -> bool {
        !matches!(self, DType::I32)
    }

    /// Whether the type is block-quantized (rows must be whole blocks).
    pub const fn is_quantized(self) -> bool {
        self.block_elems() > 1
    }

    /// Bytes of a row of `elems` elements, or `None` when `elems` is not a
    /// whole number of blocks or the size overflows.
    pub fn row_bytes(self, elems: usize) -> Option<usize> {
        if !elems.is_multiple_of(self.block_elems()) {
            return None;
        }
        (elems / self.block_elems()).checked_mul(self.block_bytes())
    }

    /// The GGML/GGUF type id of this type.
    pub const fn ggml_id(self) -> u32 {
        match self {
            DType::F32 => 0,
            DType::F16 => 1,
            DType::Q4_0 => 2,
            DType::Q4_1 => 3,
            DType::Q8_0 => 8,
            DType::BF16 => 30,
            DType::I32 => 26,
        }
    }

    /// The type with a GGML/GGUF type id, if Baton supports it.
    pub fn from_ggml_id(id: u32) -> Option<DType> {
        DType::ALL.into_iter().find(|t| t.ggml_id() == id)
    }

    /// Lower-case name as used on the command line and in GGUF tools (`q4_1`).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::Q8_0 => "q8_0",
            DType::Q4_0 => "q4_0",
            DType::Q4_1 => "q4_1",
            DType::I32 => "i32",
        }
    }

    /// Parses a name as printed by [`DType::name`] (case-insensitive).
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|t| t.name().eq_ignore_ascii_case(name))
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ggml_ids_round_trip() {
        for t in DType::ALL {
            assert_eq!(DType::from_ggml_id(t.ggml_id()), Some(t));
            assert_eq!(DType::from_name(t.name()), Some(t));
        }
        assert_eq!(DType::from_ggml_id(12345), None);
    }

    #[test]
    fn row_bytes_requires_whole_blocks() {
        assert_eq!(DType::Q4_1.row_bytes(64), Some(40));
        assert_eq!(DType::Q4_1.row_bytes(33), None);
        assert_eq!(DType::F16.row_bytes(3), Some(6));
        assert_eq!(DType::F32.row_bytes(usize::MAX), None);
    }
}
