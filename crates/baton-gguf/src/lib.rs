//! GGUF reader and writer for Baton.
//!
//! Depends on no other Baton crate; baton-model reads its models with it.
//!
//! # The format
//!
//! A GGUF file (versions 2 and 3, little-endian) is laid out as:
//!
//! 1. a header: the magic `GGUF`, the version (`u32`), the tensor count and
//!    the metadata count (`u64` each);
//! 2. the metadata: key-value pairs, each a string key (`u64` length then
//!    UTF-8 bytes), a value type (`u32`, see [`ValueType`]) and the value;
//!    arrays store an element type, a `u64` length and the elements, and may
//!    nest;
//! 3. the tensor infos: name, dim count (`u32`), dims (`u64` each, ggml order:
//!    dim 0 is the innermost, contiguous one), ggml type id (`u32`, see
//!    [`GgmlType`]) and the data's offset (`u64`) relative to the data section;
//! 4. padding up to a multiple of the alignment (`general.alignment`, default
//!    32), then the data section: each tensor's bytes at its offset, which is
//!    itself a multiple of the alignment.
//!
//! # Reading
//!
//! [`GgufFile::open`] memory-maps a file (see its docs for the caveat that the
//! file must not change while mapped); tensor bytes are then borrowed
//! straight from the map ([`Tensor::data`]). [`GgufFile::from_bytes`] and
//! [`GgufFile::from_slice`] parse a file held in memory with the same code.
//! [`Metadata`] offers typed getters (`get_u32`, `get_str`,
//! `get_str_array`, ...) whose errors name the key and the expected and found
//! types; integer getters accept any integer type whose value fits.
//!
//! # Validation strategy
//!
//! The reader treats the file as hostile. Everything is checked when the file
//! is opened, so accessors afterwards cannot fail:
//!
//! - every read is bounds-checked, so a truncated file gives
//!   [`ReadError::Truncated`] (or [`ReadError::LengthTooLarge`] when a length
//!   field points past the end) instead of reading out of bounds;
//! - nothing is allocated from a count or length before checking that the
//!   rest of the file can hold that many items at their minimum encoded size,
//!   so memory use stays within a small multiple of the file's size;
//! - arrays may nest at most [`MAX_ARRAY_NESTING`] deep (no stack overflow);
//! - strings must be UTF-8, bools 0 or 1, value types known, keys and tensor
//!   names unique, `general.alignment` a power of two;
//! - tensors must have 1 to [`MAX_DIMS`] dims, a known ggml type (the size
//!   table lives in [`ggml_type`]), dim 0 a whole number of blocks, an element
//!   count and byte size that fit in `i64`, an aligned offset, and data inside
//!   the file that overlaps no other tensor's.
//!
//! Each failure is a [`ReadError`] variant carrying the file offset of the
//! offending field and what was expected; the reader never panics on input.
//!
//! # Writing
//!
//! [`GgufWriter`] builds version 3 files, validating as it goes (unique keys
//! and names, data length equal to the size type and dims imply), and streams
//! them to any [`std::io::Write`] or to a path.
//!
//! # Tests behind features
//!
//! - `model-tests`: reads the real SmolLM2-135M-Instruct Q4_1 model from
//!   `~/.cache/baton/models/` (fetch it with `scripts/fetch-smollm2.sh`).
//! - `reference-tests`: cross-checks a written file with the Python `gguf`
//!   package through `tests/reference/gguf_check.py`; set `BATON_PYTHON` to
//!   the interpreter `scripts/setup-python.sh` prints.
//!
//! A fuzz target lives in `crates/baton-gguf/fuzz` (`cargo +nightly fuzz run
//! read` from that directory).
#![deny(missing_docs)]

mod alignment;
mod error;
pub mod ggml_type;
mod limits;
mod metadata;
mod parse;
mod reader;
mod tensor;
mod value;
mod writer;

pub use alignment::{ALIGNMENT_KEY, DEFAULT_ALIGNMENT};
pub use error::{MetadataError, ReadError, WriteError};
pub use ggml_type::{GgmlType, ShapeError, TypeLayout, KNOWN_TYPES};
pub use limits::{MAX_ARRAY_NESTING, MAX_DIMS};
pub use metadata::{Metadata, OptionalKey};
pub use reader::GgufFile;
pub use tensor::{Tensor, TensorInfo};
pub use value::{Array, Value, ValueType};
pub use writer::{GgufWriter, MAX_TENSOR_NAME_BYTES, WRITE_VERSION};
