//! Runs a case against the real devices, call by call, keeping the model in
//! step: every queued item (including the waits the safe stream inserts,
//! read from its hazard reports) gets a model item, and every refusal is
//! checked against what the model expects.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use baton_composite::CompositeDevice;
use baton_conformance::chaos::ChaosDevice;
use baton_core::backend::{Buffer, Device, IntoDevice, Pending, PendingError, Stream, StreamError, TensorRef};
use baton_core::graph::{Flags, Graph};
use baton_core::sync::{HostTimeline, PointStatus, Release, SyncPoint, WaitPolicy};
use baton_core::DType;

use crate::api;
use crate::model::{Cause, Effect, Fate, Item, Model, Place, Target};
use crate::ops::{Case, Op, Setup, View, BUFFERS, BUFFER_BYTES, HOSTS, STREAMS};
use crate::{BUSY_DROPS, CALLS};

#[path = "transfers.rs"]
mod transfers;
#[path = "waits.rs"]
mod waits;

/// The bound of a wait on a point that must settle: longer is a hang.
#[cfg(not(miri))]
pub const SETTLE: Duration = Duration::from_secs(2);
/// Under Miri, which runs the workers some hundred times slower.
#[cfg(miri)]
pub const SETTLE: Duration = Duration::from_secs(120);
/// The bound of a wait on a point that must stay pending.
pub const SHORT: Duration = Duration::from_millis(20);
/// The poll bound of a stream wait on a point that never comes.
pub const NEVER_BOUND: Duration = Duration::from_millis(30);
/// The deadline of a stream wait on a silent peer.
pub const DEADLINE: Duration = Duration::from_millis(50);

pub struct StreamSlot {
    pub stream: Option<Stream>,
    pub uid: usize,
    pub device: usize,
}

pub struct BufferSlot {
    pub buffer: Buffer,
    pub uid: usize,
    pub device: usize,
}

/// A host buffer lent to a stream, and what it must come back as.
pub enum Lent {
    WriteF32(Pending<Vec<f32>>, Vec<f32>),
    WriteBytes(Pending<Vec<u8>>, Vec<u8>),
    ReadF32(Pending<Vec<f32>>, usize),
    ReadBytes(Pending<Vec<u8>>, usize),
}

/// What came back from a lent buffer: the bytes, or the failure and
/// whether the buffer came back with it.
pub enum Returned {
    Ok(Vec<u8>),
    Failed(StreamError, bool),
}

pub struct LentEntry {
    pub target: Target,
    pub lent: Option<Lent>,
    pub returned: Option<Returned>,
}

pub struct ReleaseEntry {
    pub host: usize,
    pub point: SyncPoint,
    pub release: Option<Release>,
}

pub struct Run {
    pub model: Model,
    pub setup: Setup,
    pub devices: Vec<Arc<dyn Device>>,
    pub streams: Vec<StreamSlot>,
    /// Device of every model stream, by uid.
    pub stream_devices: Vec<usize>,
    /// The actual point of every model item, where the API returned one.
    pub points: Vec<Vec<Option<SyncPoint>>>,
    pub buffers: Vec<BufferSlot>,
    pub hosts: Vec<HostTimeline>,
    pub releases: Vec<ReleaseEntry>,
    pub never: Option<Release>,
    pub gates: Vec<Option<mpsc::Sender<()>>>,
    pub lent: Vec<LentEntry>,
    /// Memory items by their point's name, to read hazard reports.
    by_label: HashMap<String, Target>,
    reports_seen: Vec<usize>,
    /// Last memory item writing each buffer uid (a copy's producer).
    last_writer: HashMap<usize, (Target, SyncPoint)>,
    pub causes: Vec<(Cause, baton_core::sync::Failure)>,
    /// The point each wait that must time out waits on: its failure names
    /// it (`W-BOUND`).
    pub awaited: HashMap<Cause, String>,
    /// Deadline waits on silent streams: they end before the end of the
    /// case opens the silent gates (model stream uid, item).
    pub expiring: Vec<(usize, usize)>,
    pub problems: Vec<String>,
    pub skipped: u64,
}

