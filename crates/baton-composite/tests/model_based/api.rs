//! The few calls of the API the model wraps (checked ranges, bounded
//! stream waits, the names of refusals), in one place.

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
        StreamError::Shape(_) => "Shape",
        StreamError::Unsupported { .. } => "Unsupported",
        StreamError::Kernel { .. } => "Kernel",
        StreamError::Closed(_) => "Closed",
        StreamError::SealedWeights { .. } => "SealedWeights",
    }
}

/// A stream wait that must end by `deadline` (failing the stream
/// `TimedOut`) even under a blocking policy.
pub fn wait_with_deadline(
    stream: &Stream,
    point: &SyncPoint,
    policy: WaitPolicy,
    deadline: std::time::Duration,
) -> Result<SyncPoint, StreamError> {
    stream.wait_bounded(point, policy, Some(deadline))
}
