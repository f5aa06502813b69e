//! Errors of reading, of looking up metadata, and of writing.

use std::io;
use std::path::PathBuf;

use crate::ggml_type::ShapeError;

/// Why a GGUF file could not be read.
///
/// Every variant found while parsing carries `offset`: the byte offset in the
/// file of the field that was wrong (for a tensor's data extent, the offset of
/// that tensor's `offset` field).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// The file could not be opened, stat'ed, mapped or read.
    #[error("cannot read GGUF file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The file ends inside a field.
    #[error("offset {offset}: file ends inside {what}: needs {needed} bytes, {remaining} left")]
    Truncated {
        /// Where the field starts.
        offset: u64,
        /// The field.
        what: &'static str,
        /// Bytes the field needs.
        needed: u64,
        /// Bytes left in the file.
        remaining: u64,
    },
    /// The first four bytes are not `GGUF`.
    #[error("offset {offset}: bad magic {found:02x?}, expected \"GGUF\" (47 47 55 46)")]
    BadMagic {
        /// Always 0.
        offset: u64,
        /// The bytes found.
        found: [u8; 4],
    },
    /// The version is not 2 or 3.
    #[error("offset {offset}: unsupported GGUF version {found}, expected 2 or 3 (little-endian)")]
    UnsupportedVersion {
        /// Where the version field is.
        offset: u64,
        /// The version found.
        found: u32,
    },
    /// A tensor or metadata count cannot fit in the rest of the file.
    #[error("offset {offset}: {what} is {count}, but the rest of the file holds at most {max}")]
    CountTooLarge {
        /// Where the count is.
        offset: u64,
        /// Which count.
        what: &'static str,
        /// The count found.
        count: u64,
        /// The most that could fit.
        max: u64,
    },
    /// A string or array length cannot fit in the rest of the file.
    #[error("offset {offset}: {what} has length {len}, but only {remaining} bytes are left")]
    LengthTooLarge {
        /// Where the length is.
        offset: u64,
        /// Which string or array.
        what: &'static str,
        /// The length found (bytes for strings, elements for arrays).
        len: u64,
        /// Bytes left in the file after the length field.
        remaining: u64,
    },
    /// A string is not valid UTF-8.
    #[error("offset {offset}: {what} is not valid UTF-8")]
    InvalidUtf8 {
        /// Where the string's bytes start.
        offset: u64,
        /// Which string.
        what: &'static str,
    },
    /// A metadata value type tag is not one of the thirteen.
    #[error("offset {offset}: unknown metadata value type {found}, expected 0 to 12")]
    UnknownValueType {
        /// Where the tag is.
        offset: u64,
        /// The tag found.
        found: u32,
    },
    /// A bool byte is neither 0 nor 1.
    #[error("offset {offset}: bool value is {found}, expected 0 or 1")]
    InvalidBool {
        /// Where the byte is.
        offset: u64,
        /// The byte found.
        found: u8,
    },
    /// Arrays nest deeper than [`crate::MAX_ARRAY_NESTING`].
    #[error("offset {offset}: arrays nest deeper than {max_depth} levels")]
    NestingTooDeep {
        /// Where the too-deep array starts.
        offset: u64,
        /// The limit.
        max_depth: usize,
    },
    /// A metadata key appears twice.
    #[error("offset {offset}: duplicate metadata key {key:?}")]
    DuplicateKey {
        /// Where the second occurrence's key starts.
        offset: u64,
        /// The key.
        key: String,
    },
    /// `general.alignment` is not a non-zero power of two integer.
    #[error("offset {offset}: general.alignment is {found}, expected a power of two u32")]
    BadAlignment {
        /// Where the value is.
        offset: u64,
        /// The value found, described.
        found: String,
    },
    /// A tensor has zero or more than [`crate::MAX_DIMS`] dims.
    #[error("offset {offset}: tensor {tensor:?} has {n_dims} dims, expected 1 to {max}", max = crate::limits::MAX_DIMS)]
    BadDimCount {
        /// Where the dim count is.
        offset: u64,
        /// The tensor.
        tensor: String,
        /// The count found.
        n_dims: u32,
    },
    /// A tensor's element count or byte size overflows.
    #[error("offset {offset}: tensor {tensor:?} dims {dims:?} overflow (more than i64::MAX elements or bytes)")]
    DimsOverflow {
        /// Where the dims start.
        offset: u64,
        /// The tensor.
        tensor: String,
        /// The dims found (ggml order).
        dims: Vec<u64>,
    },
    /// A tensor's ggml type id is not in [`crate::KNOWN_TYPES`].
    #[error("offset {offset}: tensor {tensor:?} has unknown ggml type id {id}")]
    UnknownGgmlType {
        /// Where the type id is.
        offset: u64,
        /// The tensor.
        tensor: String,
        /// The id found.
        id: u32,
    },
    /// A tensor's dim 0 is not a whole number of its type's blocks.
    #[error("offset {offset}: tensor {tensor:?} of type {type_name} has dim 0 = {dim0}, expected a multiple of {block_elems}")]
    NotBlockAligned {
        /// Where the dims start.
        offset: u64,
        /// The tensor.
        tensor: String,
        /// The type.
        type_name: &'static str,
        /// Dim 0 found.
        dim0: u64,
        /// The type's block size in elements.
        block_elems: u64,
    },
    /// Two tensors have the same name.
    #[error("offset {offset}: duplicate tensor name {name:?}")]
    DuplicateTensor {
        /// Where the second occurrence's name starts.
        offset: u64,
        /// The name.
        name: String,
    },
    /// A tensor's data offset is not a multiple of the alignment.
    #[error(
        "offset {offset}: tensor {tensor:?} data offset {data_offset} is not a multiple of the alignment {alignment}"
    )]
    MisalignedTensor {
        /// Where the offset field is.
        offset: u64,
        /// The tensor.
        tensor: String,
        /// The data offset found (relative to the data section).
        data_offset: u64,
        /// The file's alignment.
        alignment: u64,
    },
    /// A tensor's data extends past the end of the file.
    #[error("offset {offset}: tensor {tensor:?} data spans file bytes {start}..{end}, past the end of the file ({file_len} bytes)")]
    TensorOutOfBounds {
        /// Where the offset field is.
        offset: u64,
        /// The tensor.
        tensor: String,
        /// Absolute start of the data (saturating).
        start: u64,
        /// Absolute end of the data (saturating).
        end: u64,
        /// The file's length.
        file_len: u64,
    },
    /// Two tensors' data overlap.
    #[error("offset {offset}: tensor {tensor:?} data overlaps tensor {other:?}")]
    TensorOverlap {
        /// Where the later tensor's offset field is.
        offset: u64,
        /// The tensor whose data starts later.
        tensor: String,
        /// The tensor it overlaps.
        other: String,
    },
}