fn call<T>(result: T) -> T {
    CALLS.fetch_add(1, Ordering::Relaxed);
    result
}

/// The CPU devices, opened once per process.
fn cpus() -> Vec<Arc<dyn Device>> {
    static CPUS: std::sync::OnceLock<Vec<Arc<dyn Device>>> = std::sync::OnceLock::new();
    CPUS.get_or_init(|| {
        baton_cpu::open_with(&["cpu:0", "cpu:1"], &baton_cpu::OpenOptions::default().with_threads(1))
            .expect("two CPU devices")
            .into_iter()
            .map(IntoDevice::into_device)
            .collect()
    })
    .clone()
}

fn open(setup: Setup) -> Vec<Arc<dyn Device>> {
    let cpu = cpus();
    match setup {
        Setup::Cpu { three } => {
            let mut d = cpu.clone();
            if three {
                d.push(cpu[0].clone());
            }
            d
        }
        Setup::Chaos { three, seed, native_waits, foreign_access } => {
            let n = if three { 3 } else { 2 };
            (0..n)
                .map(|i| {
                    let mut c = ChaosDevice::new(cpu[i % 2].clone(), seed ^ i as u64, Duration::from_micros(300));
                    if !native_waits {
                        c = c.without_native_waits();
                    }
                    if !foreign_access {
                        c = c.without_foreign_access();
                    }
                    Arc::new(c).into_device()
                })
                .collect()
        }
        Setup::Composite => {
            let composite = CompositeDevice::new(cpu.clone(), WaitPolicy::process_default()).expect("composite");
            vec![Arc::new(composite).into_device(), cpu[0].clone(), cpu[1].clone()]
        }
    }
}

fn add_graph(elems: usize) -> Arc<Graph> {
    let mut g = Graph::new();
    let a = g.leaf("a", DType::F32, &[elems], Flags::INPUT).expect("leaf");
    let b = g.leaf("b", DType::F32, &[elems], Flags::INPUT).expect("leaf");
    let out = g.add(a, b).expect("add");
    g.mark(out, Flags::OUTPUT).expect("mark");
    g.set_name(out, "out").expect("name");
    Arc::new(g)
}

fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// Whether reaching `a` implies reaching `b` (a later item of one stream).
fn covers(a: &Target, b: &Target) -> bool {
    matches!((a, b), (Target::Stream { stream: s, item: i }, Target::Stream { stream: t, item: j }) if s == t && i >= j)
}

fn overlaps(a: &View, b: &View) -> bool {
    a.buffer % BUFFERS == b.buffer % BUFFERS && a.start < b.start + b.len && b.start < a.start + a.len
}

impl Run {
    pub fn new(case: &Case) -> Run {
        let devices = open(case.setup);
        let mut model = Model::default();
        model.hosts = (0..HOSTS).map(|_| Default::default()).collect();
        let mut run = Run {
            model,
            setup: case.setup,
            streams: Vec::new(),
            stream_devices: Vec::new(),
            points: Vec::new(),
            buffers: Vec::new(),
            hosts: (0..HOSTS).map(|h| HostTimeline::new(format!("host-{h}"))).collect(),
            releases: Vec::new(),
            never: Some(HostTimeline::new("never").reserve()),
            gates: Vec::new(),
            lent: Vec::new(),
            by_label: HashMap::new(),
            reports_seen: Vec::new(),
            last_writer: HashMap::new(),
            causes: Vec::new(),
            awaited: HashMap::new(),
            expiring: Vec::new(),
            problems: Vec::new(),
            skipped: 0,
            devices,
        };
        for s in 0..STREAMS {
            let device = s % run.devices.len();
            let uid = run.new_stream(device);
            run.streams.push(StreamSlot { stream: None, uid, device });
            run.open_stream(s);
        }
        for b in 0..BUFFERS {
            let device = b % run.devices.len();
            let (buffer, uid) = run.alloc(device);
            run.buffers.push(BufferSlot { buffer, uid, device });
        }
        run
    }

    fn new_stream(&mut self, device: usize) -> usize {
        self.stream_devices.push(device);
        self.points.push(Vec::new());
        self.reports_seen.push(0);
        self.model.new_stream()
    }

