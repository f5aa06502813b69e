//! Device memory: the raw trait a backend implements, and the safe handle.

use crate::loom::{Mutex, MutexGuard};
use std::any::Any;
use std::fmt;
use std::ops::Range;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use crate::backend::StreamError;
use crate::shape::{Layout, Shape};
use crate::sync::{PointStatus, SyncPoint};
use crate::DType;

/// Memory of one device, as a backend provides it.
///
/// # Safety
///
/// An implementor guarantees that:
/// - `len()` never changes, and the memory stays valid until the value is
///   dropped (the runtime keeps a buffer alive while queued work uses it);
/// - `host_ptr()`, when `Some`, points to `len()` bytes that are valid for
///   reads and writes from any thread for the buffer's whole life, and are
///   accessed by nothing but the streams the runtime submits work to.
pub unsafe trait RawBuffer: Send + Sync + 'static {
    /// Size in bytes.
    fn len(&self) -> usize;
    /// Whether the size is zero.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The owning device's name (`cpu:0`).
    fn device(&self) -> &str;
    /// The host address, for memory the host can address.
    fn host_ptr(&self) -> Option<NonNull<u8>>;
    /// For backends to recover their own type.
    fn as_any(&self) -> &dyn Any;
    /// Told once by [`Buffer::declare_weights`]: a buffer made of other
    /// buffers (a composite's parts) declares them too. Nothing by default.
    fn declare_weights(&self) {}
}

static NEXT_BUFFER_ID: AtomicU64 = AtomicU64::new(1);

/// One recorded access of a byte range by queued work.
#[derive(Clone, Debug)]
pub(crate) struct Access {
    pub(crate) range: Range<usize>,
    pub(crate) write: bool,
    pub(crate) point: SyncPoint,
    pub(crate) op: &'static str,
}

/// Accesses of one buffer by work that may still be in flight (hazard
/// tracking), writes apart from reads: a read conflicts only with writes,
/// so reading weights that nothing writes costs nothing however many reads
/// are queued.
#[derive(Default)]
pub(crate) struct AccessLog {
    writes: Vec<Access>,
    reads: Vec<Access>,
    /// Length of `reads` after it was last pruned; pruned again at twice
    /// that (reads are otherwise pruned only when a write checks them).
    reads_pruned: usize,
}

/// Whether the access's work may still run: its point is pending. A
/// reached point's work is done; a failed point's work ended in its error
/// or was dropped unrun (`RawStream`'s contract), so neither is kept: a
/// failed stream does not hold up, or fail, later users of the buffer.
fn in_flight(a: &Access) -> bool {
    matches!(a.point.status(), PointStatus::Pending)
}

impl AccessLog {
    /// The accesses still in flight that an access (a write or a read) of
    /// this buffer conflicts with if the ranges overlap: every one for a
    /// write, the writes for a read.
    pub(crate) fn conflicting(&mut self, write: bool) -> impl Iterator<Item = &Access> {
        self.writes.retain(in_flight);
        if write {
            self.reads.retain(in_flight);
            self.reads_pruned = self.reads.len();
        }
        let reads = if write { &self.reads[..] } else { &[] };
        self.writes.iter().chain(reads)
    }

    /// How many writes and reads are kept (tests check what is forgotten).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn kept(&self) -> (usize, usize) {
        (self.writes.len(), self.reads.len())
    }

    /// Records an access of queued work.
    pub(crate) fn record(&mut self, access: Access) {
        if access.write {
            self.writes.push(access);
        } else {
            if self.reads.len() >= (2 * self.reads_pruned).max(64) {
                self.reads.retain(in_flight);
                self.reads_pruned = self.reads.len();
            }
            self.reads.push(access);
        }
    }
}

struct BufferInner {
    id: u64,
    raw: Box<dyn RawBuffer>,
    accesses: Mutex<AccessLog>,
    /// [`PLAIN`], [`WEIGHTS`] or [`SEALED`].
    role: AtomicU8,
}

/// An ordinary buffer.
const PLAIN: u8 = 0;
/// Declared weights, not yet read by a computation: writes allowed.
const WEIGHTS: u8 = 1;
/// Declared weights read by a computation: read-only from then on.
const SEALED: u8 = 2;

