//! Tensor descriptions read from a GGUF file, and views of their data.

use crate::ggml_type::GgmlType;

/// A tensor's description, validated against the file it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    pub(crate) name: String,
    pub(crate) dims: Vec<u64>,
    pub(crate) ggml_type: GgmlType,
    pub(crate) data_offset: u64,
    pub(crate) size_bytes: u64,
    pub(crate) file_offset: u64,
}

impl TensorInfo {
    /// The tensor's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The dims in ggml order: dim 0 is the innermost (contiguous) one, the
    /// reverse of the row-major shape numpy would print.
    pub fn dims(&self) -> &[u64] {
        &self.dims
    }

    /// The element type.
    pub fn ggml_type(&self) -> GgmlType {
        self.ggml_type
    }

    /// The data's offset relative to the start of the data section, as stored.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// The data's absolute offset in the file.
    pub fn file_offset(&self) -> u64 {
        self.file_offset
    }

    /// The data's size in bytes, implied by type and dims.
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    /// The number of elements (product of the dims).
    pub fn element_count(&self) -> u64 {
        self.dims.iter().product()
    }
}

/// A tensor of an open file: its description and its bytes, borrowed from
/// the file's memory (zero-copy when the file is memory-mapped).
#[derive(Debug, Clone, Copy)]
pub struct Tensor<'a> {
    pub(crate) info: &'a TensorInfo,
    pub(crate) data: &'a [u8],
}

impl<'a> Tensor<'a> {
    /// The description.
    pub fn info(&self) -> &'a TensorInfo {
        self.info
    }

    /// The name.
    pub fn name(&self) -> &'a str {
        &self.info.name
    }

    /// The dims, ggml order (dim 0 innermost).
    pub fn dims(&self) -> &'a [u64] {
        &self.info.dims
    }

    /// The element type.
    pub fn ggml_type(&self) -> GgmlType {
        self.info.ggml_type
    }

    /// The raw bytes, exactly [`TensorInfo::size_bytes`] long. Their address
    /// is aligned only as far as the file's alignment and the mapping allow.
    pub fn data(&self) -> &'a [u8] {
        self.data
    }
}