    fn open_stream(&mut self, slot: usize) {
        let device = self.streams[slot].device;
        let stream = call(self.devices[device].new_stream()).expect("new stream");
        self.streams[slot].stream = Some(stream);
    }

    fn alloc(&mut self, device: usize) -> (Buffer, usize) {
        let buffer = call(self.devices[device].alloc(BUFFER_BYTES)).expect("alloc");
        (buffer, self.model.new_buffer(BUFFER_BYTES))
    }

    fn problem(&mut self, message: String) {
        self.problems.push(message);
    }

    /// Whether a stream of device `s` waits natively on host-memory points.
    fn native(&self, _device: usize) -> bool {
        !matches!(self.setup, Setup::Chaos { native_waits: false, .. })
    }

    /// Whether a stream of device `s` can address a buffer of device `b`.
    fn accessible(&self, s: usize, b: usize) -> bool {
        match self.setup {
            Setup::Composite => (s == 0) == (b == 0),
            Setup::Chaos { foreign_access: false, .. } => s % 2 == b % 2,
            _ => true,
        }
    }

    /// The stream of a slot (a new one if it was dropped) and its uid.
    fn stream(&mut self, slot: usize) -> (Stream, usize) {
        let slot = slot % STREAMS;
        if self.streams[slot].stream.is_none() {
            let uid = self.new_stream(self.streams[slot].device);
            self.streams[slot].uid = uid;
            self.open_stream(slot);
        }
        let s = &self.streams[slot];
        (s.stream.clone().expect("opened"), s.uid)
    }

    fn tensor(&self, view: &View) -> (TensorRef, Place, usize) {
        let slot = &self.buffers[view.buffer % BUFFERS];
        let tensor = call(TensorRef::new(&slot.buffer, view.offset(), DType::F32, &[view.len])).expect("tensor");
        (tensor, Place { buffer: slot.uid, offset: view.offset() }, slot.device)
    }

    /// The model's fate of stream `uid`'s last item now.
    fn last_fate(&self, uid: usize) -> Fate {
        self.model.fates()[uid].last().cloned().unwrap_or(Fate::Reached)
    }

    fn maybe_failed(&self, uid: usize) -> Option<Cause> {
        match self.last_fate(uid) {
            Fate::Failed(cause) => Some(cause),
            _ => None,
        }
    }

    fn record(&mut self, uid: usize, item: Item, point: Option<SyncPoint>) -> usize {
        let index = match item {
            Item::Mem { effect, .. } => self.model.push_mem(uid, effect),
            other => self.model.push(uid, other),
        };
        if let (Some(p), Item::Mem { .. }) = (&point, &self.model.streams[uid][index]) {
            self.by_label.insert(p.to_string(), Target::Stream { stream: uid, item: index });
        }
        self.points[uid].push(point);
        index
    }

    /// Names of the memory items' points that have failed by now.
    fn failed_accesses(&self) -> HashSet<String> {
        let mut failed = HashSet::new();
        for (uid, points) in self.points.iter().enumerate() {
            for (i, p) in points.iter().enumerate() {
                if let (Some(p), Item::Mem { .. }) = (p, &self.model.streams[uid][i]) {
                    if matches!(p.status(), PointStatus::Failed(_)) {
                        failed.insert(p.to_string());
                    }
                }
            }
        }
        failed
    }

    /// Adds the waits the safe stream inserted (its new hazard reports) as
    /// model items; `failed` are accesses that had failed before the call.
    fn inserted_waits(&mut self, stream: &Stream, uid: usize, failed: &HashSet<String>) {
        let reports = stream.hazard_reports();
        let new = reports[self.reports_seen[uid].min(reports.len())..].to_vec();
        self.reports_seen[uid] = reports.len();
        let relayed = !self.native(self.stream_devices[uid]);
        let mut targets: Vec<Target> = Vec::new();
        for r in new {
            if failed.contains(&r.earlier_point) {
                self.problem(format!(
                    "{} waited on {}, an access that had already failed (M-ORDER: a failed access orders nothing, \
                     it must not fail later users of the buffer): {r}",
                    stream.label(),
                    r.earlier_point
                ));
            }
            // The stream waits on each racing access's point once, a later
            // point of the same stream standing for the earlier ones (in the
            // order `Stream::submit_tracked` queues them).
            match self.by_label.get(&r.earlier_point).cloned() {
                Some(t) if !targets.iter().any(|n| covers(n, &t)) => {
                    targets.retain(|n| !covers(&t, n));
                    targets.push(t);
                }
                Some(_) => {}
                None => self.problem(format!("a hazard report names a point the model does not know: {r}")),
            }
        }
        for target in targets {
            self.record(uid, Item::Wait { target, bounded: false, expires: false, relayed, settles: true }, None);
        }
    }

