//! The ggml tensor element types a GGUF file may name, and their storage sizes.
//!
//! A tensor's type is stored in the file as a raw `u32` id. [`GgmlType`] keeps
//! that raw id (so an id this crate does not know survives a round trip through
//! [`GgmlType::from_id`] / [`GgmlType::id`]) and looks up its block layout in
//! one table, [`KNOWN_TYPES`]. Quantized types store elements in blocks: a block
//! of [`GgmlType::block_elems`] elements takes [`GgmlType::block_bytes`] bytes,
//! and a tensor's innermost dimension (ggml dim 0) must be a whole number of
//! blocks.

use std::fmt;

/// A ggml element type, as the raw id stored in a GGUF tensor info.
///
/// Any `u32` is representable; [`GgmlType::is_known`] says whether this crate
/// knows its size. The associated constants name the known ids.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GgmlType(u32);

/// One row of the type table: id, name, elements per block, bytes per block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TypeLayout {
    /// The raw id stored in GGUF files.
    pub id: u32,
    /// The name ggml and llama.cpp use (`"Q4_1"`, `"F32"`, ...).
    pub name: &'static str,
    /// Elements per block (1 for plain types).
    pub block_elems: u64,
    /// Bytes per block.
    pub block_bytes: u64,
}

const fn layout(id: u32, name: &'static str, block_elems: u64, block_bytes: u64) -> TypeLayout {
    TypeLayout { id, name, block_elems, block_bytes }
}

/// Every ggml type this crate knows the size of; the single source of truth.
pub const KNOWN_TYPES: &[TypeLayout] = &[
    layout(0, "F32", 1, 4),
    layout(1, "F16", 1, 2),
    layout(2, "Q4_0", 32, 18),
    layout(3, "Q4_1", 32, 20),
    layout(6, "Q5_0", 32, 22),
    layout(7, "Q5_1", 32, 24),
    layout(8, "Q8_0", 32, 34),
    layout(9, "Q8_1", 32, 36),
    layout(10, "Q2_K", 256, 84),
    layout(11, "Q3_K", 256, 110),
    layout(12, "Q4_K", 256, 144),
    layout(13, "Q5_K", 256, 176),
    layout(14, "Q6_K", 256, 210),
    layout(15, "Q8_K", 256, 292),
    layout(24, "I8", 1, 1),
    layout(25, "I16", 1, 2),
    layout(26, "I32", 1, 4),
    layout(27, "I64", 1, 8),
    layout(28, "F64", 1, 8),
    layout(30, "BF16", 1, 2),
    layout(39, "MXFP4", 32, 17),
];

/// Why a tensor's byte size cannot be computed from its type and dims.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    /// The type id is not in [`KNOWN_TYPES`].
    #[error("unknown ggml type id {0}")]
    UnknownType(u32),
    /// The number of dims is not between 1 and [`crate::MAX_DIMS`].
    #[error("{0} dims, expected 1 to {max}", max = crate::limits::MAX_DIMS)]
    BadDimCount(usize),
    /// Dim 0 is not a whole number of blocks.
    #[error("dim 0 is {dim0}, not a multiple of the {type_name} block size {block_elems}")]
    NotBlockAligned {
        /// The type's name.
        type_name: &'static str,
        /// The innermost dimension.
        dim0: u64,
        /// Elements per block of the type.
        block_elems: u64,
    },
    /// The element count or byte size does not fit in 63 bits.
    #[error("dims {dims:?} overflow: element count or byte size exceeds i64::MAX")]
    Overflow {
        /// The offending dims (ggml order).
        dims: Vec<u64>,
    },
}

macro_rules! known_type_consts {
    ($($name:ident = $id:expr),* $(,)?) => {
        $(
            #[doc = concat!("ggml type `", stringify!($name), "` (id ", stringify!($id), ").")]
            pub const $name: GgmlType = GgmlType($id);
        )*
    };
}

impl GgmlType {
    known_type_consts! {
        F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
        Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
        I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, BF16 = 30, MXFP4 = 39,
    }

    /// The type with this raw id (known or not).
    pub const fn from_id(id: u32) -> Self {
        Self(id)
    }

    /// The raw id stored in GGUF files.
    pub const fn id(self) -> u32 {
        self.0
    }

