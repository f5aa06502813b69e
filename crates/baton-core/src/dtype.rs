//! Element types: plain floats and block-quantized formats.
//!
//! A tensor row of a block-quantized type is a sequence of fixed-size blocks,
//! each encoding `block_elems()` values in `block_bytes()` bytes. Plain types
//! are the special case of one element per block. Every size computation goes
//! through [`DType::row_bytes`], so a new format only adds a variant and its
//! two numbers. The K-quants (`Q2_K` .. `Q6_K`, `Q8_K`) use super-blocks
//! of 256 values, so their rows must be multiples of 256.

use std::fmt;

/// The element type of a tensor.
// GGML's names (`Q4_K`), kept so the variants read as in every GGUF tool.
#[allow(non_camel_case_types)]
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
    /// Blocks of 32: f16 scale `d`, 4 bytes of fifth (high) bits, then the
    /// low 4 bits as [`DType::Q4_0`]; `x = d * (q - 16)`.
    Q5_0,
    /// Blocks of 32: f16 scale `d`, f16 minimum `m`, 4 bytes of fifth (high)
    /// bits, then the low 4 bits as [`DType::Q4_1`]; `x = d * q + m`.
    Q5_1,
    /// Blocks of 32 (OCP microscaling FP4): an E8M0 scale byte `e`, then 16
    /// bytes of 4-bit E2M1 codes (element `j < 16` in the low nibble of byte
    /// `j`, `j >= 16` in the high nibble of byte `j - 16`); `x = kv[q] *
    /// 2^(e - 128)` with `kv` the doubled E2M1 values `0, 1, 2, 3, 4, 6, 8,
    /// 12` and their negatives. gpt-oss keeps its experts in it.
    MXFP4,
    /// Super-blocks of 256: 16 bytes of 4-bit scales (low nibble) and mins
    /// (high nibble) for 16 sub-blocks of 16, 64 bytes of 2-bit values, f16
    /// `d` and `dmin`; `x = d * sc * q - dmin * m`.
    Q2_K,
    /// Super-blocks of 256: 32 bytes holding a third (high) bit per value,
    /// 64 bytes of low 2 bits, 12 bytes of 6-bit scales for 16 sub-blocks of
    /// 16 (stored plus 32), f16 `d`; `x = d * (sc - 32) * (q - 4)`.
    Q3_K,
    /// Super-blocks of 256: f16 `d` and `dmin`, 12 bytes of 6-bit scales and
    /// mins for 8 sub-blocks of 32, 128 bytes of 4-bit values;
    /// `x = d * sc * q - dmin * m`.
    Q4_K,
    /// As [`DType::Q4_K`] plus 32 bytes holding a fifth (high) bit per value.
    Q5_K,
    /// Super-blocks of 256: 128 bytes of low 4 bits, 64 bytes of high 2 bits,
    /// 16 signed 8-bit scales (sub-blocks of 16), f16 `d`;
    /// `x = d * sc * (q - 32)`.
    Q6_K,
    /// Super-blocks of 256: f32 `d`, 256 signed bytes, 16 i16 sums of 16
    /// values each; `x = d * q`. GGML's activation format for K-quant dot
    /// products.
    Q8_K,
    /// 32-bit signed integers (token ids, positions).
    I32,
}

impl DType {
    /// Every type, in GGML id order.
    pub const ALL: [DType; 16] = [
        DType::F32,
        DType::F16,
        DType::Q4_0,
        DType::Q4_1,
        DType::Q5_0,
        DType::Q5_1,
        DType::Q8_0,
        DType::Q2_K,
        DType::Q3_K,
        DType::Q4_K,
        DType::Q5_K,
        DType::Q6_K,
        DType::Q8_K,
        DType::I32,
        DType::BF16,
        DType::MXFP4,
    ];

    /// Elements per block (1 for plain types).
    pub const fn block_elems(self) -> usize {
        match self {
            DType::F32 | DType::F16 | DType::BF16 | DType::I32 => 1,
            DType::Q8_0 | DType::Q4_0 | DType::Q4_1 | DType::Q5_0 | DType::Q5_1 | DType::MXFP4 => 32,
            DType::Q2_K | DType::Q3_K | DType::Q4_K | DType::Q5_K | DType::Q6_K | DType::Q8_K => 256,
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
            DType::Q5_0 => 22,
            DType::Q5_1 => 24,
            DType::MXFP4 => 17,
            DType::Q2_K => 84,
            DType::Q3_K => 110,
            DType::Q4_K => 144,
            DType::Q5_K => 176,
            DType::Q6_K => 210,
            DType::Q8_K => 292,
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

    /// Whether the type is a K-quant (super-blocks of 256 values with
    /// per-sub-block scales).
    pub const fn is_k_quant(self) -> bool {
        self.block_elems() == 256
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
            DType::Q5_0 => 6,
            DType::Q5_1 => 7,
            DType::Q8_0 => 8,
            DType::Q2_K => 10,
            DType::Q3_K => 11,
            DType::Q4_K => 12,
            DType::Q5_K => 13,
            DType::Q6_K => 14,
            DType::Q8_K => 15,
            DType::BF16 => 30,
            DType::I32 => 26,
            DType::MXFP4 => 39,
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
            DType::Q5_0 => "q5_0",
            DType::Q5_1 => "q5_1",
            DType::MXFP4 => "mxfp4",
            DType::Q2_K => "q2_k",
            DType::Q3_K => "q3_k",
            DType::Q4_K => "q4_k",
            DType::Q5_K => "q5_k",
            DType::Q6_K => "q6_k",
            DType::Q8_K => "q8_k",
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
        assert_eq!(DType::Q4_K.row_bytes(512), Some(288));
        assert_eq!(DType::Q6_K.row_bytes(288), None);
    }

    #[test]
    fn block_sizes_of_32_match_ggml() {
        // (id, bytes per 32 values) as in ggml's block structs.
        let expected = [
            (DType::Q4_0, 2, 18),
            (DType::Q4_1, 3, 20),
            (DType::Q5_0, 6, 22),
            (DType::Q5_1, 7, 24),
            (DType::Q8_0, 8, 34),
            (DType::MXFP4, 39, 17),
        ];
        for (t, id, bytes) in expected {
            assert_eq!((t.ggml_id(), t.block_elems(), t.block_bytes()), (id, 32, bytes), "{t}");
            assert!(t.is_quantized() && !t.is_k_quant());
        }
        assert_eq!(DType::from_name("Q5_1"), Some(DType::Q5_1));
        assert_eq!(DType::from_name("MXFP4"), Some(DType::MXFP4));
    }

    #[test]
    fn k_quant_sizes_match_ggml() {
        // (id, bytes per 256 values) as in ggml's block structs.
        let expected = [
            (DType::Q2_K, 10, 84),
            (DType::Q3_K, 11, 110),
            (DType::Q4_K, 12, 144),
            (DType::Q5_K, 13, 176),
            (DType::Q6_K, 14, 210),
            (DType::Q8_K, 15, 292),
        ];
        for (t, id, bytes) in expected {
            assert_eq!((t.ggml_id(), t.block_elems(), t.block_bytes()), (id, 256, bytes), "{t}");
            assert!(t.is_k_quant() && t.is_quantized());
        }
        assert_eq!(DType::from_name("Q4_K"), Some(DType::Q4_K));
    }
}
