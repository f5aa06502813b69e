//! A stream's worker thread: runs the stream's items in order, each to
//! completion, on the device (one batch per item) or on the host, and
//! completes or fails the stream's timeline value by value (see `stream`).
//! Transfers (`transfer`) extend it.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ash::vk;
use baton_core::backend::{Bindings, StreamError, StreamOp};
use baton_core::graph::Graph;
use baton_core::sync::{default_wait_deadline, Failure, FailureKind, SyncPoint, TimelineWriter, WaitPolicy, WaitUntil};

use crate::commands::Commands;
use crate::device_shared::DeviceShared;
use crate::error::VulkanError;
use crate::exec::Executor;
use crate::memory::VulkanBuffer;
use crate::queue::WorkQueue;
use crate::timeline::{HoldBack, StreamTimeline};

/// What a stream and its worker share: the label, the timeline and the
/// queue of items.
pub(crate) struct StreamShared {
    pub(crate) label: String,
    pub(crate) timeline: Arc<StreamTimeline>,
    pub(crate) queue: WorkQueue<StreamOp>,
}

/// The worker's state: its stream, its command buffer and its memory.
pub(crate) struct Worker {
    shared: Arc<StreamShared>,
    pub(crate) device: Arc<DeviceShared>,
    writer: TimelineWriter,
    pub(crate) commands: Commands,
    /// Host-visible memory for transfers to and from unmapped buffers.
    pub(crate) staging: Option<VulkanBuffer>,
    executor: Executor,
}

impl Worker {
    /// The worker of the stream `shared` of `device`, which completes the
    /// stream's values through `writer`.
    pub(crate) fn new(
        shared: Arc<StreamShared>,
        device: Arc<DeviceShared>,
        writer: TimelineWriter,
    ) -> Result<Worker, VulkanError> {
        let commands = Commands::new(&device.ctx)?;
        let executor = Executor::new(&device.ctx)?;
        Ok(Worker { shared, device, writer, commands, staging: None, executor })
    }