    /// Checks a submission's result. `refusal` is the error the model
    /// expects (`None`: accepted); `prechecked` refusals come before the
    /// stream's failure is looked at. Returns whether the call queued work.
    /// A transfer's result with its refusal as a plain [`StreamError`],
    /// once checked that the refusal handed the caller's buffer back as it
    /// was lent (`D-RETURN`: nothing is lost).
    pub(super) fn handed_back<B: PartialEq + std::fmt::Debug>(
        &mut self,
        what: &str,
        result: Result<Pending<B>, PendingError<B>>,
        lent: &B,
    ) -> Result<Pending<B>, StreamError> {
        result.map_err(|refused| {
            let (error, back) = refused.into_parts();
            if back.as_ref() != Some(lent) {
                self.problem(format!("{what}: refused ({error}) without handing the buffer back as lent: {back:?}"));
            }
            error
        })
    }

    fn submitted<T>(
        &mut self,
        what: &str,
        uid: usize,
        result: &Result<T, StreamError>,
        refusal: Option<&str>,
        prechecked: bool,
    ) -> bool {
        let maybe_failed = self.maybe_failed(uid);
        match result {
            Ok(_) if refusal.is_none() => true,
            Ok(_) => {
                self.problem(format!("{what}: accepted, expected {refusal:?}"));
                true
            }
            Err(StreamError::Failed { cause, .. }) if !prechecked || refusal.is_none() => {
                match maybe_failed {
                    Some(expected) => self.check_cause(what, &expected, cause),
                    None => self.problem(format!("{what}: refused with Failed({cause}) but the stream has not failed")),
                }
                false
            }
            Err(e) => {
                let name = api::error_name(e);
                if refusal != Some(name) {
                    self.problem(format!("{what}: refused with {e} ({name}), expected {refusal:?}"));
                }
                false
            }
        }
    }

