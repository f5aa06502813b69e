//! A timeline: a monotonic 64-bit counter that work advances as it completes.
//!
//! # Protocol
//!
//! A timeline has one write side ([`TimelineWriter`], not `Clone`): the
//! worker of the stream that owns it, or the mutex of a [`HostTimeline`]
//! (crate::sync::HostTimeline). A backend may share it between threads (the
//! composite device advances from one thread and fails from another), so
//! both writes, `advance` and `fail`, take the timeline's lock and check and
//! change the state under it. Readers ([`Timeline`], cheap to clone) only
//! observe it, without the lock on the fast path.
//!
//! The state keeps one invariant: `reached < failed_from`. `advance` only
//! reaches values below the lowest failure, and `fail` only fails values
//! above the counter; so a point seen reached stays reached, and a point
//! seen failed (`failed_from <= value`) can never be reached. A later
//! failure at a lower value lowers `failed_from` (the failed-from value is
//! the minimum of every failure): every value from it on fails, and a point
//! that had already failed keeps the cause it was first seen with (causes
//! are kept per value range, in the order they were recorded).
//!
//! Sleepers count themselves and check the state under the lock, and the
//! writers change it under the lock and notify after, so no wake-up is lost.
//! The store of `reached` is also the release that publishes everything the
//! completed work wrote; every load that can observe it is an acquire, so
//! data is visible at the first moment a point is seen, by pollers too.

use std::fmt;
use std::time::Instant;

use crate::loom::{Arc, AtomicU64, AtomicUsize, Condvar, Mutex, Ordering};
use crate::sync::failure::{Failure, FailureKind, WaitError};

/// No failure recorded.
const NOT_FAILED: u64 = u64::MAX;

static NEXT_TIMELINE_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Identifies a timeline for the lifetime of the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TimelineId(pub u64);

/// Which memory the counter lives in, i.e. who can wait on it without help.
///
/// Every timeline of this crate is a host-memory counter that any CPU thread
/// can watch; a GPU backend whose counters live in driver objects declares
/// its own domain and waits on host points through a relay.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Domain {
    /// An atomic counter in host memory.
    HostMemory,
    /// A counter owned by a device API (e.g. a Vulkan timeline semaphore),
    /// named by backend and device.
    Device {
        /// The backend's name (`vulkan`).
        backend: &'static str,
        /// The device's name (`vulkan:0`).
        device: String,
    },
}

/// What a point's state is right now.
#[derive(Clone, Debug)]
pub enum PointStatus {
    /// The counter has reached the point; its work's writes are visible.
    Reached,
    /// The point will never be reached.
    Failed(Failure),
    /// Neither yet.
    Pending,
}

pub(crate) struct Shared {
    id: TimelineId,
    label: String,
    domain: Domain,
    reached: AtomicU64,
    failed_from: AtomicU64,
    /// Waiters parked on `wake` (changed and read under `failures`' lock).
    sleepers: AtomicUsize,
    failures: Mutex<Failures>,
    wake: Condvar,
    /// What the owning stream knew of other timelines after some of its
    /// values (vector-clock snapshots, for transitive ordering checks).
    clocks: Mutex<Vec<(u64, std::sync::Arc<Clock>)>>,
}

/// Every failure of a timeline, in the order recorded. Each one's first
/// value is lower than every earlier one's (a failure at or above the
/// lowest so far changes nothing), so the cause of value `v` is that of the
/// first failure recorded whose first value is at or below `v`.
#[derive(Default)]
struct Failures(Vec<(u64, Failure)>);

impl Failures {
    fn cause_of(&self, value: u64) -> Option<&Failure> {
        self.0.iter().find(|(from, _)| *from <= value).map(|(_, cause)| cause)
    }
}

/// For each timeline, the highest value known complete: a vector clock.
pub type Clock = std::collections::HashMap<TimelineId, u64>;

/// Snapshots kept per timeline before old ones are pruned.
const CLOCK_HISTORY: usize = 256;

/// The read side of a timeline: observe and wait; cheap to clone.
#[derive(Clone)]
pub struct Timeline {
    shared: Arc<Shared>,
}