    /// Runs the queue's items in order until the queue is closed and
    /// drained.
    pub(crate) fn run(mut self) {
        while let Some((value, op)) = self.shared.queue.pop() {
            if self.writer.is_failed() {
                // Its value failed with the stream; drop it unrun.
                drop(op);
                continue;
            }
            let op_name = op.name();
            let result = catch_unwind(AssertUnwindSafe(|| self.execute(op, value)));
            // `op` was moved into `execute` and is dropped by now, so its host
            // slots and buffers are released before the point (`D-RETURN`).
            let failure = match result {
                Ok(Ok(())) => {
                    self.writer.advance(value);
                    continue;
                }
                Ok(Err(failure)) => failure,
                Err(panic) => {
                    let message = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "a panic".into());
                    Failure::new(FailureKind::WorkFailed, self.origin(value), format!("{op_name}: {message}"))
                }
            };
            self.shared.timeline.failed(value, failure.clone());
            self.writer.fail(value, failure);
        }
    }

    pub(crate) fn origin(&self, value: u64) -> String {
        format!("{}@{value}", self.shared.label)
    }

    /// A failure of item `value` with `message`.
    pub(crate) fn failure(&self, value: u64, message: impl Into<String>) -> Failure {
        Failure::new(FailureKind::WorkFailed, self.origin(value), message)
    }

    /// A failed Vulkan call of item `value`.
    pub(crate) fn vk_failure(&self, value: u64, what: &str, result: vk::Result) -> Failure {
        match self.device.ctx.lost() {
            Some(lost) => lost,
            None => self.failure(value, format!("{what}: {result}")),
        }
    }

    fn execute(&mut self, op: StreamOp, value: u64) -> Result<(), Failure> {
        if let Some(lost) = self.device.ctx.lost() {
            return Err(lost);
        }
        match op {
            StreamOp::Wait { point, policy, deadline, until } => self.wait(&point, policy, deadline, until, value),
            StreamOp::HostFn(f) => {
                f().map_err(|m| self.failure(value, format!("host function: {m}")))?;
                self.finish_on_host(value)
            }
            StreamOp::Write { dst, src } => self.write(&dst, &*src, value),
            StreamOp::Read { src, dst } => self.read(&src, &*dst, value),
            StreamOp::Copy { src, dst } => self.copy(&src, &dst, value),
            StreamOp::Compute { bindings } => self.compute(bindings.graph(), &bindings, value),
        }
    }

    /// Computes `graph` as item `value`: records, runs, checks the status.
    fn compute(&mut self, graph: &Arc<Graph>, bindings: &Bindings, value: u64) -> Result<(), Failure> {
        let ctx = self.device.ctx.clone();
        let origin = self.origin(value);
        let as_failure = |e: StreamError| Failure::new(FailureKind::WorkFailed, origin.clone(), e.to_string());
        self.executor.status_words().fill(0);
        let cmd = self.commands.begin().map_err(|r| self.vk_failure(value, "recording a computation", r))?;
        let device = self.device.clone();
        self.executor.record(&ctx, &device.pipelines, cmd, graph, bindings).map_err(as_failure)?;
        let cmd = self.commands.end().map_err(|r| self.vk_failure(value, "recording a computation", r))?;
        self.run_on_device(Some(cmd), &[], value)?;
        match self.executor.take_error(graph, &ctx.name) {
            Some(e) => Err(as_failure(e)),
            None => Ok(()),
        }
    }

    /// Completes host work: signals `value` from the host. Every earlier
    /// value is reached (each item completes before the next starts).
    pub(crate) fn finish_on_host(&self, value: u64) -> Result<(), Failure> {
        self.shared.timeline.signal_host(value).map_err(|r| self.vk_failure(value, "vkSignalSemaphore", r))
    }

    /// Submits `command` (and `waits`) as item `value`'s batch and blocks
    /// until it has run, or until the stream's wait deadline
    /// ([`default_wait_deadline`]) passes: a hung device fails the stream
    /// with `TimedOut` (`W-BOUND`).
    pub(crate) fn run_on_device(
        &self,
        command: Option<vk::CommandBuffer>,
        waits: &[(vk::Semaphore, u64)],
        value: u64,
    ) -> Result<(), Failure> {
        let until = default_wait_deadline().map(|d| Instant::now() + d);
        self.run_batch(command, waits, value, until).map_err(|e| {
            e.unwrap_or_else(|| {
                let message = format!("the device did not complete the batch within {:?}", default_wait_deadline());
                Failure::new(FailureKind::TimedOut, self.origin(value), message)
            })
        })
    }

    /// As [`run_on_device`](Self::run_on_device) with the deadline `until`;
    /// `Err(None)` when it passed.
    ///
    /// When it passes, the stream's timeline fails at once (so nobody
    /// waits on it any longer), but the worker still waits for the batch
    /// without a bound before it returns: the item's buffers must stay
    /// alive while the device may still use them, and the semaphore the
    /// batch signals may not be destroyed before it. A device that never
    /// finishes holds this worker (and its memory) for good, which is a
    /// leak, never a use after free.
    fn run_batch(
        &self,
        command: Option<vk::CommandBuffer>,
        waits: &[(vk::Semaphore, u64)],
        value: u64,
        until: Option<Instant>,
    ) -> Result<(), Option<Failure>> {
        let own = self.shared.timeline.semaphore;
        let mut all = vec![(own, value - 1)];
        all.extend_from_slice(waits);
        let vk_failure = |what, r| Some(self.vk_failure(value, what, r));
        self.device.ctx.submit(command, &all, (own, value)).map_err(|r| vk_failure("vkQueueSubmit2", r))?;
        self.shared.timeline.submitted(value);
        match self.shared.timeline.wait_reached(value, until) {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(r) => return Err(vk_failure("vkWaitSemaphores", r)),
        }
        let message = format!("{}@{value} did not complete within its deadline", self.shared.label);
        let failure = Failure::new(FailureKind::TimedOut, self.origin(value), message.clone());
        // The device is hung (a batch's waits are on signals already
        // submitted): every stream of it fails from its next item on.
        self.device.ctx.lose(&message);
        self.shared.timeline.failed(value, failure.clone());
        self.writer.fail(value, failure);
        match self.shared.timeline.wait_reached(value, None) {
            Ok(_) => Err(None),
            Err(r) => Err(vk_failure("vkWaitSemaphores", r)),
        }
    }

    fn wait(
        &self,
        point: &SyncPoint,
        policy: WaitPolicy,
        deadline: Option<Duration>,
        until: WaitUntil,
        value: u64,
    ) -> Result<(), Failure> {
        let started = Instant::now();
        let poll_bound = match policy {
            WaitPolicy::Poll { bound } => Some(bound),
            _ => None,
        };
        let bound = match (poll_bound, deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let ends = bound.map(|b| started + b);
        let native = (*point.timeline().domain() == self.device.ctx.domain)
            .then(|| self.device.timeline(point.timeline().id()))
            .flatten();
        let Some(other) = native else {
            // A host-memory point: the worker waits for it.
            policy.wait_in_stream(point, deadline, until, &self.origin(value))?;
            return self.finish_on_host(value);
        };
        let timed_out = |what: &str| {
            Failure::new(
                FailureKind::TimedOut,
                self.origin(value),
                format!("{what} {point} within the wait's bound ({:?})", bound.unwrap_or_default()),
            )
        };
        // The single-queue rule: hold the wait back until its signal is in
        // the queue.
        match other.wait_submitted(point.value(), ends) {
            Ok(()) => {}
            // Its signal will never come: the wait is over, or it fails.
            Err(HoldBack::Failed(_)) if until == WaitUntil::Settled => return self.finish_on_host(value),
            Err(HoldBack::Failed(cause)) => return Err(cause),
            Err(HoldBack::TimedOut) => return Err(timed_out("the signal was not submitted for")),
        }
        self.run_batch(None, &[(other.semaphore, point.value())], value, ends)
            .map_err(|e| e.unwrap_or_else(|| timed_out("the device did not reach")))?;
        // The semaphore is reached; the point may still have failed (an
        // error found after its batch ran), which fails this stream too.
        let left = ends.map(|u| u.saturating_duration_since(Instant::now()));
        policy.wait_in_stream(point, left, until, &self.origin(value))
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        tracing::trace!("{} worker exits", self.shared.label);
    }
}
