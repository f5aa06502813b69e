//! A submitted run as the caller holds it: its points, and a completion
//! point the caller can cancel.
//!
//! Cancelling (or dropping) a run that has not finished abandons its
//! completion point at once: everyone waiting on the run fails with
//! `FailureKind::Abandoned` instead of waiting. Work already queued on the
//! devices is not taken back (a device queue cannot be edited); it runs to
//! its end, so the streams, the crossing buffers and later runs are
//! unaffected and nothing leaks, but the cancelled run's outputs must not be
//! read.

use baton_core::loom::Mutex;
use std::sync::Arc;

use baton_core::sync::{HostTimeline, Release, SyncPoint, Timeline, WaitError};

/// The points of one submitted run.
#[derive(Clone, Debug)]
pub struct RunPoints {
    /// The point of each split's computation.
    pub splits: Vec<SyncPoint>,
    /// Reached when the whole run is done (its last split); in a plan over
    /// several processes, when this process's part is (its last split,
    /// send or receive). A split of another process has its stand-in's
    /// point in `splits`, which orders nothing.
    pub done: SyncPoint,
    /// Points of the work that reads the caller's tensors (inputs, and
    /// weights): the caller may rewrite an input once these are reached, by
    /// having the rewriting stream wait on them.
    pub inputs_read: Vec<SyncPoint>,
}

/// A run of a plan, submitted.
pub struct Run {
    points: RunPoints,
    /// Each named output of the graph and the point of the split that
    /// computes it.
    outputs: Vec<(String, SyncPoint)>,
    finished: SyncPoint,
    release: Arc<Mutex<Option<Release>>>,
}

impl Run {
    /// Wraps `points` with a completion that the stream of the run's last
    /// split signals through `signal_on` (a host function queued after it).
    pub(crate) fn new(
        points: RunPoints,
        outputs: Vec<(String, SyncPoint)>,
        signal_on: &baton_core::backend::Stream,
    ) -> Result<Run, baton_core::backend::StreamError> {
        // One host timeline per run: releases of one timeline reach every
        // earlier value, and runs may finish out of order.
        let host = HostTimeline::new("run");
        let release = host.reserve();
        let finished = release.point();
        let release = Arc::new(Mutex::new(Some(release)));
        let completion = Completion { release: release.clone(), stream: signal_on.timeline().clone() };
        signal_on.host_fn(move || {
            completion.signal();
            Ok(())
        })?;
        Ok(Run { points, outputs, finished, release })
    }

    /// The points of the run's splits and reads.
    pub fn points(&self) -> &RunPoints {
        &self.points
    }

    /// The point after which output `name` holds this run's result: the
    /// point of the split that computes it, not of the whole run, so a
    /// caller reading it waits only for what it needs. `None` for a name
    /// that is not an output.
    pub fn output(&self, name: &str) -> Option<&SyncPoint> {
        self.outputs.iter().find(|(n, _)| n == name).map(|(_, p)| p)
    }

    /// Reached when the run is done; fails at once if it is cancelled, or
    /// with the first cause of the stream of its last split if that fails.
    pub fn point(&self) -> &SyncPoint {
        &self.finished
    }

    /// Waits until the run is done (an error if it was cancelled or failed).
    pub fn wait(&self) -> Result<(), WaitError> {
        self.points.done.wait()?;
        self.finished.wait()
    }

    /// Cancels the run if it has not finished: see the module docs.
    pub fn cancel(self) {
        drop(self);
    }
}

/// The run's completion, queued on the stream of its last split: reaches
/// the run's point when it runs; when the stream fails and drops it unrun,
/// fails the point at once with the stream's first cause, so every waiter
/// on a failed run fails with it (not only once the `Run` is dropped).
struct Completion {
    release: Arc<Mutex<Option<Release>>>,
    stream: Timeline,
}

impl Completion {
    fn take(&self) -> Option<Release> {
        self.release.lock().take()
    }

    fn signal(self) {
        if let Some(r) = self.take() {
            r.signal();
        }
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        // After `signal` the slot is empty; otherwise the stream dropped
        // this unrun, which it does only once it has failed (or it was
        // closed, which drops the release below as abandoned).
        if let Some(r) = self.take() {
            match self.stream.failure() {
                Some(cause) => r.fail_with(cause),
                None => drop(r),
            }
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        // Dropping the release unsignalled abandons the completion point;
        // once the run finished, the slot is empty and this does nothing.
        let abandoned = self.release.lock().take();
        drop(abandoned);
    }
}
