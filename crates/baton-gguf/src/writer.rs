//! Building GGUF v3 files.
//!
//! [`GgufWriter`] collects metadata (kept in insertion order) and tensor
//! descriptions, validating each as it is added, then streams the file to any
//! [`Write`]: header, metadata, tensor infos, padding to the alignment, and
//! each tensor's bytes followed by padding. Tensor bytes are either borrowed
//! slices or [`Read`] sources copied through a small buffer, so tensors need
//! not be in memory all at once.

use std::collections::HashSet;
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::Path;

use crate::alignment::{align_up, ALIGNMENT_KEY, DEFAULT_ALIGNMENT};
use crate::error::WriteError;
use crate::ggml_type::GgmlType;
use crate::limits::MAX_ARRAY_NESTING;
use crate::metadata::Metadata;
use crate::value::{Array, Value};

/// The longest tensor name, in bytes, the writer accepts: ggml's
/// `GGML_MAX_NAME` (64) less the terminating NUL, so llama.cpp can load the
/// file. (The reader accepts longer names.)
pub const MAX_TENSOR_NAME_BYTES: usize = 63;

/// The version [`GgufWriter`] writes.
pub const WRITE_VERSION: u32 = 3;

/// Where a tensor's bytes come from.
enum TensorSource<'a> {
    Slice(&'a [u8]),
    Reader(Box<dyn Read + 'a>),
}

struct PendingTensor<'a> {
    name: String,
    dims: Vec<u64>,
    ggml_type: GgmlType,
    size_bytes: u64,
    source: TensorSource<'a>,
}

/// Builds a GGUF v3 file; see the module docs.
///
/// ```
/// use baton_gguf::{GgmlType, GgufFile, GgufWriter};
/// let weights: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0].iter().flat_map(|x| x.to_le_bytes()).collect();
/// let mut writer = GgufWriter::new();
/// writer.add_metadata("general.architecture", "llama")?;
/// writer.add_tensor("w", &[2, 2], GgmlType::F32, &weights)?;
/// let mut file = Vec::new();
/// writer.write_to(&mut file)?;
/// let read = GgufFile::from_bytes(file)?;
/// assert_eq!(read.metadata().get_str("general.architecture")?, "llama");
/// assert_eq!(read.tensor("w").map(|t| t.data()), Some(&weights[..]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct GgufWriter<'a> {
    metadata: Metadata,
    alignment: u64,
    tensors: Vec<PendingTensor<'a>>,
    names: HashSet<String>,
}

impl Default for GgufWriter<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for GgufWriter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufWriter")
            .field("metadata_len", &self.metadata.len())
            .field("alignment", &self.alignment)
            .field("tensor_count", &self.tensors.len())
            .finish()
    }
}

impl<'a> GgufWriter<'a> {
    /// An empty file with the default alignment (32).
    pub fn new() -> Self {
        Self { metadata: Metadata::new(), alignment: DEFAULT_ALIGNMENT, tensors: Vec::new(), names: HashSet::new() }
    }

    /// The alignment tensor data will be written with.
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// The metadata added so far.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// Sets the alignment by adding `general.alignment` (a `u32`; it must be a
    /// power of two and may be set once).
    pub fn set_alignment(&mut self, alignment: u32) -> Result<&mut Self, WriteError> {
        self.add_metadata(ALIGNMENT_KEY, Value::U32(alignment))
    }

    /// Appends a metadata pair. Keys must be unique; `general.alignment` must
    /// be a power-of-two `u32`; arrays may nest at most
    /// [`MAX_ARRAY_NESTING`] deep.
    pub fn add_metadata(&mut self, key: impl Into<String>, value: impl Into<Value>) -> Result<&mut Self, WriteError> {
        let key = key.into();
        let value = value.into();
        if self.metadata.contains_key(&key) {
            return Err(WriteError::DuplicateKey { key });
        }
        let depth = value.nesting_depth();
        if depth > MAX_ARRAY_NESTING {
            return Err(WriteError::NestingTooDeep { key, depth, max_depth: MAX_ARRAY_NESTING });
        }
        if key == ALIGNMENT_KEY {
            match value {
                Value::U32(a) if a.is_power_of_two() => self.alignment = a.into(),
                other => return Err(WriteError::BadAlignment { found: format!("{other:?}") }),
            }
        }
        self.metadata.insert(key, value).map_err(|(key, _)| WriteError::DuplicateKey { key })?;
        Ok(self)
    }

