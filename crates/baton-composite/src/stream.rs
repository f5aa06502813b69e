//! The composite stream: one inner stream per device, and a timeline of its
//! own whose value `n` is reached when item `n` is done on every device.
//!
//! Each item is queued on the inner streams it touches, after they have
//! caught up with the previous item (a wait on its completion point), and
//! then joined on the leader stream (inner stream 0 unless the device
//! names another, `CompositeDevice::with_leader`): it waits for the others' last points and
//! runs a host function that advances the composite timeline. If any inner
//! stream fails, the host function is dropped unrun and fails the composite
//! timeline with the inner stream's first cause, so failure travels as the
//! contract says; nothing waits on a device that has failed.

use baton_core::loom::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use baton_core::backend::{BufferRange, Device, HostSlot, RawStream, Stream, StreamError, StreamOp};
use baton_core::sync::{Failure, FailureKind, SyncPoint, Timeline, TimelineWriter, WaitPolicy};

use crate::buffer::{byte_tensor, CompositeBuffer, SplitTensor};
use crate::collective::Collective;
use crate::error::CompositeError;
use crate::exec::PartitionCache;
use crate::profile::GateProfile;
use crate::split::{gather_bytes, scatter_bytes};

static NEXT_STREAM: AtomicUsize = AtomicUsize::new(0);

struct State {
    submitted: u64,
    /// The point on inner stream 0 that completed the last item.
    last_join: Option<SyncPoint>,
    /// Per inner stream, the completion value it has waited for.
    caught_up: Vec<u64>,
    partitions: PartitionCache,
}

/// A stream of a [`crate::CompositeDevice`].
pub(crate) struct CompositeStream {
    label: String,
    devices: Vec<Arc<dyn Device>>,
    inner: Vec<Stream>,
    timeline: Timeline,
    writer: Arc<CompositeWriter>,
    policy: WaitPolicy,
    collective: Arc<dyn Collective>,
    profile: Arc<GateProfile>,
    state: Mutex<State>,
    /// The inner stream that joins every item, runs host functions and
    /// reads mirrored memory (0 unless the device says otherwise:
    /// [`crate::CompositeDevice::with_leader`]).
    leader: usize,
}

/// The composite timeline's write side, shared by the submitting thread
/// and inner stream 0's worker. Inner streams fail each with a cause of
/// their own (a wait forwarded to every inner stream times out on each),
/// and the two threads may record failures of different values in either
/// order; so the first cause recorded is the composite's one first cause,
/// and every later failure of its timeline carries it (`E-STICKY`: every
/// failed point of one stream reports the same first cause).
struct CompositeWriter {
    writer: TimelineWriter,
    cause: Mutex<Option<Failure>>,
}

impl CompositeWriter {
    fn advance(&self, value: u64) {
        self.writer.advance(value);
    }

    fn fail(&self, value: u64, cause: Failure) {
        let mut first = self.cause.lock();
        let cause = first.get_or_insert(cause).clone();
        self.writer.fail(value, cause);
    }
}

/// Reaches the composite value when run; fails it with the inner stream's
/// first cause when dropped unrun (the inner stream failed before it).
struct Completion {
    writer: Arc<CompositeWriter>,
    value: u64,
    inner: Timeline,
    origin: String,
    done: bool,
}

impl Completion {
    fn complete(mut self) {
        self.writer.advance(self.value);
        self.done = true;
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        if !self.done {
            let cause = self.inner.failure().unwrap_or_else(|| {
                Failure::new(FailureKind::Abandoned, self.origin.clone(), "an inner stream dropped the item unrun")
            });
            self.writer.fail(self.value, cause);
        }
    }
}

impl CompositeStream {
    pub(crate) fn new(
        device: &str,
        devices: Vec<Arc<dyn Device>>,
        inner: Vec<Stream>,
        policy: WaitPolicy,
        collective: Arc<dyn Collective>,
        profile: Arc<GateProfile>,
        leader: usize,
    ) -> Self {
        let label = format!("{device}/stream-{}", NEXT_STREAM.fetch_add(1, Ordering::Relaxed));
        let (timeline, writer) = Timeline::new(label.clone());
        let n = inner.len();
        let fold = collective.sums_in_consumers() && addresses_each_other(&devices, &inner);
        CompositeStream {
            label,
            devices,
            inner,
            timeline,
            writer: Arc::new(CompositeWriter { writer, cause: Mutex::new(None) }),
            policy,
            collective,
            profile,
            state: Mutex::new(State {
                submitted: 0,
                last_join: None,
                caught_up: vec![0; n],
                partitions: PartitionCache::new(fold),
            }),
            leader,
        }
    }

    /// Whether this stream's partitions leave all-reduces to their
    /// consumers ([`Partition::build_with`](crate::Partition::build_with)).
    pub(crate) fn folds(&self) -> bool {
        self.state.lock().partitions.folds()
    }

