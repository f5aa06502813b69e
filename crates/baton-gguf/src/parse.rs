//! Parsing and validating the GGUF layout from a byte slice.
//!
//! Every read goes through [`Cursor`], which checks the bytes left before
//! touching them, so no read is out of bounds. Every allocation whose size
//! comes from the file (strings, arrays, the metadata and tensor tables) is
//! first checked against the bytes left: a count `n` of items that each take
//! at least `k` bytes in the file is rejected unless `n * k` fits in the rest
//! of the file, so memory use is a small multiple of the file size.

use std::collections::HashSet;

use crate::alignment::{align_up, ALIGNMENT_KEY, DEFAULT_ALIGNMENT};
use crate::error::ReadError;
use crate::ggml_type::{GgmlType, ShapeError};
use crate::limits::{MAX_ARRAY_NESTING, MAX_DIMS};
use crate::metadata::Metadata;
use crate::tensor::TensorInfo;
use crate::value::{Array, Value, ValueType};

/// Fewest bytes one metadata pair takes: key length, empty key, type, `u8`.
const MIN_KV_BYTES: u64 = 8 + 4 + 1;
/// Fewest bytes one tensor info takes: name length, empty name, dim count, one
/// dim, type, offset.
const MIN_TENSOR_INFO_BYTES: u64 = 8 + 4 + 8 + 4 + 8;

/// Everything a GGUF file says, except the tensor bytes themselves.
#[derive(Debug)]
pub(crate) struct Layout {
    pub version: u32,
    pub metadata: Metadata,
    pub tensors: Vec<TensorInfo>,
    pub alignment: u64,
    pub data_offset: u64,
}

