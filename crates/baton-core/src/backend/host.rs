//! Host memory that the runtime owns while asynchronous work uses it.
//!
//! `write_async` and `read_into_async` take a host buffer by value and give
//! it back through a [`Pending`] once their point is reached, so a decode loop
//! reuses its buffers and a borrowed buffer, which the caller could change
//! while the copy is queued, does not compile (`'static` owned types only).

use crate::loom::Mutex;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use half::{bf16, f16};

use crate::backend::StreamError;
use crate::sync::SyncPoint;

/// A plain element type whose every bit pattern is a valid value.
///
/// # Safety
///
/// Implementors must be `Copy` types without padding bytes or invalid bit
/// patterns, so that their memory can be viewed as bytes and written from
/// arbitrary bytes.
pub unsafe trait Element: Copy + Send + Sync + 'static {}

// SAFETY: all of these are plain numbers: no padding, every bit pattern valid.
unsafe impl Element for u8 {}
// SAFETY: as above.
unsafe impl Element for i8 {}
// SAFETY: as above.
unsafe impl Element for i32 {}
// SAFETY: as above.
unsafe impl Element for u32 {}
// SAFETY: as above.
unsafe impl Element for f32 {}
// SAFETY: as above (a 16-bit pattern).
unsafe impl Element for f16 {}
// SAFETY: as above (a 16-bit pattern).
unsafe impl Element for bf16 {}

/// Views a slice of elements as bytes.
pub fn as_bytes<T: Element>(slice: &[T]) -> &[u8] {
    // SAFETY: `T: Element` has no padding, so every byte of the slice is
    // initialised; the length is the slice's size in bytes and the lifetime
    // is the input's.
    unsafe { std::slice::from_raw_parts(slice.as_ptr().cast::<u8>(), std::mem::size_of_val(slice)) }
}

/// Views a mutable slice of elements as bytes.
pub fn as_bytes_mut<T: Element>(slice: &mut [T]) -> &mut [u8] {
    // SAFETY: as `as_bytes`; additionally every byte pattern written through
    // the view is a valid `T` (`Element`'s contract), and the borrow is
    // exclusive for the output's lifetime.
    unsafe { std::slice::from_raw_parts_mut(slice.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(slice)) }
}

/// Owned host memory that asynchronous work may read or fill.
pub trait HostBytes: Send + 'static {
    /// The bytes.
    fn bytes(&self) -> &[u8];
    /// The bytes, writable.
    fn bytes_mut(&mut self) -> &mut [u8];
}

impl<T: Element> HostBytes for Vec<T> {
    fn bytes(&self) -> &[u8] {
        as_bytes(self)
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        as_bytes_mut(self)
    }
}

impl<T: Element> HostBytes for Box<[T]> {
    fn bytes(&self) -> &[u8] {
        as_bytes(self)
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        as_bytes_mut(self)
    }
}

/// The queued side of a host buffer: what a stream worker touches.
pub trait HostSlot: Send + Sync {
    /// Calls `f` with the buffer's bytes.
    fn with_bytes(&self, f: &mut dyn FnMut(&[u8]));
    /// Calls `f` with the buffer's bytes, writable.
    fn with_bytes_mut(&self, f: &mut dyn FnMut(&mut [u8]));
}

pub(crate) struct Slot<B>(pub(crate) Mutex<Option<B>>);

impl<B: HostBytes> HostSlot for Slot<B> {
    fn with_bytes(&self, f: &mut dyn FnMut(&[u8])) {
        let guard = self.0.lock();
        if let Some(b) = guard.as_ref() {
            f(b.bytes());
        }
    }
    fn with_bytes_mut(&self, f: &mut dyn FnMut(&mut [u8])) {
        let mut guard = self.0.lock();
        if let Some(b) = guard.as_mut() {
            f(b.bytes_mut());
        }
    }
}

/// A host buffer lent to a stream, and the point after which it comes back.
#[must_use = "the buffer comes back through wait()"]
pub struct Pending<B> {
    point: SyncPoint,
    stream: String,
    slot: Arc<Slot<B>>,
}

/// A transfer that was refused or did not complete: the error, and either
/// the buffer back (the stream refused the transfer, or its point failed)
/// or the transfer itself (the wait timed out, the transfer is still
/// queued). `?` turns it into its [`StreamError`].
pub struct PendingError<B> {
    /// Why the transfer did not complete.
    pub error: StreamError,
    buffer: Option<B>,
    pending: Option<Box<Pending<B>>>,
}