    /// Whether `op` runs on the leader stream only.
    fn leader_only(op: &StreamOp) -> bool {
        match op {
            StreamOp::HostFn(_) => true,
            StreamOp::Read { src, .. } => CompositeBuffer::of(src.buffer()).is_some_and(|b| b.tensor().is_none()),
            _ => false,
        }
    }

    fn composite<'a>(&self, range: &'a BufferRange, op: &'static str) -> Result<&'a CompositeBuffer, CompositeError> {
        CompositeBuffer::of(range.buffer()).filter(|b| b.parts().len() == self.inner.len()).ok_or_else(|| {
            CompositeError::Unsupported { op, reason: format!("{:?} is no buffer of this device", range.buffer()) }
        })
    }

    fn run(&self, st: &mut State, op: StreamOp, value: u64) -> Result<(), CompositeError> {
        let lead = self.leader;
        let used: Vec<usize> = if Self::leader_only(&op) { vec![lead] } else { (0..self.inner.len()).collect() };
        if let Some(join) = st.last_join.clone() {
            for &d in used.iter().filter(|&&d| d != lead) {
                if st.caught_up[d] < join.value() {
                    self.inner[d].wait_or_relay(&join, self.policy)?;
                    st.caught_up[d] = join.value();
                }
            }
        }
        self.dispatch(st, op)?;
        for &d in used.iter().filter(|&&d| d != lead) {
            self.inner[lead].wait_or_relay(&self.inner[d].last_point(), self.policy)?;
        }
        let completion = Completion {
            writer: self.writer.clone(),
            value,
            inner: self.inner[lead].timeline().clone(),
            origin: format!("{}@{value}", self.label),
            done: false,
        };
        st.last_join = Some(self.inner[lead].host_fn(move || {
            completion.complete();
            Ok(())
        })?);
        Ok(())
    }

    fn dispatch(&self, st: &mut State, op: StreamOp) -> Result<(), CompositeError> {
        match op {
            StreamOp::Wait { point, policy, deadline, until } => {
                for s in &self.inner {
                    s.wait_until(&point, policy, deadline, until)?;
                }
            }
            StreamOp::HostFn(f) => {
                self.inner[self.leader].host_fn(f)?;
            }
            StreamOp::Write { dst, src } => {
                // Each part reads the host bytes when it runs, in stream
                // order: they may be filled by an item queued before this
                // one (`copy_staged`'s read), not yet run now.
                let buffer = self.composite(&dst, "write")?;
                for d in 0..self.inner.len() {
                    let part = PartSlot { whole: src.clone(), tensor: buffer.tensor().cloned(), device: d };
                    self.inner[d].write_slot_async(&buffer.part_range(&dst.range(), d)?, Arc::new(part))?;
                }
            }
            StreamOp::Read { src, dst } => self.read(&src, dst)?,
            StreamOp::Copy { src, dst } => {
                let (from, to) = (self.composite(&src, "copy")?, self.composite(&dst, "copy")?);
                let same = match (from.tensor(), to.tensor()) {
                    (None, None) => true,
                    (Some(a), Some(b)) => {
                        a.split == b.split && a.dims == b.dims && a.dtype == b.dtype && a.windowed == b.windowed
                    }
                    _ => false,
                };
                if !same {
                    return Err(CompositeError::Unsupported {
                        op: "copy",
                        reason: "between buffers split differently".into(),
                    });
                }
                for (d, s) in self.inner.iter().enumerate() {
                    let a = byte_tensor(&from.part_range(&src.range(), d)?)?;
                    let b = byte_tensor(&to.part_range(&dst.range(), d)?)?;
                    s.copy(&a, &b, None)?;
                }
            }
            StreamOp::Compute { bindings } => {
                let partition = st.partitions.get(bindings.graph(), &bindings, &self.devices, &*self.collective)?;
                partition.run(&self.inner, &bindings, &*self.collective, self.policy, &self.profile)?;
            }
        }
        Ok(())
    }