impl ReadError {
    /// The file offset the problem was found at (`None` for I/O errors).
    pub fn offset(&self) -> Option<u64> {
        match *self {
            Self::Io { .. } => None,
            Self::Truncated { offset, .. }
            | Self::BadMagic { offset, .. }
            | Self::UnsupportedVersion { offset, .. }
            | Self::CountTooLarge { offset, .. }
            | Self::LengthTooLarge { offset, .. }
            | Self::InvalidUtf8 { offset, .. }
            | Self::UnknownValueType { offset, .. }
            | Self::InvalidBool { offset, .. }
            | Self::NestingTooDeep { offset, .. }
            | Self::DuplicateKey { offset, .. }
            | Self::BadAlignment { offset, .. }
            | Self::BadDimCount { offset, .. }
            | Self::DimsOverflow { offset, .. }
            | Self::UnknownGgmlType { offset, .. }
            | Self::NotBlockAligned { offset, .. }
            | Self::DuplicateTensor { offset, .. }
            | Self::MisalignedTensor { offset, .. }
            | Self::TensorOutOfBounds { offset, .. }
            | Self::TensorOverlap { offset, .. } => Some(offset),
        }
    }
}

/// Why a metadata lookup failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetadataError {
    /// The key is absent.
    #[error("metadata key {key:?} is missing")]
    Missing {
        /// The key.
        key: String,
    },
    /// The key holds a value of another type.
    #[error("metadata key {key:?}: expected {expected}, found {found}")]
    WrongType {
        /// The key.
        key: String,
        /// The type asked for.
        expected: &'static str,
        /// The type found (`"array of i32"`).
        found: String,
    },
    /// The key holds an integer that does not fit the type asked for.
    #[error("metadata key {key:?}: value {value} does not fit in {expected}")]
    OutOfRange {
        /// The key.
        key: String,
        /// The type asked for.
        expected: &'static str,
        /// The value found (for arrays, the first element that does not fit).
        value: i128,
    },
}

/// Why a GGUF file could not be built or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// Writing to the output failed.
    #[error("cannot write GGUF output: {0}")]
    Io(#[from] io::Error),
    /// Creating or writing the file failed.
    #[error("cannot write GGUF file {path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A metadata key was added twice.
    #[error("duplicate metadata key {key:?}")]
    DuplicateKey {
        /// The key.
        key: String,
    },
    /// A tensor name was added twice.
    #[error("duplicate tensor name {name:?}")]
    DuplicateTensor {
        /// The name.
        name: String,
    },
    /// `general.alignment` is not a non-zero power of two `u32`.
    #[error("general.alignment must be a power of two u32, got {found}")]
    BadAlignment {
        /// The value given, described.
        found: String,
    },
    /// A metadata value nests arrays deeper than readers accept.
    #[error("metadata key {key:?} nests arrays {depth} deep, at most {max_depth} allowed")]
    NestingTooDeep {
        /// The key.
        key: String,
        /// Its depth.
        depth: usize,
        /// The limit ([`crate::MAX_ARRAY_NESTING`]).
        max_depth: usize,
    },
    /// A tensor name is longer than other readers accept.
    #[error("tensor name {name:?} is longer than {max_bytes} bytes")]
    TensorNameTooLong {
        /// The name.
        name: String,
        /// The limit ([`crate::MAX_TENSOR_NAME_BYTES`]).
        max_bytes: usize,
    },
    /// A tensor's type and dims do not give a valid size.
    #[error("tensor {tensor:?}: {source}")]
    Shape {
        /// The tensor.
        tensor: String,
        /// What is wrong with its type or dims.
        #[source]
        source: ShapeError,
    },
    /// A tensor's data is not the size its type and dims imply.
    #[error("tensor {tensor:?}: data is {found} bytes, but its type and dims need {expected}")]
    TensorSizeMismatch {
        /// The tensor.
        tensor: String,
        /// Bytes implied by type and dims.
        expected: u64,
        /// Bytes given (for a reader source: read before it ended, or
        /// `expected + 1` if it had more).
        found: u64,
    },
}
