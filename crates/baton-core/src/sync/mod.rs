//! Timelines and sync points: the one idea every piece of async work follows.
//!
//! Every submission to a stream completes a point on that stream's timeline.
//! See `docs/contract.md` for the rules; [`SyncPoint`] is the handle users
//! hold, [`TimelineWriter`] the single producer, [`HostTimeline`] and
//! [`Release`] let the host gate streams on its own work, and [`WaitPolicy`]
//! decides how a waiter waits.

mod failure;
mod host;
mod point;
mod policy;
mod timeline;

pub use failure::{Failure, FailureKind, WaitError};
pub use host::{HostTimeline, Release};
pub use point::SyncPoint;
pub use policy::{default_wait_deadline, parse_deadline, WaitPolicy, WaitUntil, DEFAULT_WAIT_DEADLINE};
pub use timeline::{Clock, Domain, PointStatus, Timeline, TimelineId, TimelineWriter};

#[cfg(all(test, not(loom)))]
mod tests;

#[cfg(all(test, loom))]
mod loom_tests;
