//! A device of another rank, as this rank sees it: a stand-in that holds
//! no memory and runs nothing, so every rank builds the same plan over the
//! same device list and runs only its own devices' splits.

use std::any::Any;
use std::ptr::NonNull;
use std::sync::Arc;

use baton_core::backend::{
    Buffer, BufferRange, Device, DeviceError, DeviceInfo, DeviceKind, FileRange, RawBuffer, RawStream, Stream,
    StreamError, StreamOp,
};
use baton_core::graph::Op;
use baton_core::loom::Mutex;
use baton_core::sync::{SyncPoint, Timeline, TimelineWriter};
use baton_core::DType;

/// A stand-in for a device of rank `rank`: the scheduler plans with it as
/// with any device (`Runner::set_remote` tells it which devices are
/// remote), but its buffers hold no memory and its streams run nothing.
///
/// Its points are reached as soon as their item is queued and order
/// nothing: a stream of this rank never orders itself after one (rule
/// `W-FOREIGN` for a remote point), only after the point of a receive.
pub struct RemoteDevice {
    info: DeviceInfo,
    rank: usize,
}

impl RemoteDevice {
    /// The stand-in for `name` (`cpu@1`) on `rank`, whose kernels accept
    /// `weight_types` (what the owner rank reported, so placement decides
    /// as it does there).
    pub fn new(name: impl Into<String>, rank: usize, weight_types: Vec<DType>) -> Arc<RemoteDevice> {
        let name = name.into();
        let info = DeviceInfo {
            description: format!("{name}: a device of rank {rank}"),
            name,
            backend: "remote",
            kind: DeviceKind::Cpu,
            threads: 0,
            cores: Vec::new(),
            memory_bytes: u64::MAX,
            features: Vec::new(),
            weight_types,
            waits_on_host_points: true,
        };
        Arc::new(RemoteDevice { info, rank })
    }

    /// The rank that owns the device.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Whether `buffer` is a stand-in's (holds no memory).
    pub fn is_stand_in(buffer: &Buffer) -> bool {
        buffer.raw().as_any().is::<NoMemory>()
    }
}

impl Device for RemoteDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn alloc(&self, bytes: usize) -> Result<Buffer, DeviceError> {
        Ok(Buffer::new(Box::new(NoMemory { len: bytes, device: self.info.name.clone() })))
    }

    /// A stand-in maps nothing: another rank holds these bytes, so this
    /// rank's share of a tensor-parallel weight costs it no memory.
    fn map_file(&self, range: FileRange<'_>) -> Result<Option<Buffer>, DeviceError> {
        let stand_in = NoMemory { len: range.len, device: self.info.name.clone() };
        Ok(Some(Buffer::new_sealed_weights(Box::new(stand_in))))
    }

    fn new_stream(&self) -> Result<Stream, DeviceError> {
        let (timeline, writer) = Timeline::new(format!("{}/stand-in", self.info.name));
        let label = format!("{}/stand-in", self.info.name);
        Ok(Stream::new(Arc::new(StandInStream { label, timeline, writer: Mutex::new((writer, 0)) })))
    }

    fn supports(&self, op: &Op, dtype: DType) -> bool {
        match op {
            Op::MatMul | Op::GetRows => self.info.weight_types.contains(&dtype),
            _ => true,
        }
    }
}

/// A buffer of a given size with no memory behind it.
struct NoMemory {
    len: usize,
    device: String,
}

// SAFETY: `len` never changes and `host_ptr` is `None`: there is no memory
// for anyone to read or write.
unsafe impl RawBuffer for NoMemory {
    fn len(&self) -> usize {
        self.len
    }

    fn device(&self) -> &str {
        &self.device
    }

    fn host_ptr(&self) -> Option<NonNull<u8>> {
        None
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A stream whose items do nothing: each is dropped and its value reached
/// as it is queued.
struct StandInStream {
    label: String,
    timeline: Timeline,
    /// The writer and the last value handed out.
    writer: Mutex<(TimelineWriter, u64)>,
}

// SAFETY: items "run" (are dropped unrun, doing nothing) in submission
// order under the writer's lock; item `n` is dropped before value `n` is
// advanced; nothing is written, so there is nothing to make visible; a
// `Wait` orders nothing because no later item does any work; `submit`
// never blocks on queued work (it takes only the lock held for this
// bookkeeping) and never fails.
unsafe impl RawStream for StandInStream {
    fn label(&self) -> &str {
        &self.label
    }

    fn timeline(&self) -> &Timeline {
        &self.timeline
    }

    fn can_wait_on(&self, _point: &SyncPoint) -> bool {
        true
    }

    fn can_access(&self, range: &BufferRange) -> bool {
        RemoteDevice::is_stand_in(range.buffer())
    }

    unsafe fn submit(&self, op: StreamOp) -> Result<u64, StreamError> {
        let mut guard = self.writer.lock();
        guard.1 += 1;
        drop(op);
        guard.0.advance(guard.1);
        Ok(guard.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stand_in_completes_every_item_at_once_and_holds_no_memory() {
        let device = RemoteDevice::new("cpu@1", 1, vec![DType::F32]);
        let t = device.alloc_tensor(DType::F32, &[4, 8]).expect("a stand-in allocates");
        assert_eq!(t.bytes(), 128, "the buffer has the size asked for");
        assert!(RemoteDevice::is_stand_in(t.buffer()) && t.buffer().raw().host_ptr().is_none());
        let stream = device.new_stream().expect("stream");
        let written = stream.write_async(&t, vec![1f32; 32]).expect("queued");
        assert!(written.point().is_reached(), "queued work is done at once: {}", written.point());
        let read = stream.read_async(&t).expect("queued");
        assert!(read.point().is_reached(), "a read too: {}", read.point());
        assert_eq!(device.rank(), 1);
        assert!(!device.supports(&Op::MatMul, DType::Q4_0), "matmul only of the owner's weight types");
    }
}
