//! The few calls of the API that are about to change (private
//! `BufferRange` fields, a deadline on `StreamOp::Wait`, a `PendingError`
//! that hands the `Pending` back on timeout), in one place.

use baton_core::backend::{Buffer, BufferRange, Stream, StreamError};
use baton_core::sync::{SyncPoint, WaitPolicy};

/// A checked byte range of `buffer`.
pub fn range(buffer: &Buffer, offset: usize, len: usize) -> Result<BufferRange, StreamError> {
    buffer.range(offset, len)
}

/// A stream's native wait on `point` with `policy` (no deadline yet).
pub fn wait(stream: &Stream, point: &SyncPoint, policy: WaitPolicy) -> Result<SyncPoint, StreamError> {
    stream.wait_with(point, policy)
}

/// The variant of a stream error, as the model names the refusals.
pub fn error_name(e: &StreamError) -> &'static str {
    match e {
        StreamError::Failed { .. } => "Failed",
        StreamError::Wait(_) => "Wait",
        StreamError::ForeignPoint { .. } => "ForeignPoint",
        StreamError::InaccessibleBuffer { .. } => "InaccessibleBuffer",
        StreamError::OutOfBounds { .. } => "OutOfBounds",
        StreamError::SizeMismatch { .. } => "SizeMismatch",
        StreamError::Binding { .. } => "Binding",
        StreamError::Graph(_) => "Graph",
        StreamError::Unsupported { .. } => "Unsupported",
        StreamError::Kernel { .. } => "Kernel",
        StreamError::Closed(_) => "Closed",
    }
}

/// A stream wait that must end by `deadline` (failing the stream
/// `TimedOut`) even under a blocking policy. `StreamOp::Wait` has no
/// deadline yet (known defect (e)), so today this is a plain wait.
pub fn wait_with_deadline(
    stream: &Stream,
    point: &SyncPoint,
    policy: WaitPolicy,
    _deadline: std::time::Duration,
) -> Result<SyncPoint, StreamError> {
    stream.wait_with(point, policy)
}