/// The single write side of a timeline.
pub struct TimelineWriter {
    shared: Arc<Shared>,
}

impl Timeline {
    /// Creates a host-memory timeline at 0 and its unique writer.
    pub fn new(label: impl Into<String>) -> (Timeline, TimelineWriter) {
        Self::with_domain(label, Domain::HostMemory)
    }

    /// Creates a timeline in `domain` at 0 and its unique writer.
    pub fn with_domain(label: impl Into<String>, domain: Domain) -> (Timeline, TimelineWriter) {
        let shared = Arc::new(Shared {
            id: TimelineId(NEXT_TIMELINE_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed)),
            label: label.into(),
            domain,
            reached: AtomicU64::new(0),
            failed_from: AtomicU64::new(NOT_FAILED),
            sleepers: AtomicUsize::new(0),
            failures: Mutex::new(Failures::default()),
            wake: Condvar::new(),
            clocks: Mutex::new(Vec::new()),
        });
        (Timeline { shared: shared.clone() }, TimelineWriter { shared })
    }

    /// The process-unique id.
    pub fn id(&self) -> TimelineId {
        self.shared.id
    }

    /// The label given at creation (`cpu:0/stream-1`, `host`).
    pub fn label(&self) -> &str {
        &self.shared.label
    }

    /// Where the counter lives.
    pub fn domain(&self) -> &Domain {
        &self.shared.domain
    }

    /// The value reached so far (an acquire load).
    pub fn reached(&self) -> u64 {
        self.shared.reached.load(Ordering::Acquire)
    }

    /// Records that after value `value` of this timeline its owner knew
    /// `clock` (values only grow, so snapshots come in order).
    pub fn publish_clock(&self, value: u64, clock: std::sync::Arc<Clock>) {
        let mut clocks = self.shared.clocks.lock();
        clocks.push((value, clock));
        if clocks.len() > CLOCK_HISTORY {
            // Points at or below `reached` are ordered by being reached;
            // keep the newest of those snapshots and everything after.
            let reached = self.reached();
            let keep_from = clocks.iter().rposition(|(v, _)| *v <= reached).unwrap_or(0);
            clocks.drain(..keep_from);
        }
    }

    /// How many clock snapshots are kept (the history's bound is tested).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn clock_history(&self) -> usize {
        self.shared.clocks.lock().len()
    }

    /// What this timeline's owner knew after value `value`: the newest
    /// snapshot at or before it.
    pub fn clock_at(&self, value: u64) -> Option<std::sync::Arc<Clock>> {
        let clocks = self.shared.clocks.lock();
        clocks.iter().rev().find(|(v, _)| *v <= value).map(|(_, c)| c.clone())
    }

    /// The first failure recorded on this timeline, if any: the cause of
    /// every value past the last one reached (a later failure at a lower
    /// value fails the values below too, with its own cause).
    pub fn failure(&self) -> Option<Failure> {
        if self.shared.failed_from.load(Ordering::Acquire) == NOT_FAILED {
            return None;
        }
        self.shared.failures.lock().0.first().map(|(_, cause)| cause.clone())
    }

    /// The lowest value that failed, if any: every value from it on fails.
    pub fn failed_from(&self) -> Option<u64> {
        Some(self.shared.failed_from.load(Ordering::Acquire)).filter(|&v| v != NOT_FAILED)
    }

    /// Whether both handles name the same timeline.
    pub fn same_as(&self, other: &Timeline) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    /// The state of point `value` now.
    pub fn status(&self, value: u64) -> PointStatus {
        if self.shared.reached.load(Ordering::Acquire) >= value {
            return PointStatus::Reached;
        }
        if self.shared.failed_from.load(Ordering::Acquire) <= value {
            if let Some(failure) = self.shared.failures.lock().cause_of(value) {
                return PointStatus::Failed(failure.clone());
            }
        }
        PointStatus::Pending
    }

    /// Blocks (condvar/futex) until `value` is reached, fails, or `deadline`
    /// passes.
    pub(crate) fn wait_blocking(
        &self,
        value: u64,
        started: Instant,
        deadline: Option<Instant>,
    ) -> Result<(), WaitError> {
        let shared = &*self.shared;
        let mut failures = shared.failures.lock();
        shared.sleepers.fetch_add(1, Ordering::Relaxed);
        let result = loop {
            // Under the lock the writers cannot change the state, and they
            // notify after they change it, so no wake-up is lost.
            if shared.reached.load(Ordering::Acquire) >= value {
                break Ok(());
            }
            if let Some(cause) = failures.cause_of(value) {
                break Err(self.failed_error(value, cause.clone()));
            }
            match deadline {
                None => {
                    failures = shared.wake.wait(failures);
                }
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        break Err(self.timeout_error(value, started));
                    }
                    failures = shared.wake.wait_timeout(failures, deadline - now);
                }
            }
        };
        shared.sleepers.fetch_sub(1, Ordering::Relaxed);
        result
    }

    pub(crate) fn failed_error(&self, value: u64, cause: Failure) -> WaitError {
        WaitError::Failed { point: format!("{}@{}", self.label(), value), cause }
    }

    pub(crate) fn timeout_error(&self, value: u64, started: Instant) -> WaitError {
        WaitError::Timeout {
            point: format!("{}@{}", self.label(), value),
            waited: started.elapsed(),
            reached: self.reached(),
        }
    }
}

