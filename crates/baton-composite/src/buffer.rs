//! Composite memory: one buffer per inner device, and how they hold the
//! bytes.

use std::any::Any;
use std::ops::Range;
use std::ptr::NonNull;

use baton_core::backend::{Buffer, BufferRange, RawBuffer, StreamError, TensorRef};
use baton_core::DType;

use crate::split::TensorSplit;

/// The one tensor a split or partial buffer holds.
#[derive(Clone, Debug)]
pub struct SplitTensor {
    /// Element type.
    pub dtype: DType,
    /// Full dimensions.
    pub dims: Vec<usize>,
    /// How the devices hold it.
    pub split: TensorSplit,
    /// Whether every part holds the whole tensor's bytes (a mapping of the
    /// file's range, `mapped`) of which device `d` reads only its share as
    /// a strided view: a matrix cut along its rows' length, whose shares
    /// are not one range of the file. The partition takes each device's
    /// share as that view (`Partition::bound_windows`).
    pub windowed: bool,
}

/// Memory of a composite device: part `d` lives on inner device `d`.
///
/// A plain allocation is mirrored: every part has all `len` bytes, equal
/// after every operation, and any byte range of it can be used. A buffer made
/// for one tensor ([`crate::CompositeDevice::alloc_split`]) holds that
/// tensor split or as partial sums; it is used whole.
pub struct CompositeBuffer {
    device: String,
    len: usize,
    parts: Vec<Buffer>,
    tensor: Option<SplitTensor>,
}

impl CompositeBuffer {
    pub(crate) fn new(device: String, len: usize, parts: Vec<Buffer>, tensor: Option<SplitTensor>) -> Self {
        CompositeBuffer { device, len, parts, tensor }
    }

    /// The part on inner device `d`.
    pub fn part(&self, d: usize) -> &Buffer {
        &self.parts[d]
    }

    /// Parts, one per inner device.
    pub fn parts(&self) -> &[Buffer] {
        &self.parts
    }

    /// The tensor of a split or partial buffer (`None` when mirrored).
    pub fn tensor(&self) -> Option<&SplitTensor> {
        self.tensor.as_ref()
    }

    /// Whether every part holds the whole tensor, each device reading its
    /// share as a view ([`SplitTensor::windowed`]).
    pub fn windowed(&self) -> bool {
        self.tensor.as_ref().is_some_and(|t| t.windowed)
    }

    /// How the buffer's tensor is held (mirrored for plain allocations).
    pub fn split(&self) -> TensorSplit {
        self.tensor.as_ref().map_or(TensorSplit::Mirror, |t| t.split.clone())
    }

    /// The composite buffer behind a handle, if it is one.
    pub fn of(buffer: &Buffer) -> Option<&CompositeBuffer> {
        buffer.raw().as_any().downcast_ref::<CompositeBuffer>()
    }

    /// Part `d`'s bytes for the composite `range`: the same bytes of a
    /// mirrored buffer; the whole part of a split buffer, used whole.
    pub(crate) fn part_range(&self, range: &Range<usize>, d: usize) -> Result<BufferRange, StreamError> {
        match &self.tensor {
            None => self.parts[d].range(range.start, range.len()),
            Some(_) if *range == (0..self.len) => Ok(self.parts[d].all()),
            Some(t) => Err(StreamError::Binding {
                node: format!("{} buffer", self.device),
                reason: format!("a {:?} tensor is used whole, not bytes {range:?}", t.split),
            }),
        }
    }

    /// Part `d` of `tensor` (a tensor of this buffer) as a tensor of the
    /// inner device: same place in a mirrored part, the local slice of a
    /// split tensor.
    pub(crate) fn part_tensor(&self, tensor: &TensorRef, d: usize) -> Result<TensorRef, StreamError> {
        match &self.tensor {
            None => TensorRef::new(&self.parts[d], tensor.offset(), tensor.dtype(), tensor.shape().dims()),
            Some(t) if tensor.offset() == 0 && tensor.shape().dims() == t.dims.as_slice() => {
                let dims = if t.windowed { t.dims.clone() } else { t.split.local_dims(&t.dims, d) };
                TensorRef::new(&self.parts[d], 0, t.dtype, &dims)
            }
            Some(t) => Err(StreamError::Binding {
                node: format!("{} buffer", self.device),
                reason: format!("a view {:?} of a {:?} {:?} tensor", tensor.shape(), t.split, t.dims),
            }),
        }
    }
}

// SAFETY: `len` is fixed at construction and never changes; `host_ptr` is
// `None` (the bytes live in the parts, each a buffer of its own device that
// keeps its own promises), so the host never addresses this buffer directly.
unsafe impl RawBuffer for CompositeBuffer {
    fn len(&self) -> usize {
        self.len
    }

    fn device(&self) -> &str {
        &self.device
    }

    fn host_ptr(&self) -> Option<NonNull<u8>> {
        None
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    /// The parts hold the bytes, so they are the weights.
    fn declare_weights(&self) {
        for part in &self.parts {
            part.declare_weights();
        }
    }
}

/// A tensor over the bytes `range` of `buffer`, for moving bytes with the
/// safe stream API (reads and copies take tensors): i32 words when the
/// length allows, else f16 halves.
pub(crate) fn byte_tensor(range: &BufferRange) -> Result<TensorRef, StreamError> {
    let len = range.len();
    let (dtype, n) = if len.is_multiple_of(4) { (DType::I32, len / 4) } else { (DType::F16, len / 2) };
    if !len.is_multiple_of(2) || n == 0 {
        return Err(StreamError::SizeMismatch { host: len, tensor: len & !1 });
    }
    TensorRef::new(range.buffer(), range.start(), dtype, &[n])
}
