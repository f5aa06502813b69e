//! Streams: the raw, unsafe queue a backend implements, and the safe front
//! that owns host buffers and orders every access to device memory.

use crate::loom::{Mutex, MutexGuard};
use std::sync::Arc;
use std::time::Duration;

use crate::backend::bindings::{Bindings, BoundGraph};
use crate::backend::buffer::{BufferRange, TensorRef};
use crate::backend::host::{HostBytes, HostSlot, Pending, PendingError, Slot};
use crate::backend::path::{CopyPath, WaitPath};
use crate::backend::tracking::{Knowledge, LockedLogs, Submitter};
use crate::backend::StreamError;
use crate::sync::{SyncPoint, Timeline, WaitError, WaitPolicy, WaitUntil};

/// One item of a stream's in-order queue.
pub enum StreamOp {
    /// Later items start only once `point` is reached; if it fails, the
    /// stream fails with the same first cause (`W-FAIL`); if it is still
    /// pending after `deadline`, the stream fails with
    /// `FailureKind::TimedOut` naming the point (`W-BOUND`). `policy` and
    /// `deadline` are the edge's, fixed when the edge was set up.
    Wait {
        /// The point to wait for.
        point: SyncPoint,
        /// How the stream's worker waits.
        policy: WaitPolicy,
        /// How long the worker waits at most (`None`: no bound but the
        /// policy's own).
        deadline: Option<Duration>,
        /// Whether a failed point fails the stream (`Reached`, `W-FAIL`)
        /// or only ends the wait (`Settled`, the hazard tracking's waits).
        until: WaitUntil,
    },
    /// Runs a host function in stream order (after everything before it,
    /// before everything after it); it touches no device memory. An `Err`
    /// fails the stream with its message.
    HostFn(Box<dyn FnOnce() -> Result<(), String> + Send>),
    /// Copies the host bytes into `dst` (same length).
    Write {
        /// Device memory written.
        dst: BufferRange,
        /// The host buffer read.
        src: Arc<dyn HostSlot>,
    },
    /// Copies `src` into the host buffer (same length).
    Read {
        /// Device memory read.
        src: BufferRange,
        /// The host buffer written.
        dst: Arc<dyn HostSlot>,
    },
    /// Copies device memory to device memory (same length; the ranges may be
    /// on different devices the stream can access).
    Copy {
        /// Read.
        src: BufferRange,
        /// Written.
        dst: BufferRange,
    },
    /// Computes a graph with its leaves and outputs bound to memory.
    Compute {
        /// Memory of the graph's leaves and outputs, validated; the graph is
        /// [`Bindings::graph`].
        bindings: Arc<Bindings>,
    },
}

impl StreamOp {
    /// Short name for traces and errors.
    pub fn name(&self) -> &'static str {
        match self {
            StreamOp::Wait { .. } => "wait",
            StreamOp::HostFn(_) => "host_fn",
            StreamOp::Write { .. } => "write",
            StreamOp::Read { .. } => "read",
            StreamOp::Copy { .. } => "copy",
            StreamOp::Compute { .. } => "compute",
        }
    }
}

