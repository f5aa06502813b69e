//! Vulkan streams: one worker thread per stream runs its queue in order.
//!
//! Each item completes value n of the stream's timeline semaphore: device
//! work (copies, computations, native waits) as one batch that waits on the
//! stream's previous value and signals n; host work (mapped writes and
//! reads, host functions, waits on host points) on the worker, which then
//! signals n from the host. The worker waits for each item to complete
//! before it starts the next, so a failed item stops the stream before
//! anything after it runs (`E-STICKY`), and then, with the item dropped
//! (`D-RETURN`), advances the mirror of the timeline that users wait on.
//!
//! Waits on points of this device's other streams are native: a batch that
//! waits on their semaphore. Because the device has one queue, such a wait
//! is held back on the host until its signal is submitted (see
//! `timeline`). Waits on host-memory points (host timelines, CPU streams)
//! block the worker; points of other devices go through the core's relay.

use std::sync::Arc;

use baton_core::backend::{BufferRange, RawStream, StreamError, StreamOp};
use baton_core::sync::{Domain, SyncPoint, Timeline};

use crate::device_shared::DeviceShared;
use crate::error::VulkanError;
use crate::queue::WorkQueue;
use crate::timeline::StreamTimeline;
use crate::worker::{StreamShared, Worker};

/// A Vulkan stream; its worker thread lives until the stream is dropped and
/// its queue is drained.
pub struct VulkanStream {
    shared: Arc<StreamShared>,
    device: Arc<DeviceShared>,
}

impl VulkanStream {
    pub(crate) fn spawn(device: Arc<DeviceShared>, index: usize) -> Result<VulkanStream, VulkanError> {
        let label = format!("{}/stream-{index}", device.info.name);
        let (timeline, writer) = StreamTimeline::new(&device.ctx, label.clone())?;
        device.register(&timeline);
        let shared = Arc::new(StreamShared { label: label.clone(), timeline, queue: WorkQueue::new() });
        let worker = Worker::new(shared.clone(), device.clone(), writer)?;
        let count = crate::exit::WORKERS.count();
        std::thread::Builder::new()
            .name(label)
            .spawn(move || {
                // Counted from before the spawn until after the worker (and
                // its device handle, maybe the device's last) is dropped:
                // process exit waits for it (`exit`).
                count.on_worker_thread();
                let _count = count;
                worker.run();
            })
            .map_err(|e| VulkanError::Unsuitable {
                device: device.info.name.clone(),
                missing: format!("a thread: {e}"),
            })?;
        Ok(VulkanStream { shared, device })
    }
}

// SAFETY: the worker runs items in FIFO order, each to completion, and
// advances value n only after item n ran and was dropped, with the
// timeline's release store (after observing the semaphore, whose batches end
// with a barrier to the host); `Wait` items complete only after their point;
// failures fail the timeline from the failed value on and later items are
// dropped unrun; `submit` only pushes.
unsafe impl RawStream for VulkanStream {
    fn label(&self) -> &str {
        &self.shared.label
    }

    fn timeline(&self) -> &Timeline {
        &self.shared.timeline.mirror
    }

    fn can_wait_on(&self, point: &SyncPoint) -> bool {
        let domain = point.timeline().domain();
        *domain == Domain::HostMemory
            || (*domain == self.device.ctx.domain && self.device.timeline(point.timeline().id()).is_some())
    }

    fn can_access(&self, range: &BufferRange) -> bool {
        crate::memory::gpu_side(&self.device.ctx, range).is_some() || range.buffer().raw().host_ptr().is_some()
    }

    fn can_compute_on(&self, range: &BufferRange) -> bool {
        // Shaders bind buffers of (or imported into) this device only.
        crate::memory::gpu_side(&self.device.ctx, range).is_some()
    }

    unsafe fn submit(&self, op: StreamOp) -> Result<u64, StreamError> {
        self.shared.queue.push(op).map_err(|_| StreamError::Closed(self.shared.label.clone()))
    }
}

impl Drop for VulkanStream {
    fn drop(&mut self) {
        // The worker drains what is queued, then exits; nobody waits here
        // (`D-NOBLOCK`), but process exit does (`exit`).
        self.shared.queue.close();
    }
}