    pub fn exec(&mut self, op: &Op) {
        match *op {
            Op::Realloc { buffer } => {
                let slot = buffer % BUFFERS;
                let (b, uid) = self.alloc(self.buffers[slot].device);
                self.buffers[slot].buffer = b;
                self.buffers[slot].uid = uid;
            }
            Op::Write { stream, dst, seed, wrong_len } => self.write(stream, dst, seed, wrong_len),
            Op::WriteRange { stream, buffer, offset, len, seed, past_end } => {
                self.write_range(stream, buffer, offset, len, seed, past_end)
            }
            Op::Read { stream, src, into } => self.read(stream, src, into),
            Op::Copy { stream, src, dst, with_producer } => self.copy(stream, src, dst, with_producer),
            Op::CopyStaged { stream, src_stream, src, dst } => self.copy_staged(stream, src_stream, src, dst),
            Op::Scale { stream, x, y, factor } => {
                let graph = baton_conformance::contract::scale_graph(x.len, factor);
                let effect = |p: &[Place]| Effect::Scale { x: p[0], y: p[1], elems: x.len, factor };
                self.compute(stream, &graph, &[("x", x), ("y", y)], overlaps(&x, &y), &effect);
            }
            Op::Add { stream, a, b, out } => {
                let graph = add_graph(a.len);
                let effect = |p: &[Place]| Effect::Add { a: p[0], b: p[1], out: p[2], elems: a.len };
                let bad = overlaps(&out, &a) || overlaps(&out, &b);
                self.compute(stream, &graph, &[("a", a), ("b", b), ("out", out)], bad, &effect);
            }
            Op::WaitStream { stream, on, relay, bounded } => self.wait_stream(stream, on, relay, bounded),
            Op::WaitRelease { stream, release, relay, bounded } => self.wait_release(stream, release, relay, bounded),
            Op::WaitNever { stream, relay } => self.wait_never(stream, relay),
            Op::WaitSilent { stream, on, never, deadline } => self.wait_silent(stream, on, never, deadline),
            Op::Reserve { host } => {
                let release = call(self.hosts[host].reserve());
                let value = self.model.hosts[host].reserve();
                if release.point().value() != value {
                    self.problem(format!("reserve gave {} for value {value}", release.point()));
                }
                self.releases.push(ReleaseEntry { host, point: release.point(), release: Some(release) });
            }
            Op::EndRelease { release, end } => self.end_release(release, end),
            Op::HostFn { stream, kind } => self.host_fn(stream, kind),
            Op::HostWait { stream } => self.host_wait(stream),
            Op::PendingWait { pending } => self.pending_wait(pending),
            Op::PendingWithin { pending, again } => self.pending_within(pending, again),
            Op::DropStream { stream, busy } => {
                let busy_slots: Vec<usize> = (0..STREAMS)
                    .filter(|&i| {
                        self.streams[i].stream.is_some() && self.last_fate(self.streams[i].uid) == Fate::Pending
                    })
                    .collect();
                let slot = if busy && !busy_slots.is_empty() {
                    busy_slots[stream % busy_slots.len()]
                } else {
                    stream % STREAMS
                };
                if busy_slots.contains(&slot) {
                    BUSY_DROPS.fetch_add(1, Ordering::Relaxed);
                }
                let started = std::time::Instant::now();
                drop(self.streams[slot].stream.take());
                if started.elapsed() > Duration::from_secs(1) {
                    self.problem(format!("dropping a stream blocked for {:?} (D-NOBLOCK)", started.elapsed()));
                }
            }
        }
    }
}

/// The point of a lent buffer's transfer.
pub fn point_of(lent: &Lent) -> &SyncPoint {
    match lent {
        Lent::WriteF32(p, _) | Lent::ReadF32(p, _) => p.point(),
        Lent::WriteBytes(p, _) | Lent::ReadBytes(p, _) => p.point(),
    }
}

/// What a bounded `Pending::wait_within` gave.
pub enum Within {
    /// The point settled: the buffer came back (or the failure did).
    Settled(Returned),
    /// The bound ran out: the transfer came back whole, still queued.
    TimedOut(Lent),
    /// The bound ran out and the transfer did not come back.
    Lost(StreamError),
}

/// `Pending::wait_within(timeout)` on a lent buffer.
pub fn wait_within(lent: Lent, timeout: Duration) -> Within {
    fn within<B: baton_core::backend::HostBytes>(
        pending: Pending<B>,
        timeout: Duration,
        lend: impl FnOnce(Pending<B>) -> Lent,
    ) -> Within {
        match pending.wait_within(timeout) {
            Ok(b) => Within::Settled(Returned::Ok(b.bytes().to_vec())),
            Err(e) if matches!(e.error, StreamError::Wait(baton_core::sync::WaitError::Timeout { .. })) => {
                let error = e.error.clone();
                match (e.is_timeout(), e.into_pending()) {
                    (true, Some(p)) => Within::TimedOut(lend(p)),
                    _ => Within::Lost(error),
                }
            }
            Err(e) => {
                let error = e.error.clone();
                Within::Settled(Returned::Failed(error, e.into_buffer().is_some()))
            }
        }
    }
    CALLS.fetch_add(1, Ordering::Relaxed);
    match lent {
        Lent::WriteF32(p, sent) => within(p, timeout, |p| Lent::WriteF32(p, sent)),
        Lent::WriteBytes(p, sent) => within(p, timeout, |p| Lent::WriteBytes(p, sent)),
        Lent::ReadF32(p, read) => within(p, timeout, |p| Lent::ReadF32(p, read)),
        Lent::ReadBytes(p, read) => within(p, timeout, |p| Lent::ReadBytes(p, read)),
    }
}