    fn read(&self, src: &BufferRange, dst: Arc<dyn HostSlot>) -> Result<(), CompositeError> {
        let buffer = self.composite(src, "read")?;
        let lead = self.leader;
        // A windowed tensor's parts each hold all of it, as a mirror's do.
        let mirrored = buffer.tensor().is_some_and(|t| t.split == crate::TensorSplit::Mirror || t.windowed);
        let Some(tensor) = buffer.tensor().cloned().filter(|_| !mirrored) else {
            // Mirrored memory: the leader's part holds every byte.
            let range = match mirrored {
                true => buffer.part(lead).all(),
                false => buffer.part_range(&src.range(), lead)?,
            };
            let pending = self.inner[lead].read_async(&byte_tensor(&range)?)?;
            self.inner[lead].host_fn(move || {
                let bytes = pending.wait().map_err(|e| e.to_string())?;
                dst.with_bytes_mut(&mut |out| out.copy_from_slice(&bytes));
                Ok(())
            })?;
            return Ok(());
        };
        let mut pendings = Vec::new();
        for (d, s) in self.inner.iter().enumerate() {
            pendings.push(s.read_async(&byte_tensor(&buffer.part(d).all())?)?);
        }
        for (_, p) in pendings.iter().enumerate().filter(|&(d, _)| d != lead) {
            self.inner[lead].wait_or_relay(p.point(), self.policy)?;
        }
        self.inner[lead].host_fn(move || {
            let mut locals = Vec::new();
            for p in pendings {
                locals.push(p.wait().map_err(|e| e.to_string())?);
            }
            dst.with_bytes_mut(&mut |out| gather_bytes(&tensor.split, tensor.dtype, &tensor.dims, &locals, out));
            Ok(())
        })?;
        Ok(())
    }
}

/// Device `device`'s part of a composite write's host bytes, cut from the
/// whole when the inner write runs.
struct PartSlot {
    whole: Arc<dyn HostSlot>,
    tensor: Option<SplitTensor>,
    device: usize,
}

impl HostSlot for PartSlot {
    fn with_bytes(&self, f: &mut dyn FnMut(&[u8])) {
        self.whole.with_bytes(&mut |bytes| match &self.tensor {
            Some(t) if !t.windowed => f(&scatter_bytes(&t.split, t.dtype, &t.dims, self.device, bytes)),
            _ => f(bytes),
        });
    }

    /// A part is only ever written from: it lends nothing to fill (a read
    /// into it would find no buffer and fail its stream).
    fn with_bytes_mut(&self, _f: &mut dyn FnMut(&mut [u8])) {}
}

// SAFETY: items run in submission order: item `n` is queued on the inner
// streams after each of them waited for item `n - 1`'s completion point, and
// its value is advanced by a host function on inner stream 0 that runs after
// that stream waited for every other inner stream's share of the item, so
// all of the item's writes are visible (the inner timelines' release, the
// waits' acquire, then this timeline's release). A failed inner point fails
// the inner streams (their contract), which drops the completion unrun and
// fails this timeline from `n` on with the same cause; later inner items are
// dropped unrun. The inner streams drop every item (and its buffers and host
// slots) before their points, hence before this timeline's. `submit` only
// queues (inner submissions never block on queued work). Memory accesses are
// those of the composite op, split over the parts, so the caller's ordering
// guarantee carries over part by part; the inner safe streams track their
// own accesses on top.
unsafe impl RawStream for CompositeStream {
    fn label(&self) -> &str {
        &self.label
    }

    fn timeline(&self) -> &Timeline {
        &self.timeline
    }

    fn can_wait_on(&self, point: &SyncPoint) -> bool {
        self.inner.iter().all(|s| s.raw().can_wait_on(point))
    }

    fn can_access(&self, range: &BufferRange) -> bool {
        CompositeBuffer::of(range.buffer()).is_some_and(|b| b.parts().len() == self.inner.len())
    }

    unsafe fn submit(&self, op: StreamOp) -> Result<u64, StreamError> {
        let mut st = self.state.lock();
        if let Some(cause) = self.timeline.failure() {
            return Err(StreamError::Failed { stream: self.label.clone(), cause });
        }
        st.submitted += 1;
        let value = st.submitted;
        let before: Vec<u64> = self.inner.iter().map(|s| s.last_point().value()).collect();
        match self.run(&mut st, op, value) {
            Ok(()) => Ok(value),
            Err(CompositeError::Stream(StreamError::Failed { cause, .. })) => {
                // An inner stream failed while the item was being queued:
                // the failure is the item's (asynchronous) result.
                self.writer.fail(value, cause);
                Ok(value)
            }
            Err(e) if self.inner.iter().zip(&before).all(|(s, &b)| s.last_point().value() == b) => {
                // Refused before anything was queued: the value is not used.
                st.submitted -= 1;
                Err(e.into_stream_error(&self.label))
            }
            Err(e) => {
                let e = e.into_stream_error(&self.label);
                let origin = format!("{}@{value}", self.label);
                self.writer.fail(value, Failure::new(FailureKind::WorkFailed, origin, e.to_string()));
                Err(e)
            }
        }
    }
}

/// Whether every inner stream can compute on every other device's memory
/// (probed with a small allocation on each device; a failed one says no).
fn addresses_each_other(devices: &[Arc<dyn Device>], streams: &[Stream]) -> bool {
    devices.iter().enumerate().all(|(j, device)| match device.alloc(16) {
        Ok(probe) => streams.iter().enumerate().all(|(i, s)| i == j || s.raw().can_compute_on(&probe.all())),
        Err(_) => false,
    })
}
