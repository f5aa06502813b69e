//! The happens-before check of device memory (the sanitizer).
//!
//! Every access of queued work to a buffer is recorded with its byte range
//! and its point. Before new work is queued, each recorded access it
//! conflicts with (one of the two writes, the ranges overlap) must be
//! ordered before it: on the same stream, reached already, or waited on by
//! this stream. An access that is not is a race the caller left open: the
//! stream reports it (both operations, their streams, the missing edge) and
//! closes it by queuing the missing wait, so safe code never races on device
//! memory. `BATON_SANITIZE=1` also prints every report to stderr.
//!
//! Order is transitive: each stream keeps a vector clock (for every
//! timeline, the highest value it knows complete), merges the clock of every
//! point it waits on, and publishes a snapshot after each wait, so an order
//! established through a third stream (A waited on by B, B by C) counts.

use std::fmt;
use std::ops::Range;

/// One operation of a race.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RacingAccess {
    /// The stream that queued it.
    pub stream: String,
    /// The operation (`write`, `copy`, `compute`…).
    pub op: &'static str,
    /// Whether it writes the range.
    pub write: bool,
    /// The bytes it touches.
    pub range: Range<usize>,
}

/// A conflicting access that was not ordered after an earlier one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HazardReport {
    /// The buffer (`Buffer::id`).
    pub buffer: u64,
    /// The earlier access, still in flight.
    pub earlier: RacingAccess,
    /// Its point (`timeline@value`).
    pub earlier_point: String,
    /// The new access.
    pub later: RacingAccess,
}

impl fmt::Display for HazardReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = |w: bool| if w { "writes" } else { "reads" };
        write!(
            f,
            "race on buffer #{}: {} on {} {} bytes {:?}, not ordered after {} on {} that {} bytes {:?} (point {}); missing edge: {} must wait on {}",
            self.buffer,
            self.later.op,
            self.later.stream,
            kind(self.later.write),
            self.later.range,
            self.earlier.op,
            self.earlier.stream,
            kind(self.earlier.write),
            self.earlier.range,
            self.earlier_point,
            self.later.stream,
            self.earlier_point
        )
    }
}

/// Whether reports are printed (`BATON_SANITIZE=1`); read once.
pub fn printing() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("BATON_SANITIZE").is_ok_and(|v| v == "1"))
}