    fn check_tensor(&self, name: &str, dims: &[u64], ggml_type: GgmlType) -> Result<u64, WriteError> {
        if name.len() > MAX_TENSOR_NAME_BYTES {
            return Err(WriteError::TensorNameTooLong { name: name.to_string(), max_bytes: MAX_TENSOR_NAME_BYTES });
        }
        if self.names.contains(name) {
            return Err(WriteError::DuplicateTensor { name: name.to_string() });
        }
        ggml_type.tensor_bytes(dims).map_err(|source| WriteError::Shape { tensor: name.to_string(), source })
    }

    /// Appends a tensor whose bytes are in memory. `dims` are in ggml order
    /// (dim 0 innermost); `data` must be exactly the size type and dims imply.
    pub fn add_tensor(
        &mut self,
        name: impl Into<String>,
        dims: &[u64],
        ggml_type: GgmlType,
        data: &'a [u8],
    ) -> Result<&mut Self, WriteError> {
        let name = name.into();
        let size_bytes = self.check_tensor(&name, dims, ggml_type)?;
        if data.len() as u64 != size_bytes {
            return Err(WriteError::TensorSizeMismatch {
                tensor: name,
                expected: size_bytes,
                found: data.len() as u64,
            });
        }
        self.push(name, dims, ggml_type, size_bytes, TensorSource::Slice(data));
        Ok(self)
    }

    /// Appends a tensor whose bytes are read from `source` while writing.
    /// The source must yield exactly the size type and dims imply, else
    /// writing fails with [`WriteError::TensorSizeMismatch`].
    pub fn add_tensor_from_reader(
        &mut self,
        name: impl Into<String>,
        dims: &[u64],
        ggml_type: GgmlType,
        source: impl Read + 'a,
    ) -> Result<&mut Self, WriteError> {
        let name = name.into();
        let size_bytes = self.check_tensor(&name, dims, ggml_type)?;
        let source = TensorSource::Reader(Box::new(source));
        self.push(name, dims, ggml_type, size_bytes, source);
        Ok(self)
    }

    fn push(&mut self, name: String, dims: &[u64], ggml_type: GgmlType, size_bytes: u64, source: TensorSource<'a>) {
        self.names.insert(name.clone());
        self.tensors.push(PendingTensor { name, dims: dims.to_vec(), ggml_type, size_bytes, source });
    }

    /// Creates (or truncates) `path` and writes the file to it. On error the
    /// file may be left partly written.
    pub fn write_to_path(self, path: impl AsRef<Path>) -> Result<u64, WriteError> {
        let path = path.as_ref();
        let file_error = |source| WriteError::File { path: path.to_path_buf(), source };
        let file = File::create(path).map_err(file_error)?;
        let mut out = BufWriter::new(file);
        let written = self.write_to(&mut out).map_err(|e| match e {
            WriteError::Io(source) => file_error(source),
            other => other,
        })?;
        out.into_inner().map_err(|e| file_error(e.into_error()))?.sync_all().map_err(file_error)?;
        Ok(written)
    }

    /// Streams the file to `out`; returns the number of bytes written.
    pub fn write_to<W: Write>(self, out: W) -> Result<u64, WriteError> {
        // Metadata is written field by field; buffer those small writes.
        let mut out = CountingWriter { inner: BufWriter::new(out), written: 0 };
        out.write_all(b"GGUF")?;
        out.write_all(&WRITE_VERSION.to_le_bytes())?;
        out.write_all(&(self.tensors.len() as u64).to_le_bytes())?;
        out.write_all(&(self.metadata.len() as u64).to_le_bytes())?;
        for (key, value) in self.metadata.iter() {
            write_str(&mut out, key)?;
            out.write_all(&value.value_type().as_u32().to_le_bytes())?;
            write_value(&mut out, value)?;
        }
        let mut data_offset = 0u64;
        for tensor in &self.tensors {
            write_str(&mut out, &tensor.name)?;
            out.write_all(&(tensor.dims.len() as u32).to_le_bytes())?;
            for dim in &tensor.dims {
                out.write_all(&dim.to_le_bytes())?;
            }
            out.write_all(&tensor.ggml_type.id().to_le_bytes())?;
            out.write_all(&data_offset.to_le_bytes())?;
            data_offset = align_up(data_offset + tensor.size_bytes, self.alignment);
        }
        pad(&mut out, self.alignment)?;
        for tensor in self.tensors {
            match tensor.source {
                TensorSource::Slice(bytes) => out.write_all(bytes)?,
                TensorSource::Reader(reader) => copy_exact(reader, &mut out, &tensor.name, tensor.size_bytes)?,
            }
            pad(&mut out, self.alignment)?;
        }
        out.flush()?;
        Ok(out.written)
    }
}

