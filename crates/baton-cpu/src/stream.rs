//! CPU streams: one worker thread per stream runs its queue in order.
//!
//! The worker pops items FIFO. A `Wait` blocks the worker (not the host) with
//! the stream's wait policy. Every other item runs to completion, is dropped
//! (returning host buffers and buffer handles), and only then is the
//! timeline advanced, with a release store that publishes the item's writes.
//! After a failure the timeline fails from the failed item's value; the
//! worker drops later items unrun, and their values are failed already.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use baton_core::backend::{BufferRange, RawStream, StreamError, StreamOp};
use baton_core::sync::{Domain, Failure, FailureKind, SyncPoint, Timeline, TimelineWriter, WaitPolicy};

use crate::device_shared::CpuDeviceShared;
use crate::exec::Executor;
use crate::queue::WorkQueue;

/// How long an idle worker with the `poll` policy polls its queue before it
/// parks: an idle device does not burn its core for the whole poll bound.
const IDLE_POLL: Duration = Duration::from_micros(200);

struct StreamShared {
    label: String,
    timeline: Timeline,
    queue: WorkQueue<StreamOp>,
}

/// A CPU stream; its worker thread lives until the stream is dropped and its
/// queue is drained.
pub struct CpuStream {
    shared: Arc<StreamShared>,
    device: Arc<CpuDeviceShared>,
}

impl CpuStream {
    pub(crate) fn spawn(device: Arc<CpuDeviceShared>, index: usize, policy: WaitPolicy) -> std::io::Result<CpuStream> {
        let label = format!("{}/stream-{index}", device.info.name);
        let (timeline, writer) = Timeline::new(label.clone());
        let shared = Arc::new(StreamShared { label: label.clone(), timeline, queue: WorkQueue::new() });
        let worker_shared = shared.clone();
        let worker_device = device.clone();
        std::thread::Builder::new().name(label).spawn(move || {
            if let Some(&core) = worker_device.info.cores.first() {
                crate::topology::pin_current_thread(core);
            }
            Worker { shared: worker_shared, device: worker_device, writer, policy }.run()
        })?;
        Ok(CpuStream { shared, device })
    }
}

struct Worker {
    shared: Arc<StreamShared>,
    device: Arc<CpuDeviceShared>,
    writer: TimelineWriter,
    policy: WaitPolicy,
}

impl Worker {
    /// How long the idle worker polls for new work before parking.
    fn idle_spin(&self) -> Duration {
        match self.policy {
            WaitPolicy::Block => Duration::ZERO,
            WaitPolicy::SpinThenBlock { spin } => spin,
            WaitPolicy::Poll { bound } => bound.min(IDLE_POLL),
        }
    }

