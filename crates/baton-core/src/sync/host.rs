//! Host timelines: the host gates streams on its own work with releases.

use crate::loom::{Arc, Mutex};
use crate::sync::failure::{Failure, FailureKind};
use crate::sync::point::SyncPoint;
use crate::sync::timeline::{Timeline, TimelineWriter};

/// A timeline the host advances by signalling [`Release`] tokens.
///
/// Values are handed out in order. Signalling a release reaches its value and
/// every value below it (the counter is monotonic), so an earlier release that
/// is still held becomes a no-op. Dropping a release unsignalled abandons its
/// value: every waiter of that point and of all later ones fails at once
/// (contract rule `H-ABANDON`), which makes release-on-failure automatic.
#[derive(Clone)]
pub struct HostTimeline {
    inner: Arc<HostInner>,
}

struct HostInner {
    timeline: Timeline,
    /// The writer and the last value reserved.
    writer: Mutex<(TimelineWriter, u64)>,
}

impl HostTimeline {
    /// A new host timeline at 0.
    pub fn new(label: impl Into<String>) -> Self {
        let (timeline, writer) = Timeline::new(label);
        HostTimeline { inner: Arc::new(HostInner { timeline, writer: Mutex::new((writer, 0)) }) }
    }

    /// The read side, to make points and wait.
    pub fn timeline(&self) -> &Timeline {
        &self.inner.timeline
    }

    /// Reserves the next value and returns the token that reaches it.
    pub fn reserve(&self) -> Release {
        let mut guard = self.inner.writer.lock();
        guard.1 += 1;
        Release { host: self.inner.clone(), value: guard.1, done: false }
    }
}

/// The right, and the duty, to reach one point of a host timeline.
#[must_use = "dropping a Release unsignalled abandons its point"]
pub struct Release {
    host: Arc<HostInner>,
    value: u64,
    done: bool,
}

impl Release {
    /// The point this token reaches.
    pub fn point(&self) -> SyncPoint {
        self.host.timeline.point(self.value)
    }

    /// Reaches the point: everything the host wrote before this call is
    /// visible to whoever sees the point reached.
    pub fn signal(mut self) {
        self.done = true;
        let guard = self.host.writer.lock();
        guard.0.advance(self.value);
    }

    /// Fails the point (and every later one) with `message` now.
    pub fn fail(mut self, message: impl Into<String>) {
        self.done = true;
        self.abandon(FailureKind::WorkFailed, message.into());
    }

    /// Fails the point (and every later one) with `cause`, another
    /// point's first cause, so that whoever waits here sees that cause
    /// (`Failure::same_cause`), as a stream that waited on it would.
    pub fn fail_with(mut self, cause: Failure) {
        self.done = true;
        self.host.writer.lock().0.fail(self.value, cause);
    }

    fn abandon(&self, kind: FailureKind, message: String) {
        let origin = format!("{}@{}", self.host.timeline.label(), self.value);
        let cause = Failure::new(kind, origin, message);
        self.host.writer.lock().0.fail(self.value, cause);
    }
}

impl Drop for Release {
    fn drop(&mut self) {
        if !self.done {
            self.abandon(FailureKind::Abandoned, "its Release was dropped without being signalled".into());
        }
    }
}