impl fmt::Debug for Timeline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Timeline({} at {})", self.label(), self.reached())
    }
}

impl TimelineWriter {
    /// A reader of the same timeline.
    pub fn timeline(&self) -> Timeline {
        Timeline { shared: self.shared.clone() }
    }

    /// The value reached so far.
    pub fn reached(&self) -> u64 {
        self.shared.reached.load(Ordering::Acquire)
    }

    /// Whether the timeline has failed (from some value on).
    pub fn is_failed(&self) -> bool {
        self.shared.failed_from.load(Ordering::Acquire) != NOT_FAILED
    }

    /// Reaches `value` (and so every value below it), publishing every write
    /// the completed work made (release). A value at or below the counter, or
    /// at or past a recorded failure, changes nothing.
    pub fn advance(&self, value: u64) {
        let shared = &*self.shared;
        let failures = shared.failures.lock();
        if value <= shared.reached.load(Ordering::Relaxed) || value >= shared.failed_from.load(Ordering::Relaxed) {
            return;
        }
        shared.reached.store(value, Ordering::Release);
        let wake = shared.sleepers.load(Ordering::Relaxed) > 0;
        drop(failures);
        if wake {
            shared.wake.notify_all();
        }
    }

    /// Fails every point from `value` on with `cause`, unless `value` is
    /// already reached or already failed. A failure below the lowest one so
    /// far fails the values between them too, with its own cause; values
    /// that had failed keep theirs. Every waiter of a failed point wakes at
    /// once.
    pub fn fail(&self, value: u64, cause: Failure) {
        let shared = &*self.shared;
        let mut failures = shared.failures.lock();
        if value <= shared.reached.load(Ordering::Relaxed) || value >= shared.failed_from.load(Ordering::Relaxed) {
            return;
        }
        failures.0.push((value, cause));
        shared.failed_from.store(value, Ordering::Release);
        let wake = shared.sleepers.load(Ordering::Relaxed) > 0;
        drop(failures);
        if wake {
            shared.wake.notify_all();
        }
    }
}

impl Drop for TimelineWriter {
    /// A timeline whose writer is gone can never move again: every value
    /// not reached by now fails (`Abandoned`), so no point of it stays
    /// pending forever.
    fn drop(&mut self) {
        let next = self.reached().saturating_add(1);
        let origin = format!("{}@{next}", self.shared.label);
        self.fail(
            next,
            Failure::new(
                FailureKind::Abandoned,
                origin,
                "the timeline's writer was dropped before this value was reached",
            ),
        );
    }
}

impl fmt::Debug for TimelineWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TimelineWriter({})", self.shared.label)
    }
}