/// An in-order queue on one device, as a backend implements it.
///
/// # Safety
///
/// The implementor guarantees (docs/contract.md, rules `Q-*`):
/// - items run in submission order; item `n` of the stream's life completes
///   value `n` of [`timeline`](Self::timeline), which advances only after all
///   the item's writes are visible to any thread that observes the value
///   (release);
/// - a `Wait` item lets no later item start before its point is reached; a
///   failed point fails the stream with the same first cause;
/// - after an item fails, the timeline fails from that item's value on, and
///   later items are dropped without running; a value fails only once its
///   item has ended or will never run (the safe front stops tracking a
///   failed item's memory accesses), except on a device that did not finish
///   an item by its deadline, which the backend marks lost;
/// - every item is dropped (releasing its buffers and host slots) before its
///   value is advanced or failed;
/// - `submit` never blocks on queued work.
pub unsafe trait RawStream: Send + Sync {
    /// `device/stream-N`.
    fn label(&self) -> &str;
    /// The stream's timeline.
    fn timeline(&self) -> &Timeline;
    /// Whether a `Wait` on `point` can be queued natively.
    fn can_wait_on(&self, point: &SyncPoint) -> bool;
    /// Whether the stream's device can read and write the range (copies,
    /// reads and writes).
    fn can_access(&self, range: &BufferRange) -> bool;
    /// Whether a computation on this stream can bind the range (a graph's
    /// leaf or output there). By default, what it can access; a GPU stream
    /// that copies host memory through staging but binds only device
    /// memory says less.
    fn can_compute_on(&self, range: &BufferRange) -> bool {
        self.can_access(range)
    }
    /// Queues `op` and returns the timeline value that completes it.
    ///
    /// # Safety
    ///
    /// The caller guarantees that every byte range `op` writes is neither
    /// read nor written, and every range it reads is not written, by other
    /// work that is not ordered before or after it (ordered: earlier on this
    /// stream, or completed before a point this stream waits on before `op`,
    /// or waiting for `op`'s point), and that every range is accessible
    /// ([`can_access`](Self::can_access)) and, for `Compute`, the bindings
    /// were validated against the graph.
    unsafe fn submit(&self, op: StreamOp) -> Result<u64, StreamError>;
}

/// The safe stream: an in-order queue on one device.
///
/// Every method queues work and returns at once with the work's point; the
/// host blocks only in the waits it asks for. Device memory accesses are
/// tracked per byte range: an access that the caller did not order after a
/// conflicting access of another stream gets a wait inserted before it
/// (counted by [`implicit_waits`](Self::implicit_waits)), so safe code can
/// never race on device memory.
#[derive(Clone)]
pub struct Stream {
    raw: Arc<dyn RawStream>,
    knowledge: Arc<Mutex<Knowledge>>,
    /// Held for the whole of each submission of this stream (its clones
    /// included), so its items, their recorded order and its published
    /// clocks follow one sequence. Submissions of different streams run in
    /// parallel; they meet only in the access logs of the buffers both
    /// touch (`LockedLogs`).
    submitting: Arc<Mutex<()>>,
    policy: WaitPolicy,
    deadline: Option<Duration>,
}

impl Stream {
    /// Wraps a backend's stream; its edges use
    /// [`WaitPolicy::process_default`].
    pub fn new(raw: Arc<dyn RawStream>) -> Stream {
        Stream::with_policy(raw, WaitPolicy::process_default())
    }

    /// Wraps a backend's stream whose edges wait with `policy`, each for
    /// at most [`default_wait_deadline`](crate::sync::default_wait_deadline).
    pub fn with_policy(raw: Arc<dyn RawStream>, policy: WaitPolicy) -> Stream {
        Stream {
            raw,
            knowledge: Arc::new(Mutex::new(Knowledge::default())),
            submitting: Arc::new(Mutex::new(())),
            policy,
            deadline: crate::sync::default_wait_deadline(),
        }
    }

    /// This stream with another deadline for its edges (`None`: no bound
    /// but the policy's own). Clones made after share it; the stream's
    /// queue and knowledge are shared as before.
    pub fn with_deadline(mut self, deadline: Option<Duration>) -> Stream {
        self.deadline = deadline;
        self
    }

    /// The wait policy of this stream's edges ([`wait`](Self::wait)).
    pub fn wait_policy(&self) -> WaitPolicy {
        self.policy
    }

    /// How long this stream's edges wait for another timeline's point
    /// before the stream fails with `TimedOut` (`W-BOUND`).
    pub fn wait_deadline(&self) -> Option<Duration> {
        self.deadline
    }

    /// `device/stream-N`.
    pub fn label(&self) -> &str {
        self.raw.label()
    }

    /// The stream's timeline.
    pub fn timeline(&self) -> &Timeline {
        self.raw.timeline()
    }

    /// The backend's stream.
    pub fn raw(&self) -> &Arc<dyn RawStream> {
        &self.raw
    }