    /// The table row of this type, if known.
    pub fn layout(self) -> Option<&'static TypeLayout> {
        KNOWN_TYPES.iter().find(|row| row.id == self.0)
    }

    /// Whether this crate knows the type's size.
    pub fn is_known(self) -> bool {
        self.layout().is_some()
    }

    /// The type's name, if known.
    pub fn name(self) -> Option<&'static str> {
        self.layout().map(|row| row.name)
    }

    /// Elements per block, if known.
    pub fn block_elems(self) -> Option<u64> {
        self.layout().map(|row| row.block_elems)
    }

    /// Bytes per block, if known.
    pub fn block_bytes(self) -> Option<u64> {
        self.layout().map(|row| row.block_bytes)
    }

    /// The number of elements of a tensor with these dims (ggml order),
    /// failing if the product exceeds `i64::MAX` (ggml counts in `int64_t`).
    pub fn element_count(dims: &[u64]) -> Result<u64, ShapeError> {
        let overflow = || ShapeError::Overflow { dims: dims.to_vec() };
        let mut count: u64 = 1;
        for &dim in dims {
            count = count.checked_mul(dim).ok_or_else(overflow)?;
        }
        if count > i64::MAX as u64 || dims.iter().any(|&d| d > i64::MAX as u64) {
            return Err(overflow());
        }
        Ok(count)
    }

    /// The exact byte size of a tensor of this type with these dims (ggml
    /// order, dim 0 innermost): checks the dim count, that the type is known,
    /// that dim 0 is a whole number of blocks, and that nothing overflows.
    pub fn tensor_bytes(self, dims: &[u64]) -> Result<u64, ShapeError> {
        if dims.is_empty() || dims.len() > crate::limits::MAX_DIMS {
            return Err(ShapeError::BadDimCount(dims.len()));
        }
        let row = self.layout().ok_or(ShapeError::UnknownType(self.0))?;
        let count = Self::element_count(dims)?;
        if !dims[0].is_multiple_of(row.block_elems) {
            return Err(ShapeError::NotBlockAligned {
                type_name: row.name,
                dim0: dims[0],
                block_elems: row.block_elems,
            });
        }
        (count / row.block_elems)
            .checked_mul(row.block_bytes)
            .filter(|&bytes| bytes <= i64::MAX as u64)
            .ok_or_else(|| ShapeError::Overflow { dims: dims.to_vec() })
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "unknown({})", self.0),
        }
    }
}

impl fmt::Debug for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GgmlType({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_ids_are_unique_and_blocks_nonzero() {
        for (i, a) in KNOWN_TYPES.iter().enumerate() {
            assert!(a.block_elems > 0 && a.block_bytes > 0, "{a:?}");
            for b in &KNOWN_TYPES[i + 1..] {
                assert_ne!(a.id, b.id, "duplicate id in table");
                assert_ne!(a.name, b.name, "duplicate name in table");
            }
        }
    }

    #[test]
    fn tensor_bytes_follows_block_layout() {
        assert_eq!(GgmlType::F32.tensor_bytes(&[3, 5]), Ok(60));
        assert_eq!(GgmlType::Q4_1.tensor_bytes(&[64, 2]), Ok(4 * 20));
        assert_eq!(GgmlType::Q6_K.tensor_bytes(&[256]), Ok(210));
        assert_eq!(GgmlType::Q4_K.tensor_bytes(&[512, 3]), Ok(6 * 144));
        assert_eq!(GgmlType::Q5_K.tensor_bytes(&[256, 2]), Ok(2 * 176));
        assert_eq!(GgmlType::Q8_K.tensor_bytes(&[256]), Ok(292));
        // gpt-oss-20b's experts: rows of 2880 = 90 blocks of 17 bytes.
        assert_eq!(GgmlType::MXFP4.tensor_bytes(&[2880, 2880, 32]), Ok(90 * 17 * 2880 * 32));
        assert!(matches!(
            GgmlType::Q4_K.tensor_bytes(&[288, 1]),
            Err(ShapeError::NotBlockAligned { dim0: 288, block_elems: 256, .. })
        ));
        assert_eq!(GgmlType::F16.tensor_bytes(&[0, 7]), Ok(0));
    }

    #[test]
    fn tensor_bytes_rejects_bad_shapes() {
        assert_eq!(GgmlType::from_id(4).tensor_bytes(&[32]), Err(ShapeError::UnknownType(4)));
        assert_eq!(GgmlType::F32.tensor_bytes(&[]), Err(ShapeError::BadDimCount(0)));
        assert_eq!(GgmlType::F32.tensor_bytes(&[1, 1, 1, 1, 1]), Err(ShapeError::BadDimCount(5)));
        assert!(matches!(
            GgmlType::Q8_0.tensor_bytes(&[33]),
            Err(ShapeError::NotBlockAligned { dim0: 33, block_elems: 32, .. })
        ));
        assert!(matches!(GgmlType::F32.tensor_bytes(&[1 << 32, 1 << 32]), Err(ShapeError::Overflow { .. })));
        assert!(matches!(GgmlType::F64.tensor_bytes(&[1 << 61]), Err(ShapeError::Overflow { .. })));
    }

    #[test]
    fn display_names_known_and_unknown_ids() {
        assert_eq!(GgmlType::BF16.to_string(), "BF16");
        assert_eq!(GgmlType::from_id(99).to_string(), "unknown(99)");
        assert_eq!(GgmlType::from_id(99).id(), 99);
    }
}