/// Copies exactly `expected` bytes, failing if the source has fewer or more.
fn copy_exact(reader: Box<dyn Read + '_>, out: &mut impl Write, name: &str, expected: u64) -> Result<(), WriteError> {
    let mismatch = |found| WriteError::TensorSizeMismatch { tensor: name.to_string(), expected, found };
    let mut limited = reader.take(expected);
    let copied = io::copy(&mut limited, out)?;
    if copied != expected {
        return Err(mismatch(copied));
    }
    let mut probe = [0u8; 1];
    let mut reader = limited.into_inner();
    loop {
        match reader.read(&mut probe) {
            Ok(0) => return Ok(()),
            Ok(_) => return Err(mismatch(expected + 1)),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

struct CountingWriter<W> {
    inner: W,
    written: u64,
}

impl<W: Write> Write for CountingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

fn pad<W: Write>(out: &mut CountingWriter<W>, alignment: u64) -> io::Result<()> {
    const ZEROS: [u8; 64] = [0; 64];
    let mut missing = align_up(out.written, alignment) - out.written;
    while missing > 0 {
        let n = missing.min(ZEROS.len() as u64);
        out.write_all(&ZEROS[..n as usize])?;
        missing -= n;
    }
    Ok(())
}

fn write_str(out: &mut impl Write, s: &str) -> io::Result<()> {
    out.write_all(&(s.len() as u64).to_le_bytes())?;
    out.write_all(s.as_bytes())
}

fn write_value(out: &mut impl Write, value: &Value) -> io::Result<()> {
    match value {
        Value::U8(v) => out.write_all(&v.to_le_bytes()),
        Value::I8(v) => out.write_all(&v.to_le_bytes()),
        Value::U16(v) => out.write_all(&v.to_le_bytes()),
        Value::I16(v) => out.write_all(&v.to_le_bytes()),
        Value::U32(v) => out.write_all(&v.to_le_bytes()),
        Value::I32(v) => out.write_all(&v.to_le_bytes()),
        Value::F32(v) => out.write_all(&v.to_le_bytes()),
        Value::Bool(v) => out.write_all(&[u8::from(*v)]),
        Value::String(s) => write_str(out, s),
        Value::Array(a) => write_array(out, a),
        Value::U64(v) => out.write_all(&v.to_le_bytes()),
        Value::I64(v) => out.write_all(&v.to_le_bytes()),
        Value::F64(v) => out.write_all(&v.to_le_bytes()),
    }
}

fn write_array(out: &mut impl Write, array: &Array) -> io::Result<()> {
    out.write_all(&array.element_type().as_u32().to_le_bytes())?;
    out.write_all(&(array.len() as u64).to_le_bytes())?;
    macro_rules! each_le {
        ($v:expr) => {{
            for x in $v {
                out.write_all(&x.to_le_bytes())?;
            }
            Ok(())
        }};
    }
    match array {
        Array::U8(v) => out.write_all(v),
        Array::I8(v) => each_le!(v),
        Array::U16(v) => each_le!(v),
        Array::I16(v) => each_le!(v),
        Array::U32(v) => each_le!(v),
        Array::I32(v) => each_le!(v),
        Array::F32(v) => each_le!(v),
        Array::Bool(v) => each_le!(v.iter().map(|&b| u8::from(b))),
        Array::String(v) => {
            for s in v {
                write_str(out, s)?;
            }
            Ok(())
        }
        Array::Array(v) => {
            for inner in v {
                write_array(out, inner)?;
            }
            Ok(())
        }
        Array::U64(v) => each_le!(v),
        Array::I64(v) => each_le!(v),
        Array::F64(v) => each_le!(v),
    }
}