    fn run(self) {
        let mut executor = Executor::new(self.device.clone());
        let spin = self.idle_spin();
        let mut taken = 0u64;
        loop {
            let Some((value, op)) = self.shared.queue.pop(&mut taken, spin) else { return };
            if self.writer.is_failed() {
                // Its value failed with the stream; drop it unrun.
                drop(op);
                continue;
            }
            let op_name = op.name();
            let result = catch_unwind(AssertUnwindSafe(|| self.execute(op, &mut executor)));
            // `op` was moved into `execute` and is dropped by now, so its host
            // slots and buffers are released before the point (rule D-RETURN).
            match result {
                Ok(Ok(())) => self.writer.advance(value),
                Ok(Err(failure)) => self.writer.fail(value, failure),
                Err(panic) => {
                    let message = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "a kernel panicked".into());
                    let origin = format!("{}@{value}", self.shared.label);
                    self.writer
                        .fail(value, Failure::new(FailureKind::WorkFailed, origin, format!("{op_name}: {message}")));
                }
            }
        }
    }

    fn execute(&self, op: StreamOp, executor: &mut Executor) -> Result<(), Failure> {
        let origin = || format!("{}@{}", self.shared.label, self.writer.reached() + 1);
        match op {
            StreamOp::HostFn(f) => f().map_err(|message| {
                Failure::new(FailureKind::WorkFailed, origin(), format!("host function: {message}"))
            }),
            StreamOp::Wait { point, policy, deadline, until } => {
                policy.wait_in_stream(&point, deadline, until, &origin())
            }
            StreamOp::Write { dst, src } => {
                let mut copied = false;
                src.with_bytes(&mut |bytes| {
                    if bytes.len() == dst.len() {
                        // SAFETY: `dst` lies in a CPU buffer (checked by
                        // can_access) of at least `range.end` bytes (checked
                        // when the range was built); no unordered work touches
                        // it (RawStream::submit's contract); `bytes` is host
                        // memory the slot lends us, disjoint from device memory.
                        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), host_ptr(&dst), bytes.len()) };
                        copied = true;
                    }
                });
                self.check_copied(copied, "write", origin)
            }
            StreamOp::Read { src, dst } => {
                let mut copied = false;
                dst.with_bytes_mut(&mut |bytes| {
                    if bytes.len() == src.len() {
                        // SAFETY: as for Write, with the roles swapped.
                        unsafe { std::ptr::copy_nonoverlapping(host_ptr(&src), bytes.as_mut_ptr(), bytes.len()) };
                        copied = true;
                    }
                });
                self.check_copied(copied, "read", origin)
            }
            StreamOp::Copy { src, dst } => {
                if src.len() != dst.len() {
                    return self.check_copied(false, "copy", origin);
                }
                // SAFETY: both ranges are in host-addressable buffers and in
                // bounds (checked at submission); they may be the same buffer,
                // so `copy` (memmove) is used; no unordered work touches them.
                unsafe { std::ptr::copy(host_ptr(&src), host_ptr(&dst), src.len()) };
                Ok(())
            }
            StreamOp::Compute { bindings } => executor
                .compute(bindings.graph(), &bindings)
                .map_err(|e| Failure::new(FailureKind::WorkFailed, origin(), e.to_string())),
        }
    }

    fn check_copied(&self, copied: bool, what: &str, origin: impl Fn() -> String) -> Result<(), Failure> {
        if copied {
            Ok(())
        } else {
            Err(Failure::new(
                FailureKind::WorkFailed,
                origin(),
                format!("{what}: the host buffer was gone or changed size"),
            ))
        }
    }
}

/// The host address of a range's first byte.
///
/// # Safety
///
/// The range's buffer must be host-addressable (CPU streams only accept such
/// ranges, see `can_access`).
pub(crate) unsafe fn host_ptr(range: &BufferRange) -> *mut u8 {
    match range.buffer().raw().host_ptr() {
        // SAFETY: the range was checked to lie inside the buffer.
        Some(base) => unsafe { base.as_ptr().add(range.start()) },
        None => std::ptr::null_mut(),
    }
}

// SAFETY: the worker runs items in FIFO order and advances value n only after
// item n ran and was dropped, with the timeline's release store; `Wait` items
// block the worker until their point; failures fail the timeline from the
// failed value on and later items are dropped unrun; `submit` only pushes.
unsafe impl RawStream for CpuStream {
    fn label(&self) -> &str {
        &self.shared.label
    }

    fn timeline(&self) -> &Timeline {
        &self.shared.timeline
    }

    fn can_wait_on(&self, point: &SyncPoint) -> bool {
        *point.timeline().domain() == Domain::HostMemory
    }

    fn can_access(&self, range: &BufferRange) -> bool {
        range.buffer().raw().host_ptr().is_some()
    }

    unsafe fn submit(&self, op: StreamOp) -> Result<u64, StreamError> {
        let _ = &self.device;
        self.shared.queue.push(op).map_err(|_| StreamError::Closed(self.shared.label.clone()))
    }
}

impl Drop for CpuStream {
    fn drop(&mut self) {
        // The worker drains what is queued, then exits; nobody waits here
        // (rule D-NOBLOCK).
        self.shared.queue.close();
    }
}
