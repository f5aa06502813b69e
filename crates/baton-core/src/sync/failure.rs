//! Why a point will never be reached, and the errors of waiting.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// How a point came to fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// A `Release` was dropped without being signalled, or a run was cancelled.
    Abandoned,
    /// Work queued on a stream returned an error.
    WorkFailed,
    /// A stream waited on a point that failed; the stream failed with it.
    Propagated,
    /// A bounded wait inside a stream ran out of time.
    TimedOut,
    /// The device was lost or shut down.
    DeviceLost,
}

/// The first cause of a failure: cheap to clone, shared by every point and
/// stream it travels to.
#[derive(Clone)]
pub struct Failure(Arc<FailureInner>);

struct FailureInner {
    kind: FailureKind,
    /// Where the failure first happened, e.g. `cpu:0/stream-1@7`.
    origin: String,
    message: String,
}

impl Failure {
    /// A new first cause.
    pub fn new(kind: FailureKind, origin: impl Into<String>, message: impl Into<String>) -> Self {
        Failure(Arc::new(FailureInner { kind, origin: origin.into(), message: message.into() }))
    }

    /// What happened first.
    pub fn kind(&self) -> FailureKind {
        self.0.kind
    }

    /// Where it happened first (timeline label and value).
    pub fn origin(&self) -> &str {
        &self.0.origin
    }

    /// The first cause's own message.
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// Whether two handles name the same first cause.
    pub fn same_cause(&self, other: &Failure) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.0.kind {
            FailureKind::Abandoned => "abandoned",
            FailureKind::WorkFailed => "work failed",
            FailureKind::Propagated => "failed through a wait",
            FailureKind::TimedOut => "timed out",
            FailureKind::DeviceLost => "device lost",
        };
        write!(f, "{what} at {}: {}", self.0.origin, self.0.message)
    }
}

impl fmt::Debug for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The error of a host-side wait on a sync point.
#[derive(Clone, Debug, thiserror::Error)]
pub enum WaitError {
    /// The point will never be reached; `cause` is the first failure.
    #[error("{point} will never be reached: {cause}")]
    Failed {
        /// The point waited on (`timeline@value`).
        point: String,
        /// The first cause.
        cause: Failure,
    },
    /// The bound passed to the wait ran out first; the point may still come.
    #[error("timed out after {waited:?} waiting for {point} (timeline at {reached})")]
    Timeout {
        /// The point waited on (`timeline@value`).
        point: String,
        /// How long the wait lasted.
        waited: Duration,
        /// The value the timeline had reached when the wait gave up.
        reached: u64,
    },
}

impl WaitError {
    /// The first cause, when the point failed (not for a timeout).
    pub fn cause(&self) -> Option<&Failure> {
        match self {
            WaitError::Failed { cause, .. } => Some(cause),
            WaitError::Timeout { .. } => None,
        }
    }
}