/// A bounds-checked little-endian reader over the file's bytes.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn offset(&self) -> u64 {
        self.pos as u64
    }

    fn remaining(&self) -> u64 {
        (self.bytes.len() - self.pos) as u64
    }

    fn take(&mut self, n: u64, what: &'static str) -> Result<&'a [u8], ReadError> {
        let truncated = || ReadError::Truncated { offset: self.offset(), what, needed: n, remaining: self.remaining() };
        let n_usize = usize::try_from(n).map_err(|_| truncated())?;
        let end = self.pos.checked_add(n_usize).ok_or_else(truncated)?;
        let slice = self.bytes.get(self.pos..end).ok_or_else(truncated)?;
        self.pos = end;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], ReadError> {
        let slice = self.take(N as u64, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(slice);
        Ok(out)
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, ReadError> {
        self.array(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &'static str) -> Result<u64, ReadError> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// Reads a count of items that each take at least `min_item_bytes`,
    /// rejecting counts the rest of the file cannot hold.
    fn count(&mut self, min_item_bytes: u64, what: &'static str) -> Result<usize, ReadError> {
        let offset = self.offset();
        let count = self.u64(what)?;
        let max = self.remaining() / min_item_bytes;
        if count > max {
            return Err(ReadError::CountTooLarge { offset, what, count, max });
        }
        // count <= remaining <= usize::MAX, so this cannot fail.
        usize::try_from(count).map_err(|_| ReadError::CountTooLarge { offset, what, count, max })
    }

    fn string(&mut self, what: &'static str) -> Result<String, ReadError> {
        let offset = self.offset();
        let len = self.u64(what)?;
        if len > self.remaining() {
            return Err(ReadError::LengthTooLarge { offset, what, len, remaining: self.remaining() });
        }
        let start = self.offset();
        let bytes = self.take(len, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| ReadError::InvalidUtf8 { offset: start, what })
    }

    fn value_type(&mut self) -> Result<ValueType, ReadError> {
        let offset = self.offset();
        let tag = self.u32("metadata value type")?;
        ValueType::from_u32(tag).ok_or(ReadError::UnknownValueType { offset, found: tag })
    }

    fn bool(&mut self) -> Result<bool, ReadError> {
        let offset = self.offset();
        match self.array::<1>("bool value")?[0] {
            0 => Ok(false),
            1 => Ok(true),
            found => Err(ReadError::InvalidBool { offset, found }),
        }
    }

    fn value(&mut self, ty: ValueType, depth: usize) -> Result<Value, ReadError> {
        Ok(match ty {
            ValueType::U8 => Value::U8(u8::from_le_bytes(self.array("u8 value")?)),
            ValueType::I8 => Value::I8(i8::from_le_bytes(self.array("i8 value")?)),
            ValueType::U16 => Value::U16(u16::from_le_bytes(self.array("u16 value")?)),
            ValueType::I16 => Value::I16(i16::from_le_bytes(self.array("i16 value")?)),
            ValueType::U32 => Value::U32(u32::from_le_bytes(self.array("u32 value")?)),
            ValueType::I32 => Value::I32(i32::from_le_bytes(self.array("i32 value")?)),
            ValueType::F32 => Value::F32(f32::from_le_bytes(self.array("f32 value")?)),
            ValueType::Bool => Value::Bool(self.bool()?),
            ValueType::String => Value::String(self.string("string value")?),
            ValueType::Array => Value::Array(self.array_value(depth + 1)?),
            ValueType::U64 => Value::U64(u64::from_le_bytes(self.array("u64 value")?)),
            ValueType::I64 => Value::I64(i64::from_le_bytes(self.array("i64 value")?)),
            ValueType::F64 => Value::F64(f64::from_le_bytes(self.array("f64 value")?)),
        })
    }

    /// Reads `len` fixed-size elements with `decode`.
    fn elements<T, const N: usize>(
        &mut self,
        len: usize,
        what: &'static str,
        decode: fn([u8; N]) -> T,
    ) -> Result<Vec<T>, ReadError> {
        let bytes = self.take((len as u64).saturating_mul(N as u64), what)?;
        Ok(bytes
            .chunks_exact(N)
            .map(|chunk| {
                let mut raw = [0u8; N];
                raw.copy_from_slice(chunk);
                decode(raw)
            })
            .collect())
    }

    fn array_value(&mut self, depth: usize) -> Result<Array, ReadError> {
        let offset = self.offset();
        if depth > MAX_ARRAY_NESTING {
            return Err(ReadError::NestingTooDeep { offset, max_depth: MAX_ARRAY_NESTING });
        }
        let elem = self.value_type()?;
        let len_offset = self.offset();
        let len = self.u64("array length")?;
        let remaining = self.remaining();
        if len.saturating_mul(elem.min_encoded_bytes()) > remaining {
            return Err(ReadError::LengthTooLarge { offset: len_offset, what: "array", len, remaining });
        }
        // len * min bytes <= remaining, so len fits in usize.
        let n = len as usize;
        Ok(match elem {
            ValueType::U8 => Array::U8(self.elements(n, "u8 array", u8::from_le_bytes)?),
            ValueType::I8 => Array::I8(self.elements(n, "i8 array", i8::from_le_bytes)?),
            ValueType::U16 => Array::U16(self.elements(n, "u16 array", u16::from_le_bytes)?),
            ValueType::I16 => Array::I16(self.elements(n, "i16 array", i16::from_le_bytes)?),
            ValueType::U32 => Array::U32(self.elements(n, "u32 array", u32::from_le_bytes)?),
            ValueType::I32 => Array::I32(self.elements(n, "i32 array", i32::from_le_bytes)?),
            ValueType::F32 => Array::F32(self.elements(n, "f32 array", f32::from_le_bytes)?),
            ValueType::U64 => Array::U64(self.elements(n, "u64 array", u64::from_le_bytes)?),
            ValueType::I64 => Array::I64(self.elements(n, "i64 array", i64::from_le_bytes)?),
            ValueType::F64 => Array::F64(self.elements(n, "f64 array", f64::from_le_bytes)?),
            ValueType::Bool => Array::Bool((0..n).map(|_| self.bool()).collect::<Result<_, _>>()?),
            ValueType::String => {
                Array::String((0..n).map(|_| self.string("string array element")).collect::<Result<_, _>>()?)
            }
            ValueType::Array => Array::Array((0..n).map(|_| self.array_value(depth + 1)).collect::<Result<_, _>>()?),
        })
    }
}

/// Parses and validates everything but the tensor bytes.
pub(crate) fn parse(bytes: &[u8]) -> Result<Layout, ReadError> {
    let mut cur = Cursor { bytes, pos: 0 };

    let magic = cur.array::<4>("magic")?;
    if &magic != b"GGUF" {
        return Err(ReadError::BadMagic { offset: 0, found: magic });
    }
    let version_offset = cur.offset();
    let version = cur.u32("version")?;
    if version != 2 && version != 3 {
        return Err(ReadError::UnsupportedVersion { offset: version_offset, found: version });
    }
    // Tensor infos follow the metadata, so the tensor count is only bounded
    // loosely here and checked again once the metadata has been read.
    let tensor_count_offset = cur.offset();
    let tensor_count = cur.count(MIN_TENSOR_INFO_BYTES, "tensor count")?;
    let kv_count = cur.count(MIN_KV_BYTES, "metadata count")?;

    let (metadata, alignment) = parse_metadata(&mut cur, kv_count)?;

    let max_tensors = cur.remaining() / MIN_TENSOR_INFO_BYTES;
    if tensor_count as u64 > max_tensors {
        return Err(ReadError::CountTooLarge {
            offset: tensor_count_offset,
            what: "tensor count",
            count: tensor_count as u64,
            max: max_tensors,
        });
    }
    let mut tensors = Vec::with_capacity(tensor_count);
    let mut offset_fields = Vec::with_capacity(tensor_count);
    let mut names: HashSet<String> = HashSet::with_capacity(tensor_count);
    for _ in 0..tensor_count {
        let (info, offset_field) = parse_tensor_info(&mut cur, alignment)?;
        if !names.insert(info.name.clone()) {
            return Err(ReadError::DuplicateTensor { offset: info.file_offset, name: info.name });
        }
        tensors.push(info);
        offset_fields.push(offset_field);
    }

    let data_offset = align_up(cur.offset(), alignment);
    check_extents(&mut tensors, &offset_fields, data_offset, bytes.len() as u64)?;
    Ok(Layout { version, metadata, tensors, alignment, data_offset })
}

fn parse_metadata(cur: &mut Cursor<'_>, kv_count: usize) -> Result<(Metadata, u64), ReadError> {
    let mut metadata = Metadata::new();
    let mut alignment = DEFAULT_ALIGNMENT;
    for _ in 0..kv_count {
        let key_offset = cur.offset();
        let key = cur.string("metadata key")?;
        let ty = cur.value_type()?;
        let value_offset = cur.offset();
        let value = cur.value(ty, 0)?;
        if key == ALIGNMENT_KEY {
            alignment = value
                .as_integer()
                .and_then(|v| u32::try_from(v).ok())
                .filter(|v| v.is_power_of_two())
                .ok_or_else(|| ReadError::BadAlignment { offset: value_offset, found: format!("{value:?}") })?
                .into();
        }
        metadata.insert(key, value).map_err(|(key, _)| ReadError::DuplicateKey { offset: key_offset, key })?;
    }
    Ok((metadata, alignment))
}

/// Reads one tensor info; returns it (with `file_offset` holding the offset of
/// its name until extents are checked) and the offset of its offset field.
fn parse_tensor_info(cur: &mut Cursor<'_>, alignment: u64) -> Result<(TensorInfo, u64), ReadError> {
    let name_offset = cur.offset();
    let name = cur.string("tensor name")?;
    let n_dims_offset = cur.offset();
    let n_dims = cur.u32("tensor dim count")?;
    if n_dims == 0 || n_dims as usize > MAX_DIMS {
        return Err(ReadError::BadDimCount { offset: n_dims_offset, tensor: name, n_dims });
    }
    let dims_offset = cur.offset();
    let dims = (0..n_dims).map(|_| cur.u64("tensor dim")).collect::<Result<Vec<u64>, _>>()?;
    let type_offset = cur.offset();
    let ggml_type = GgmlType::from_id(cur.u32("tensor type")?);
    let offset_field = cur.offset();
    let data_offset = cur.u64("tensor data offset")?;

    let size_bytes = ggml_type.tensor_bytes(&dims).map_err(|e| match e {
        ShapeError::UnknownType(id) => ReadError::UnknownGgmlType { offset: type_offset, tensor: name.clone(), id },
        ShapeError::NotBlockAligned { type_name, dim0, block_elems } => {
            ReadError::NotBlockAligned { offset: dims_offset, tensor: name.clone(), type_name, dim0, block_elems }
        }
        ShapeError::Overflow { dims } => ReadError::DimsOverflow { offset: dims_offset, tensor: name.clone(), dims },
        ShapeError::BadDimCount(_) => ReadError::BadDimCount { offset: n_dims_offset, tensor: name.clone(), n_dims },
    })?;
    if data_offset % alignment != 0 {
        return Err(ReadError::MisalignedTensor { offset: offset_field, tensor: name, data_offset, alignment });
    }
    let info = TensorInfo { name, dims, ggml_type, data_offset, size_bytes, file_offset: name_offset };
    Ok((info, offset_field))
}

/// Checks each tensor's data lies inside the file and no two overlap; sets
/// each tensor's absolute `file_offset`.
fn check_extents(
    tensors: &mut [TensorInfo],
    offset_fields: &[u64],
    data_offset: u64,
    file_len: u64,
) -> Result<(), ReadError> {
    for (info, &field) in tensors.iter_mut().zip(offset_fields) {
        let start = data_offset.saturating_add(info.data_offset);
        let end = start.saturating_add(info.size_bytes);
        if end > file_len {
            return Err(ReadError::TensorOutOfBounds {
                offset: field,
                tensor: info.name.clone(),
                start,
                end,
                file_len,
            });
        }
        info.file_offset = start;
    }
    let mut order: Vec<usize> = (0..tensors.len()).filter(|&i| tensors[i].size_bytes > 0).collect();
    order.sort_by_key(|&i| (tensors[i].file_offset, i));
    for pair in order.windows(2) {
        let (earlier, later) = (&tensors[pair[0]], &tensors[pair[1]]);
        if later.file_offset < earlier.file_offset + earlier.size_bytes {
            return Err(ReadError::TensorOverlap {
                offset: offset_fields[pair[1]],
                tensor: later.name.clone(),
                other: earlier.name.clone(),
            });
        }
    }
    Ok(())
}