/// A handle to device memory; cheap to clone. The memory is freed when the
/// last handle is dropped, and queued work holds handles, so dropping a
/// buffer while work uses it defers the free (contract rule `D-DEFER`).
#[derive(Clone)]
pub struct Buffer {
    inner: Arc<BufferInner>,
}

impl Buffer {
    /// Wraps a backend's buffer.
    pub fn new(raw: Box<dyn RawBuffer>) -> Buffer {
        Buffer {
            inner: Arc::new(BufferInner {
                id: NEXT_BUFFER_ID.fetch_add(1, Ordering::Relaxed),
                raw,
                accesses: Mutex::new(AccessLog::default()),
                role: AtomicU8::new(PLAIN),
            }),
        }
    }

    /// Wraps a backend's buffer whose bytes are final weights (a file's
    /// mapping): declared weights and sealed from the start, so no write
    /// into it is ever accepted ([`StreamError::SealedWeights`]).
    pub fn new_sealed_weights(raw: Box<dyn RawBuffer>) -> Buffer {
        let buffer = Buffer::new(raw);
        buffer.declare_weights();
        buffer.seal_if_weights();
        buffer
    }

    /// Declares this buffer to hold model weights: written first (uploads),
    /// then only read. From the first computation that reads it on, the
    /// buffer is sealed: a later write or copy into it is refused with
    /// [`StreamError::SealedWeights`], so a backend may keep derived forms
    /// of its tensors (the CPU backend's matmul weights packed for its
    /// kernels) without ever serving stale bytes. Declaring twice is a no-op;
    /// a sealed buffer stays sealed.
    pub fn declare_weights(&self) {
        let _ = self.inner.role.compare_exchange(PLAIN, WEIGHTS, Ordering::AcqRel, Ordering::Acquire);
        self.inner.raw.declare_weights();
    }

    /// Whether the buffer was declared to hold weights
    /// ([`declare_weights`](Self::declare_weights)).
    pub fn is_weights(&self) -> bool {
        self.inner.role.load(Ordering::Acquire) != PLAIN
    }

    /// Whether the buffer holds declared weights that a computation has
    /// read: its bytes no longer change.
    pub fn is_sealed(&self) -> bool {
        self.inner.role.load(Ordering::Acquire) == SEALED
    }

    /// The bytes of `range` where the host can read them and they are
    /// final: the buffer is host memory ([`RawBuffer::host_ptr`]), sealed
    /// weights ([`is_sealed`](Self::is_sealed): no write into it is
    /// accepted any more) and no write queued before the seal is still in
    /// flight; `None` otherwise, or for a range outside the buffer. For
    /// host kernels that read a model's weights between its steps (a
    /// drafter's head multiplying by the model's output matrix).
    pub fn final_host_bytes(&self, range: Range<usize>) -> Option<&[u8]> {
        if !self.is_sealed() || range.start > range.end || range.end > self.len() {
            return None;
        }
        let ptr = self.inner.raw.host_ptr()?;
        if self.accesses().conflicting(false).next().is_some() {
            return None; // an upload queued before the seal may still run
        }
        // SAFETY: `RawBuffer`'s contract: `host_ptr` points to `len()` bytes
        // valid for reads for the buffer's whole life, which `&self` keeps
        // (the slice borrows it), and `range` lies inside them (checked).
        // Nothing writes them from now on: the buffer is sealed, so no
        // write is accepted any more (`Stream` checks every submission),
        // and the writes accepted before the seal are done (no write in the
        // access log is in flight; a write's work is done when its point
        // is reached, and a failed point's work ended or never ran).
        Some(unsafe { std::slice::from_raw_parts(ptr.as_ptr().add(range.start), range.len()) })
    }

    /// Seals declared weights (a computation reads them); plain buffers
    /// are left as they are.
    pub(crate) fn seal_if_weights(&self) {
        let _ = self.inner.role.compare_exchange(WEIGHTS, SEALED, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Process-unique id.
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.inner.raw.len()
    }

    /// Whether the size is zero.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The owning device's name.
    pub fn device(&self) -> &str {
        self.inner.raw.device()
    }

    /// The backend's buffer.
    pub fn raw(&self) -> &dyn RawBuffer {
        &*self.inner.raw
    }

    /// Whether both handles name the same memory.
    pub fn same_as(&self, other: &Buffer) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// A byte range of this buffer, checked.
    pub fn range(&self, offset: usize, len: usize) -> Result<BufferRange, StreamError> {
        let end = offset.checked_add(len).filter(|&e| e <= self.len()).ok_or(StreamError::OutOfBounds {
            offset,
            end: offset.saturating_add(len),
            len: self.len(),
        })?;
        Ok(BufferRange { buffer: self.clone(), range: offset..end })
    }

    /// The whole buffer as a range.
    pub fn all(&self) -> BufferRange {
        BufferRange { buffer: self.clone(), range: 0..self.len() }
    }

    pub(crate) fn accesses(&self) -> MutexGuard<'_, AccessLog> {
        self.inner.accesses.lock()
    }
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Buffer#{}({}, {} bytes)", self.id(), self.device(), self.len())
    }
}