    /// Waits the safe front inserted so far (0 when the caller orders every
    /// cross-stream access itself, as the scheduler does).
    pub fn implicit_waits(&self) -> u64 {
        self.knowledge().implicit_waits
    }

    fn knowledge(&self) -> MutexGuard<'_, Knowledge> {
        self.knowledge.lock()
    }

    fn submitting(&self) -> MutexGuard<'_, ()> {
        self.submitting.lock()
    }

    fn failed(&self) -> Option<StreamError> {
        self.timeline().failure().map(|cause| StreamError::Failed { stream: self.label().to_string(), cause })
    }

    /// Makes later work on this stream start after `point`, without blocking
    /// the host (`W-ORDER`). If `point` fails, the stream fails with its first
    /// cause (`W-FAIL`); if it is still pending after the stream's
    /// [`wait_deadline`](Self::wait_deadline), the stream fails with
    /// `TimedOut` naming it (`W-BOUND`). A point this backend cannot wait on
    /// natively is an error (`W-FOREIGN`); a relay bridges it.
    pub fn wait(&self, point: &SyncPoint) -> Result<SyncPoint, StreamError> {
        self.wait_with(point, self.policy)
    }

    /// As [`wait`](Self::wait), with this edge's own wait policy.
    pub fn wait_with(&self, point: &SyncPoint, policy: WaitPolicy) -> Result<SyncPoint, StreamError> {
        if point.timeline().same_as(self.timeline()) {
            return Ok(self.last_point());
        }
        let _submitting = self.submitting();
        self.queue_wait(point, policy, self.deadline, WaitUntil::Reached, false)?;
        Ok(self.last_point())
    }

    /// As [`wait_with`](Self::wait_with), with this edge's own deadline
    /// instead of the stream's.
    pub fn wait_bounded(
        &self,
        point: &SyncPoint,
        policy: WaitPolicy,
        deadline: Option<Duration>,
    ) -> Result<SyncPoint, StreamError> {
        if point.timeline().same_as(self.timeline()) {
            return Ok(self.last_point());
        }
        self.wait_until(point, policy, deadline, WaitUntil::Reached)
    }

    /// As [`wait_bounded`](Self::wait_bounded), saying whether a failed
    /// point fails this stream ([`WaitUntil::Reached`], `W-FAIL`) or only
    /// ends the wait ([`WaitUntil::Settled`]: what the hazard tracking's
    /// own waits do; a backend forwarding them to inner streams uses it).
    pub fn wait_until(
        &self,
        point: &SyncPoint,
        policy: WaitPolicy,
        deadline: Option<Duration>,
        until: WaitUntil,
    ) -> Result<SyncPoint, StreamError> {
        if point.timeline().same_as(self.timeline()) {
            return Ok(self.last_point());
        }
        let _submitting = self.submitting();
        self.queue_wait(point, policy, deadline, until, false)?;
        Ok(self.last_point())
    }

    /// Runs `f` on the host in stream order (after the work queued before
    /// it); it must not touch device memory. Its point is reached when `f`
    /// has returned; an `Err` fails the stream (`E-STICKY`).
    pub fn host_fn(&self, f: impl FnOnce() -> Result<(), String> + Send + 'static) -> Result<SyncPoint, StreamError> {
        self.submit_tracked(StreamOp::HostFn(Box::new(f)), &[], &[])
    }

    /// As [`wait_with`](Self::wait_with), but a point this stream cannot
    /// wait on natively is bridged by the core's relay instead of refused: a
    /// host function in the stream's order waits for the point on the host
    /// (with `policy`), so later work still starts after it; if the point
    /// fails, the stream fails with the cause's text. Returns whether the
    /// relay was used.
    pub fn wait_or_relay(&self, point: &SyncPoint, policy: WaitPolicy) -> Result<bool, StreamError> {
        if self.wait_path(point) == WaitPath::StreamOrder {
            return Ok(false);
        }
        let _submitting = self.submitting();
        self.queue_wait_or_relay(point, policy, false)
    }

    /// The races this stream found so far: accesses the caller queued here
    /// that were not ordered after a conflicting access of another stream
    /// (each was closed by an inserted wait, see
    /// [`implicit_waits`](Self::implicit_waits)). Empty on correct code.
    pub fn hazard_reports(&self) -> Vec<crate::backend::HazardReport> {
        self.knowledge().reports.clone()
    }

    /// Waits the relay bridged so far.
    pub fn relayed_waits(&self) -> u64 {
        self.knowledge().relayed_waits
    }

    /// How [`wait_or_relay`](Self::wait_or_relay) orders this stream after
    /// `point`: by stream order (a point of its own timeline), a native
    /// wait, or the relay (W-FOREIGN).
    pub fn wait_path(&self, point: &SyncPoint) -> WaitPath {
        if point.timeline().same_as(self.timeline()) {
            WaitPath::StreamOrder
        } else {
            self.foreign_wait_path(point)
        }
    }

    /// Native or relay, for a point of another timeline.
    fn foreign_wait_path(&self, point: &SyncPoint) -> WaitPath {
        if self.raw.can_wait_on(point) {
            WaitPath::Native
        } else {
            WaitPath::Relay
        }
    }

    /// How this stream copies from `src`: directly where its device
    /// addresses the memory, else through host memory
    /// ([`copy_staged`](Self::copy_staged); C-CROSS). The scheduler chooses
    /// by it.
    pub fn copy_path(&self, src: &BufferRange) -> CopyPath {
        if self.raw.can_access(src) {
            CopyPath::Direct
        } else {
            CopyPath::HostStaged
        }
    }

    fn queue_wait_or_relay(&self, point: &SyncPoint, policy: WaitPolicy, implicit: bool) -> Result<bool, StreamError> {
        if self.foreign_wait_path(point) == WaitPath::Native {
            return self.queue_wait(point, policy, self.deadline, settled(implicit), implicit).map(|()| false);
        }
        let relayed = point.clone();
        let deadline = self.deadline;
        let relay: Box<dyn FnOnce() -> Result<(), String> + Send> = Box::new(move || {
            match relayed.wait_with(policy, deadline) {
                // The hazard tracking's waits end when the point settles.
                Err(WaitError::Failed { .. }) if implicit => Ok(()),
                other => other.map_err(|e| format!("relayed wait: {e}")),
            }
        });
        // SAFETY: the relay only waits on the host; it accesses no memory.
        let value = unsafe { self.raw.submit(StreamOp::HostFn(relay))? };
        self.record_wait(point, value, settled(implicit), implicit);
        self.knowledge().relayed_waits += 1;
        Ok(true)
    }

    /// After a wait on `point` (queued as this stream's item `value`), this
    /// stream knows everything the point's stream knew at that point
    /// (vector clocks, so order through a third stream counts), and it
    /// publishes what it knows now for streams that will wait on it.
    ///
    /// A wait that ends when the point settles ([`WaitUntil::Settled`])
    /// inherits less: a failed point says only that its own stream's work
    /// up to it is over (it ran or never will), not that the waits its
    /// stream queued before it ran, so their order is not inherited, only
    /// the point's own timeline up to it.
    fn record_wait(&self, point: &SyncPoint, value: u64, until: WaitUntil, implicit: bool) {
        let mut k = self.knowledge();
        let inherits = until == WaitUntil::Reached;
        let theirs = if inherits { point.timeline().clock_at(point.value()) } else { None };
        if let Some(theirs) = theirs {
            for (&id, &v) in theirs.iter() {
                let mine = k.waited.entry(id).or_insert(0);
                *mine = (*mine).max(v);
            }
        }
        k.note_own(self.timeline().id(), value);
        let seen = k.waited.entry(point.timeline().id()).or_insert(0);
        *seen = (*seen).max(point.value());
        if implicit {
            k.implicit_waits += 1;
        }
        self.timeline().publish_clock(value, Arc::new(k.waited.clone()));
    }

    fn queue_wait(
        &self,
        point: &SyncPoint,
        policy: WaitPolicy,
        deadline: Option<Duration>,
        until: WaitUntil,
        implicit: bool,
    ) -> Result<(), StreamError> {
        if !self.raw.can_wait_on(point) {
            return Err(StreamError::ForeignPoint {
                stream: self.label().into(),
                point: point.to_string(),
                domain: format!("{:?}", point.timeline().domain()),
            });
        }
        // SAFETY: a wait accesses no memory.
        let value = unsafe { self.raw.submit(StreamOp::Wait { point: point.clone(), policy, deadline, until })? };
        self.record_wait(point, value, until, implicit);
        Ok(())
    }

    /// The point of the last item queued (reached at once if none).
    pub fn last_point(&self) -> SyncPoint {
        let timeline = self.timeline();
        timeline.point(self.submitted())
    }

    fn submitted(&self) -> u64 {
        self.raw.timeline().reached().max(self.raw_submitted())
    }

    fn raw_submitted(&self) -> u64 {
        // The front records the value of every submission it makes.
        self.knowledge().waited.get(&self.timeline().id()).copied().unwrap_or(0)
    }

    /// Checks ranges, orders conflicting accesses, submits, records.
    fn submit_tracked(
        &self,
        op: StreamOp,
        reads: &[BufferRange],
        writes: &[BufferRange],
    ) -> Result<SyncPoint, StreamError> {
        if let Some(e) = self.failed() {
            return Err(e);
        }
        // A computation binds its memory (`can_compute_on`); transfers and
        // copies only need to address it (`can_access`).
        let computes = matches!(op, StreamOp::Compute { .. });
        for r in reads.iter().chain(writes) {
            let usable = if computes { self.raw.can_compute_on(r) } else { self.raw.can_access(r) };
            if !usable {
                return Err(StreamError::InaccessibleBuffer {
                    stream: self.label().into(),
                    device: r.buffer().device().into(),
                });
            }
        }
        let _submitting = self.submitting();
        // The logs of every buffer the op touches stay locked from the check
        // to the record, so no other stream's submission can slip in between
        // against the same memory.
        let mut logs = LockedLogs::lock(reads.iter().chain(writes));
        // Checked under the logs' locks, which a sealing computation holds
        // too (below): a write either comes before the seal (and so before
        // the computation, by the hazard tracking) or is refused.
        if let Some(sealed) = writes.iter().find(|w| w.buffer().is_sealed()) {
            return Err(StreamError::SealedWeights {
                buffer: sealed.buffer().id(),
                device: sealed.buffer().device().into(),
            });
        }
        let op_name = op.name();
        let (needed, reports) = {
            let k = self.knowledge();
            let me = Submitter { label: self.label(), timeline: self.timeline(), knowledge: &k, op: op_name };
            logs.unordered(&me, reads, writes)
        };
        if !reports.is_empty() {
            if crate::backend::hazard::printing() {
                for r in &reports {
                    eprintln!("baton sanitizer: {r}");
                }
            }
            self.knowledge().reports.extend(reports);
        }
        for point in &needed {
            self.queue_wait_or_relay(point, self.policy, true)?;
        }
        if computes {
            // Sealed before the computation can run: a backend that derives
            // a form of the weights when it runs sees their final bytes
            // (every earlier write is ordered before this read) and no
            // later write is accepted.
            for r in reads {
                r.buffer().seal_if_weights();
            }
        }
        // SAFETY: every conflicting access recorded by other streams is now
        // ordered before `op` (same stream, waited on, settled, or waited on
        // just above), and none can be recorded before `op`'s own (the logs
        // stay locked); ranges were checked accessible above and lie inside
        // their buffers (`BufferRange` is only made checked), and bindings
        // are validated by `Bindings::bind`.
        let value = unsafe { self.raw.submit(op)? };
        let point = self.timeline().point(value);
        self.knowledge().note_own(self.timeline().id(), value);
        logs.record(reads, writes, &point, op_name);
        Ok(point)
    }

    /// Copies the host buffer `src` into `dst` asynchronously. The stream owns
    /// `src` until the copy is done; [`Pending::wait`] gives it back, so a
    /// decode loop allocates nothing (`H-OWN`). `src` must be owned
    /// (`'static`): a borrowed buffer does not compile (rule `H-BORROW`):
    ///
    /// ```compile_fail,E0277
    /// use baton_core::backend::{Stream, TensorRef};
    /// fn lend(stream: &Stream, tensor: &TensorRef, data: &Vec<f32>) {
    ///     // A borrow could be changed while the copy is queued: rejected.
    ///     let _ = stream.write_async(tensor, data);
    /// }
    /// ```
    ///
    /// while an owned buffer is lent and comes back:
    ///
    /// ```
    /// use baton_core::backend::{Stream, TensorRef};
    /// fn lend(stream: &Stream, tensor: &TensorRef, data: Vec<f32>) -> Vec<f32> {
    ///     stream.write_async(tensor, data).unwrap().wait().unwrap()
    /// }
    /// ```
    ///
    /// A refused write (a size that differs from the tensor's, a failed or
    /// closed stream) hands the buffer back in its error
    /// ([`PendingError::into_buffer`]); `?` turns the error into a
    /// [`StreamError`], dropping the buffer.
    pub fn write_async<B: HostBytes>(&self, dst: &TensorRef, src: B) -> Result<Pending<B>, PendingError<B>> {
        self.write_range_async(&dst.byte_range(), src)
    }

    /// As [`write_async`](Self::write_async), into a raw byte range (bulk
    /// uploads such as a model's weights).
    pub fn write_range_async<B: HostBytes>(&self, dst: &BufferRange, src: B) -> Result<Pending<B>, PendingError<B>> {
        let host = src.bytes().len();
        if host != dst.len() {
            return Err(PendingError::refused(StreamError::SizeMismatch { host, tensor: dst.len() }, src));
        }
        let slot = Arc::new(Slot(Mutex::new(Some(src))));
        let op = StreamOp::Write { dst: dst.clone(), src: slot.clone() };
        match self.submit_tracked(op, &[], std::slice::from_ref(dst)) {
            Ok(point) => Ok(Pending::new(point, self.label().into(), slot)),
            Err(error) => Err(PendingError::refused_in(error, &slot)),
        }
    }

    /// As [`write_range_async`](Self::write_range_async), from a host slot
    /// the caller shares with other work: the bytes are read from `src`
    /// when the write runs, not when it is queued (a backend that forwards
    /// a write whose bytes another queued item fills first). A slot whose
    /// length then differs from `dst`'s fails the stream.
    pub fn write_slot_async(&self, dst: &BufferRange, src: Arc<dyn HostSlot>) -> Result<SyncPoint, StreamError> {
        self.submit_tracked(StreamOp::Write { dst: dst.clone(), src }, &[], std::slice::from_ref(dst))
    }

    /// Reads `src` into the host buffer `dst` asynchronously; the handle
    /// waits only for this read's own point (`R-OWN`) and gives `dst` back
    /// filled. A refused read hands the buffer back in its error, as a
    /// refused [`write_async`](Self::write_async) does.
    pub fn read_into_async<B: HostBytes>(&self, src: &TensorRef, dst: B) -> Result<Pending<B>, PendingError<B>> {
        let host = dst.bytes().len();
        if host != src.bytes() {
            return Err(PendingError::refused(StreamError::SizeMismatch { host, tensor: src.bytes() }, dst));
        }
        let slot = Arc::new(Slot(Mutex::new(Some(dst))));
        let range = src.byte_range();
        let op = StreamOp::Read { src: range.clone(), dst: slot.clone() };
        match self.submit_tracked(op, &[range], &[]) {
            Ok(point) => Ok(Pending::new(point, self.label().into(), slot)),
            Err(error) => Err(PendingError::refused_in(error, &slot)),
        }
    }

    /// Copies `src` to `dst` through host memory, for devices that cannot
    /// address each other's buffers (`C-CROSS`'s fallback): `src_stream`
    /// (which can read `src`) reads it into a host buffer after `producer`,
    /// and this stream writes that buffer into `dst` after the read's point,
    /// both in stream order. Same semantics as [`copy`](Self::copy): other
    /// streams consume `dst` by waiting on the returned point.
    pub fn copy_staged(
        &self,
        src_stream: &Stream,
        src: &TensorRef,
        dst: &TensorRef,
        producer: Option<&SyncPoint>,
    ) -> Result<SyncPoint, StreamError> {
        same_size(src, dst)?;
        if let Some(p) = producer {
            src_stream.wait_or_relay(p, src_stream.policy)?;
        }
        // One host buffer, shared by the read (which fills it) and the write
        // (which runs after the read's point and drains it).
        let slot: Arc<Slot<Vec<u8>>> = Arc::new(Slot(Mutex::new(Some(vec![0u8; src.bytes()]))));
        let (s, d) = (src.byte_range(), dst.byte_range());
        let read = src_stream.submit_tracked(StreamOp::Read { src: s.clone(), dst: slot.clone() }, &[s], &[])?;
        self.wait_or_relay(&read, self.policy)?;
        self.submit_tracked(StreamOp::Write { dst: d.clone(), src: slot }, &[], &[d])
    }

    /// Reads `src` into a new host vector of its bytes.
    pub fn read_async(&self, src: &TensorRef) -> Result<Pending<Vec<u8>>, StreamError> {
        Ok(self.read_into_async(src, vec![0u8; src.bytes()])?)
    }

    /// Copies `src` to `dst` on this stream, after everything queued here
    /// before it and after `producer` (the point of the work that wrote
    /// `src`, when another stream did); other streams consume `dst` by
    /// waiting on the returned point (`C-ORDER`).
    pub fn copy(
        &self,
        src: &TensorRef,
        dst: &TensorRef,
        producer: Option<&SyncPoint>,
    ) -> Result<SyncPoint, StreamError> {
        same_size(src, dst)?;
        if let Some(p) = producer {
            self.wait_or_relay(p, self.policy)?;
        }
        let (s, d) = (src.byte_range(), dst.byte_range());
        let op = StreamOp::Copy { src: s.clone(), dst: d.clone() };
        self.submit_tracked(op, &[s], &[d])
    }

    /// Computes the graph of `bindings` asynchronously; outputs land in
    /// their bound tensors once the returned point is reached (`G-ASYNC`).
    pub fn compute(&self, bindings: Bindings) -> Result<SyncPoint, StreamError> {
        self.compute_bound(&BoundGraph::new(bindings)?)
    }

    /// As [`compute`](Self::compute), for bindings checked once
    /// ([`BoundGraph::new`]) and run again.
    pub fn compute_bound(&self, bound: &BoundGraph) -> Result<SyncPoint, StreamError> {
        let op = StreamOp::Compute { bindings: bound.bindings.clone() };
        self.submit_tracked(op, &bound.reads, &bound.writes)
    }

    /// Blocks until everything queued so far is done; returns the stream's
    /// sticky error if it failed (`E-STICKY`).
    pub fn synchronize(&self) -> Result<(), StreamError> {
        self.last_point().wait().map_err(|e| match e.cause() {
            Some(cause) => StreamError::Failed { stream: self.label().into(), cause: cause.clone() },
            None => StreamError::Wait(e),
        })
    }
}

/// The hazard tracking's own waits end when their point settles; every
/// other wait needs it reached.
fn settled(implicit: bool) -> WaitUntil {
    if implicit {
        WaitUntil::Settled
    } else {
        WaitUntil::Reached
    }
}

/// A copy moves whole tensors of one type and size.
fn same_size(src: &TensorRef, dst: &TensorRef) -> Result<(), StreamError> {
    if src.bytes() != dst.bytes() || src.dtype() != dst.dtype() {
        return Err(StreamError::SizeMismatch { host: src.bytes(), tensor: dst.bytes() });
    }
    Ok(())
}
