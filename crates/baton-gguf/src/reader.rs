//! An open GGUF file: its bytes (memory-mapped or owned) and parsed layout.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;

use memmap2::Mmap;

use crate::error::ReadError;
use crate::metadata::Metadata;
use crate::parse::{parse, Layout};
use crate::tensor::{Tensor, TensorInfo};

/// Where the file's bytes live.
enum Storage {
    Mapped(Mmap),
    Owned(Vec<u8>),
}

impl Storage {
    fn bytes(&self) -> &[u8] {
        match self {
            Self::Mapped(map) => map,
            Self::Owned(bytes) => bytes,
        }
    }
}

/// A parsed, validated GGUF file (version 2 or 3).
///
/// Construction checks the whole layout (see the crate docs), so every
/// accessor afterwards is infallible and every tensor's bytes lie inside the
/// file without overlapping another's.
pub struct GgufFile {
    storage: Storage,
    layout: Layout,
    by_name: HashMap<String, usize>,
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("version", &self.layout.version)
            .field("len_bytes", &self.storage.bytes().len())
            .field("metadata_len", &self.layout.metadata.len())
            .field("tensor_count", &self.layout.tensors.len())
            .field("alignment", &self.layout.alignment)
            .finish()
    }
}

impl GgufFile {
    /// Opens a file and memory-maps it; tensor data is then zero-copy.
    ///
    /// Caveat: the mapping reflects the file's current contents. The file
    /// must not be modified or truncated while this value lives: a change
    /// would alter bytes that were already validated (and truncation can make
    /// later accesses fault with SIGBUS). Use [`GgufFile::open_in_memory`]
    /// when that cannot be guaranteed.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, ReadError> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|source| ReadError::Io { path: path.to_path_buf(), source })?;
        Self::map(&file, path)
    }

    /// Memory-maps an open file (`path` names it in errors) and parses it,
    /// as [`open`](Self::open) does: a caller that maps parts of the file
    /// again (a device's weights) then maps the same file, even if the path
    /// is replaced meanwhile. The caveat of `open` holds.
    pub fn map(file: &File, path: &Path) -> Result<Self, ReadError> {
        let io = |source| ReadError::Io { path: path.to_path_buf(), source };
        // SAFETY: `Mmap::map` is unsafe because the mapped memory changes if
        // another process writes or truncates the file. We rely on the
        // documented caveat above: the caller keeps the file unchanged while
        // this `GgufFile` (which owns the map) lives. The map is only read,
        // and all reads are bounds-checked against its length.
        let map = unsafe { Mmap::map(file) }.map_err(io)?;
        Self::from_storage(Storage::Mapped(map))
    }

    /// Reads a whole file into memory and parses it (no mapping, so no
    /// caveat about concurrent modification).
    pub fn open_in_memory(path: impl AsRef<Path>) -> Result<Self, ReadError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| ReadError::Io { path: path.to_path_buf(), source })?;
        Self::from_bytes(bytes)
    }

    /// Parses a file held in memory, taking ownership of its bytes.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self, ReadError> {
        Self::from_storage(Storage::Owned(bytes))
    }

    /// Parses a file held in memory, copying the bytes (use
    /// [`GgufFile::from_bytes`] to avoid the copy). The copy happens only
    /// after the layout has been validated.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, ReadError> {
        let layout = parse(bytes)?;
        Ok(Self::assemble(Storage::Owned(bytes.to_vec()), layout))
    }

    fn from_storage(storage: Storage) -> Result<Self, ReadError> {
        let layout = parse(storage.bytes())?;
        Ok(Self::assemble(storage, layout))
    }

    fn assemble(storage: Storage, layout: Layout) -> Self {
        let by_name = layout.tensors.iter().enumerate().map(|(i, t)| (t.name.clone(), i)).collect();
        Self { storage, layout, by_name }
    }

    /// The format version (2 or 3).
    pub fn version(&self) -> u32 {
        self.layout.version
    }

    /// The alignment of tensor data (`general.alignment`, default 32).
    pub fn alignment(&self) -> u64 {
        self.layout.alignment
    }

    /// The absolute file offset where the data section starts.
    pub fn data_offset(&self) -> u64 {
        self.layout.data_offset
    }

    /// The whole file's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        self.storage.bytes()
    }

    /// Whether tensor data is served from a memory map.
    pub fn is_memory_mapped(&self) -> bool {
        matches!(self.storage, Storage::Mapped(_))
    }

    /// The metadata, in file order.
    pub fn metadata(&self) -> &Metadata {
        &self.layout.metadata
    }

    /// The tensor descriptions, in file order.
    pub fn tensor_infos(&self) -> &[TensorInfo] {
        &self.layout.tensors
    }

    /// The number of tensors.
    pub fn tensor_count(&self) -> usize {
        self.layout.tensors.len()
    }

    /// All tensors with their bytes, in file order.
    pub fn tensors(&self) -> impl ExactSizeIterator<Item = Tensor<'_>> {
        self.layout.tensors.iter().map(|info| self.view(info))
    }

    /// The tensor with this name, if any.
    pub fn tensor(&self, name: &str) -> Option<Tensor<'_>> {
        self.by_name.get(name).map(|&i| self.view(&self.layout.tensors[i]))
    }

    fn view<'a>(&'a self, info: &'a TensorInfo) -> Tensor<'a> {
        // Extents were checked against this storage's length by `parse`, and
        // storage never changes after that; `get` keeps this free of panics
        // regardless, yielding an empty slice if the invariant were broken.
        let start = info.file_offset as usize;
        let end = start + info.size_bytes as usize;
        let data = self.storage.bytes().get(start..end).unwrap_or_default();
        Tensor { info, data }
    }
}