/// A byte range of a buffer, checked to lie inside it.
///
/// The fields are private and every constructor ([`Buffer::range`],
/// [`Buffer::all`], [`TensorRef::byte_range`]) checks the bounds, and a
/// buffer's length never changes ([`RawBuffer`]'s contract), so a
/// `BufferRange` that exists lies inside its buffer: backends rely on this
/// when they turn it into an address. A range cannot be forged from safe
/// code:
///
/// ```compile_fail,E0451
/// use baton_core::backend::{Buffer, BufferRange};
/// fn forge(buffer: Buffer) -> BufferRange {
///     BufferRange { buffer, range: 64..4160 }
/// }
/// ```
#[derive(Clone, Debug)]
pub struct BufferRange {
    buffer: Buffer,
    range: Range<usize>,
}

impl BufferRange {
    /// The buffer.
    pub fn buffer(&self) -> &Buffer {
        &self.buffer
    }

    /// The bytes, inside the buffer.
    pub fn range(&self) -> Range<usize> {
        self.range.clone()
    }

    /// The first byte.
    pub fn start(&self) -> usize {
        self.range.start
    }

    /// One past the last byte (at most the buffer's length).
    pub fn end(&self) -> usize {
        self.range.end
    }

    /// Whether the two ranges share a byte of the same buffer.
    pub fn overlaps(&self, other: &BufferRange) -> bool {
        self.buffer.same_as(&other.buffer) && self.range.start < other.range.end && other.range.start < self.range.end
    }

    /// The range from `start` to `end` of the same buffer, whether or not
    /// they touch (used to merge ranges).
    pub(crate) fn spanning(&self, end: usize) -> BufferRange {
        debug_assert!(end <= self.buffer.len(), "a span stays inside its buffer");
        BufferRange { buffer: self.buffer.clone(), range: self.range.start..end.min(self.buffer.len()) }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.range.len()
    }

    /// Whether the range is empty.
    pub fn is_empty(&self) -> bool {
        self.range.is_empty()
    }
}

/// A contiguous tensor placed in a buffer.
#[derive(Clone, Debug)]
pub struct TensorRef {
    buffer: Buffer,
    offset: usize,
    dtype: DType,
    shape: Shape,
}

impl TensorRef {
    /// A tensor of `dtype` and `dims` at byte `offset` of `buffer`, checked
    /// to fit.
    pub fn new(buffer: &Buffer, offset: usize, dtype: DType, dims: &[usize]) -> Result<TensorRef, StreamError> {
        let shape = Shape::new(dims)?;
        let layout = Layout::contiguous(dtype, shape)?;
        buffer.range(offset, layout.end_byte(dtype))?;
        Ok(TensorRef { buffer: buffer.clone(), offset, dtype, shape })
    }

    /// A tensor at the start of `buffer`, which the caller sized for it.
    pub(crate) fn whole(buffer: Buffer, dtype: DType, shape: Shape) -> TensorRef {
        TensorRef { buffer, offset: 0, dtype, shape }
    }

    /// The buffer.
    pub fn buffer(&self) -> &Buffer {
        &self.buffer
    }

    /// Byte offset in the buffer.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Shape.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// Size in bytes.
    pub fn bytes(&self) -> usize {
        // Checked at construction.
        self.shape.rows() * self.dtype.row_bytes(self.shape.last()).unwrap_or(0)
    }

    /// The bytes as a range of the buffer (inside it: checked at
    /// construction).
    pub fn byte_range(&self) -> BufferRange {
        BufferRange { buffer: self.buffer.clone(), range: self.offset..self.offset + self.bytes() }
    }
}
