//! A timeline: a monotonic 64-bit counter that work advances as it completes.
//!
//! # Protocol
//!
//! A timeline has exactly one writer ([`TimelineWriter`], not `Clone`): the
//! worker of the stream that owns it, or the mutex of a [`HostTimeline`]
//! (crate::sync::HostTimeline). Readers ([`Timeline`], cheap to clone) only
//! observe it. The writer either advances the counter (`reached`) or fails the
//! timeline from some value on; once failed, it never advances past the
//! failure, so a point's fate, reached or failed, never changes once seen.
//!
//! Waking sleepers without losing a wake-up is a Dekker handshake: the writer
//! swaps `reached` then reads `sleepers`; a sleeper increments `sleepers`
//! (holding the lock) then reads `reached`. Every one of these four accesses
//! is a read-modify-write (reads are `fetch_add(0)`): an RMW reads the value
//! just before it in its variable's modification order and, being acq-rel,
//! synchronises with the RMW it reads from. So whichever side comes second
//! on either variable sees the other's first access, even under
//! acquire/release alone (which is all loom models of `SeqCst`). When the
//! writer sees a sleeper it takes the lock before notifying, which it can
//! only get once the sleeper is inside `Condvar::wait`. The store of
//! `reached` is also the release that publishes everything the completed
//! work wrote; every load that can observe it is an acquire, so data is
//! visible at the first moment a point is seen.

use std::fmt;
use std::time::Instant;

use crate::loom::{lock, Arc, AtomicU64, AtomicUsize, Condvar, Mutex, Ordering};
use crate::sync::failure::{Failure, WaitError};

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
    sleepers: AtomicUsize,
    failure: Mutex<Option<Failure>>,
    wake: Condvar,
    /// What the owning stream knew of other timelines after some of its
    /// values (vector-clock snapshots, for transitive ordering checks).
    clocks: Mutex<Vec<(u64, std::sync::Arc<Clock>)>>,
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
            failure: Mutex::new(None),
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

    /// The point `value` of this timeline. Value 0 is reached from the start.
    pub fn point(&self, value: u64) -> crate::sync::SyncPoint {
        crate::sync::SyncPoint::new(self.clone(), value)
    }

    /// Records that after value `value` of this timeline its owner knew
    /// `clock` (values only grow, so snapshots come in order).
    pub fn publish_clock(&self, value: u64, clock: std::sync::Arc<Clock>) {
        let mut clocks = lock(&self.shared.clocks);
        clocks.push((value, clock));
        if clocks.len() > CLOCK_HISTORY {
            // Points at or below `reached` are ordered by being reached;
            // keep the newest of those snapshots and everything after.
            let reached = self.reached();
            let keep_from = clocks.iter().rposition(|(v, _)| *v <= reached).unwrap_or(0);
            clocks.drain(..keep_from);
        }
    }

    /// What this timeline's owner knew after value `value`: the newest
    /// snapshot at or before it.
    pub fn clock_at(&self, value: u64) -> Option<std::sync::Arc<Clock>> {
        let clocks = lock(&self.shared.clocks);
        clocks.iter().rev().find(|(v, _)| *v <= value).map(|(_, c)| c.clone())
    }

    /// The first failure of this timeline, if any.
    pub fn failure(&self) -> Option<Failure> {
        if self.shared.failed_from.load(Ordering::Acquire) == NOT_FAILED {
            return None;
        }
        lock(&self.shared.failure).clone()
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
            if let Some(failure) = lock(&self.shared.failure).clone() {
                return PointStatus::Failed(failure);
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
        let mut failure = lock(&shared.failure);
        shared.sleepers.fetch_add(1, Ordering::SeqCst);
        let result = loop {
            if shared.reached.fetch_add(0, Ordering::SeqCst) >= value {
                break Ok(());
            }
            if shared.failed_from.load(Ordering::SeqCst) <= value {
                if let Some(cause) = failure.clone() {
                    break Err(self.failed_error(value, cause));
                }
            }
            match deadline {
                None => {
                    failure = match shared.wake.wait(failure) {
                        Ok(guard) => guard,
                        Err(poisoned) => poisoned.into_inner(),
                    };
                }
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        break Err(self.timeout_error(value, started));
                    }
                    failure = match shared.wake.wait_timeout(failure, deadline - now) {
                        Ok((guard, _)) => guard,
                        Err(poisoned) => poisoned.into_inner().0,
                    };
                }
            }
        };
        shared.sleepers.fetch_sub(1, Ordering::SeqCst);
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
        self.shared.reached.load(Ordering::Relaxed)
    }

    /// Whether the timeline has failed.
    pub fn is_failed(&self) -> bool {
        self.shared.failed_from.load(Ordering::Relaxed) != NOT_FAILED
    }

    /// Reaches `value` (and so every value below it), publishing every write
    /// the completed work made (release). A value at or below the counter, or
    /// at or past a recorded failure, changes nothing.
    pub fn advance(&self, value: u64) {
        let shared = &*self.shared;
        // Only this writer stores `reached` and `failed_from`, so these loads
        // see its own latest stores.
        if value <= shared.reached.load(Ordering::Relaxed) || value >= shared.failed_from.load(Ordering::Relaxed) {
            return;
        }
        shared.reached.swap(value, Ordering::SeqCst);
        if shared.sleepers.fetch_add(0, Ordering::SeqCst) > 0 {
            // Taking the lock orders this notify after any sleeper that
            // counted itself has entered `wait` (see the module protocol).
            drop(lock(&shared.failure));
            shared.wake.notify_all();
        }
    }

    /// Fails every point from `value` on with `cause`, unless `value` is
    /// already reached. Only the first failure is kept; every waiter of a
    /// failed point wakes at once.
    pub fn fail(&self, value: u64, cause: Failure) {
        let shared = &*self.shared;
        if value <= shared.reached.load(Ordering::Relaxed) {
            return;
        }
        {
            let mut failure = lock(&shared.failure);
            if failure.is_some() {
                return;
            }
            *failure = Some(cause);
            shared.failed_from.store(value, Ordering::SeqCst);
        }
        shared.wake.notify_all();
    }
}

impl fmt::Debug for TimelineWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TimelineWriter({})", self.shared.label)
    }
}