impl<B> PendingError<B> {
    /// A transfer the stream refused before queueing it: the caller's
    /// buffer comes back untouched.
    pub(crate) fn refused(error: StreamError, buffer: B) -> Self {
        PendingError { error, buffer: Some(buffer), pending: None }
    }

    /// A transfer whose submission failed after its slot was made: the op
    /// that shared the slot was dropped with the refusal, so the slot is
    /// the buffer's only holder again.
    pub(crate) fn refused_in(error: StreamError, slot: &Slot<B>) -> Self {
        PendingError { error, buffer: slot.0.lock().take(), pending: None }
    }

    /// The host buffer: untouched when the stream refused the transfer,
    /// unchanged or partly filled when the point failed; `None` when the
    /// wait timed out (the transfer still owns it:
    /// see [`into_pending`](Self::into_pending)), or if the backend broke
    /// its contract by still holding it.
    pub fn into_buffer(self) -> Option<B> {
        self.buffer
    }

    /// The error and the buffer at once (see [`into_buffer`](Self::into_buffer)).
    pub fn into_parts(self) -> (StreamError, Option<B>) {
        (self.error, self.buffer)
    }

    /// The transfer, intact, when the wait ended in a timeout: it is still
    /// queued and owns the buffer; wait on it again, or drop it (the buffer
    /// is then freed once the transfer has run).
    pub fn into_pending(self) -> Option<Pending<B>> {
        self.pending.map(|p| *p)
    }

    /// Whether the wait ran out of time with the transfer still queued.
    pub fn is_timeout(&self) -> bool {
        self.pending.is_some()
    }
}

impl<B> fmt::Debug for PendingError<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.error, f)
    }
}

impl<B> fmt::Display for PendingError<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl<B> std::error::Error for PendingError<B> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.error)
    }
}

impl<B> From<PendingError<B>> for StreamError {
    /// The error alone; a buffer or transfer it held is dropped (a queued
    /// transfer frees its buffer once it has run).
    fn from(e: PendingError<B>) -> StreamError {
        e.error
    }
}

impl<B: HostBytes> Pending<B> {
    pub(crate) fn new(point: SyncPoint, stream: String, slot: Arc<Slot<B>>) -> Self {
        Pending { point, stream, slot }
    }

    /// The point that completes the transfer.
    pub fn point(&self) -> &SyncPoint {
        &self.point
    }

    /// Whether the transfer has completed (never blocks).
    pub fn is_ready(&self) -> bool {
        self.point.is_reached()
    }

    /// Waits at most `timeout` for this transfer's own point (`R-OWN`),
    /// keeping the handle.
    pub fn wait_timeout(&self, timeout: Duration) -> Result<(), StreamError> {
        Ok(self.point.wait_timeout(timeout)?)
    }

    /// Waits for this transfer's own point only (not for later work on the
    /// stream) and returns the buffer: for a read, filled with the tensor's
    /// bytes. If the wait times out (the `poll` policy's bound), the
    /// transfer is left intact and comes back in the error
    /// ([`PendingError::into_pending`]); if the point failed, the buffer
    /// does ([`PendingError::into_buffer`], rule `D-RETURN`).
    pub fn wait(self) -> Result<B, PendingError<B>> {
        let waited = self.point.wait();
        self.settle(waited)
    }

    /// As [`wait`](Self::wait), giving up after `timeout`.
    pub fn wait_within(self, timeout: Duration) -> Result<B, PendingError<B>> {
        let waited = self.point.wait_timeout(timeout);
        self.settle(waited)
    }

    fn settle(self, waited: Result<(), crate::sync::WaitError>) -> Result<B, PendingError<B>> {
        if let Err(e @ crate::sync::WaitError::Timeout { .. }) = waited {
            // The transfer is still queued and its worker will use the
            // buffer: leave it in the slot.
            return Err(PendingError { error: StreamError::Wait(e), buffer: None, pending: Some(Box::new(self)) });
        }
        // The point is settled, and the worker drops its handle of the slot
        // before it advances or fails the point (contract rule `D-RETURN`),
        // so the buffer is ours alone now.
        let buffer = self.slot.0.lock().take();
        match (waited, buffer) {
            (Ok(()), Some(b)) => Ok(b),
            (Ok(()), None) => {
                Err(PendingError { error: StreamError::Closed(self.stream), buffer: None, pending: None })
            }
            (Err(e), buffer) => Err(PendingError { error: StreamError::Wait(e), buffer, pending: None }),
        }
    }
}
