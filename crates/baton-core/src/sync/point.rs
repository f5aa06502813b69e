//! A sync point: one moment of one timeline, forever.

use std::fmt;
use std::time::Duration;

use crate::sync::failure::{Failure, FailureKind, WaitError};
use crate::sync::policy::{WaitPolicy, WaitUntil};
use crate::sync::timeline::{PointStatus, Timeline};

/// The pair (timeline, value): immutable, cheap to clone (a shared handle and
/// a number). It is reached when the timeline's counter is at least `value`;
/// from then on everything the work before it wrote is visible to whoever
/// observed it (contract rule `P-VISIBLE`). A point that will never be reached
/// reports its first cause (`P-FAIL`).
#[derive(Clone)]
pub struct SyncPoint {
    timeline: Timeline,
    value: u64,
}

impl SyncPoint {
    pub(crate) fn new(timeline: Timeline, value: u64) -> Self {
        SyncPoint { timeline, value }
    }

    /// The timeline this point belongs to.
    pub fn timeline(&self) -> &Timeline {
        &self.timeline
    }

    /// The counter value that reaches this point.
    pub fn value(&self) -> u64 {
        self.value
    }

    /// Whether the point is reached now (never blocks). A `true` here is an
    /// acquire: the point's work's writes are visible after it.
    pub fn is_reached(&self) -> bool {
        matches!(self.timeline.status(self.value), PointStatus::Reached)
    }

    /// Reached, failed (with the first cause) or pending, now.
    pub fn status(&self) -> PointStatus {
        self.timeline.status(self.value)
    }

    /// Blocks the calling thread until the point is reached or fails
    /// (contract rule `P-WAIT`), with [`WaitPolicy::process_default`].
    pub fn wait(&self) -> Result<(), WaitError> {
        WaitPolicy::process_default().wait(&self.timeline, self.value, None)
    }

    /// As [`wait`](Self::wait), but gives up after `timeout` with
    /// [`WaitError::Timeout`] (`P-TIMEOUT`); the point itself is unaffected.
    pub fn wait_timeout(&self, timeout: Duration) -> Result<(), WaitError> {
        WaitPolicy::process_default().wait(&self.timeline, self.value, Some(timeout))
    }

    /// Waits with an explicit policy and optional timeout.
    pub fn wait_with(&self, policy: WaitPolicy, timeout: Option<Duration>) -> Result<(), WaitError> {
        policy.wait(&self.timeline, self.value, timeout)
    }

    /// Whether this point is at or after `other` on the same timeline, so that
    /// reaching it implies reaching `other`.
    pub fn covers(&self, other: &SyncPoint) -> bool {
        self.timeline.same_as(&other.timeline) && self.value >= other.value
    }
}

// A point is made of a timeline and waited on with a policy: the methods
// that make a point or wait on one live here, so neither the timeline nor
// the policy needs to know points.
impl Timeline {
    /// The point `value` of this timeline. Value 0 is reached from the start.
    pub fn point(&self, value: u64) -> SyncPoint {
        SyncPoint::new(self.clone(), value)
    }
}

impl WaitPolicy {
    /// As [`wait`](WaitPolicy::wait), for a stream's worker waiting on another
    /// timeline's point with the edge's `deadline`: a point still pending
    /// when it passes becomes a `FailureKind::TimedOut` failure naming the
    /// point (`W-BOUND`); a failed point gives its own first cause
    /// (`W-FAIL`).
    /// A failed point is no error when `until` is [`WaitUntil::Settled`].
    pub fn wait_in_stream(
        &self,
        point: &SyncPoint,
        deadline: Option<Duration>,
        until: WaitUntil,
        waiter: &str,
    ) -> Result<(), Failure> {
        match self.wait(point.timeline(), point.value(), deadline) {
            Ok(()) => Ok(()),
            Err(WaitError::Failed { .. }) if until == WaitUntil::Settled => Ok(()),
            Err(WaitError::Failed { cause, .. }) => Err(cause),
            Err(timeout @ WaitError::Timeout { .. }) => {
                Err(Failure::new(FailureKind::TimedOut, waiter, timeout.to_string()))
            }
        }
    }
}

impl fmt::Debug for SyncPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.timeline.label(), self.value)
    }
}

impl fmt::Display for SyncPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}
