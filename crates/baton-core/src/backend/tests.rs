//! The safe types' own logic without a backend: ranges, bindings, host
//! buffers and pending transfers, printed names.

use crate::loom::Mutex;
use std::any::Any;
use std::ptr::NonNull;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use super::buffer::Access;
use super::host::Slot;
use super::{
    as_bytes, as_bytes_mut, Bindings, BoundGraph, Buffer, BufferRange, CopyPath, HostBytes, Pending, PendingError,
    RawBuffer, RawStream, Stream, StreamError, StreamOp, TensorRef, WaitPath,
};
use crate::graph::{Flags, Graph};
use crate::sync::{default_wait_deadline, Domain, HostTimeline, SyncPoint, Timeline, TimelineWriter, WaitPolicy};
use crate::DType;

/// The bound of every wait in these tests.
const BOUND: Duration = Duration::from_secs(10);

/// Memory that is never addressed: only its length and device matter here.
struct FakeBuffer {
    len: usize,
}

// SAFETY: `len` never changes, and `host_ptr` is `None`, so nothing ever
// reads or writes through this buffer.
unsafe impl RawBuffer for FakeBuffer {
    fn len(&self) -> usize {
        self.len
    }
    fn device(&self) -> &str {
        "fake:0"
    }
    fn host_ptr(&self) -> Option<NonNull<u8>> {
        None
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Runs `f`, a wait under test that has no bound of its own, on a thread,
/// and fails the test if it has not returned within [`BOUND`].
fn within<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(BOUND).expect("the wait returned within the bound")
}

fn buffer(len: usize) -> Buffer {
    Buffer::new(Box::new(FakeBuffer { len }))
}

/// A device that only allocates fake buffers.
struct FakeDevice(super::DeviceInfo);

impl super::Device for FakeDevice {
    fn info(&self) -> &super::DeviceInfo {
        &self.0
    }
    fn alloc(&self, bytes: usize) -> Result<Buffer, super::DeviceError> {
        Ok(buffer(bytes))
    }
    fn new_stream(&self) -> Result<Stream, super::DeviceError> {
        Err(super::DeviceError::Backend {
            device: "fake:0".into(),
            action: "starting a stream",
            source: Arc::new(std::io::Error::other("no streams")),
        })
    }
    fn supports(&self, _: &crate::graph::Op, _: DType) -> bool {
        false
    }
}

/// A [`FakeDevice`] named `fake:0`, which implements only what a device
/// must (the trait's defaults for the rest).
fn fake_device() -> FakeDevice {
    FakeDevice(super::DeviceInfo {
        name: "fake:0".into(),
        backend: "fake",
        kind: super::DeviceKind::Cpu,
        description: String::new(),
        threads: 0,
        cores: Vec::new(),
        memory_bytes: 0,
        features: Vec::new(),
        weight_types: Vec::new(),
        waits_on_host_points: false,
    })
}

#[test]
fn tensors_are_allocated_by_type_and_shape() {
    use super::Device;
    let device = fake_device();
    let f32s = device.alloc_tensor(DType::F32, &[3, 4]).expect("f32");
    assert_eq!((f32s.offset(), f32s.bytes(), f32s.buffer().len()), (0, 48, 48));
    let q8 = device.alloc_tensor(DType::Q8_0, &[2, 64]).expect("q8_0");
    let row = DType::Q8_0.row_bytes(64).expect("whole blocks");
    assert_eq!((q8.bytes(), q8.buffer().len(), q8.dtype()), (2 * row, 2 * row, DType::Q8_0));
    assert!(matches!(device.alloc_tensor(DType::Q8_0, &[2, 33]), Err(super::DeviceError::Shape(_))), "a partial block");
}

#[test]
fn a_device_holds_the_weight_types_it_declares_only() {
    use super::Device;
    let mut device = fake_device();
    assert!(!device.holds_weights(DType::F32), "a device that declares no weight types holds none");
    device.0.weight_types = vec![DType::F32, DType::Q4_0];
    let held: Vec<bool> = [DType::F32, DType::Q4_0, DType::Q8_0].map(|t| device.holds_weights(t)).to_vec();
    assert_eq!(held, [true, true, false], "f32 and q4_0 declared, q8_0 not");
}

#[test]
fn a_device_that_keeps_no_count_reports_no_memory() {
    use super::Device;
    assert_eq!(fake_device().memory(), None, "no figures rather than zeros");
}

#[test]
fn a_device_that_cannot_address_files_maps_none() {
    use super::{Device, FileRange};
    let path = std::env::current_exe().expect("the test binary's path");
    let file = std::fs::File::open(&path).expect("the test binary opens for reading");
    let mapped = fake_device().map_file(FileRange { file: &file, offset: 0, len: 16 }).expect("not an error");
    assert!(mapped.is_none(), "a device that cannot address the page cache maps nothing");
}

#[test]
fn buffers_and_ranges_report_their_bytes() {
    let (b, empty) = (buffer(64), buffer(0));
    assert_eq!((b.len(), b.is_empty(), b.raw().len(), b.raw().is_empty()), (64, false, 64, false));
    assert_eq!((empty.len(), empty.is_empty(), empty.raw().is_empty()), (0, true, true));
    assert_eq!(b.device(), "fake:0");
    assert_eq!(format!("{b:?}"), format!("Buffer#{}(fake:0, 64 bytes)", b.id()));
    assert_ne!(b.id(), empty.id(), "ids are unique");
    assert!(b.same_as(&b.clone()) && !b.same_as(&empty));
    let r = b.range(8, 16).expect("inside");
    assert_eq!((r.range(), r.start(), r.end(), r.len(), r.is_empty()), (8..24, 8, 24, 16, false));
    assert!(r.buffer().same_as(&b));
    assert!(b.range(8, 0).expect("empty").is_empty());
    assert_eq!(b.all().range(), 0..64);
    assert!(b.range(0, 64).is_ok() && b.range(1, 64).is_err() && b.range(64, 1).is_err());
}

#[test]
fn ranges_overlap_when_they_share_a_byte_of_one_buffer() {
    let (a, b) = (buffer(64), buffer(64));
    let r = |buf: &Buffer, start, len| buf.range(start, len).expect("range");
    let cases = [
        (r(&a, 0, 8), r(&a, 8, 8), false),
        (r(&a, 8, 8), r(&a, 0, 8), false),
        (r(&a, 0, 9), r(&a, 8, 8), true),
        (r(&a, 8, 8), r(&a, 0, 9), true),
        (r(&a, 4, 2), r(&a, 0, 16), true),
        (r(&a, 0, 16), r(&a, 4, 2), true),
        (r(&a, 0, 16), r(&b, 0, 16), false),
        (r(&a, 0, 8), r(&a, 32, 8), false),
    ];
    for (x, y, expected) in cases {
        assert_eq!(x.overlaps(&y), expected, "{:?} and {:?}", x.range(), y.range());
    }
}

#[test]
fn a_tensor_knows_its_place_and_bytes() {
    let b = buffer(64);
    let t = TensorRef::new(&b, 16, DType::F32, &[2, 3]).expect("fits");
    assert_eq!((t.offset(), t.dtype(), t.shape().dims(), t.bytes()), (16, DType::F32, &[2usize, 3][..], 24));
    assert!(t.buffer().same_as(&b));
    assert_eq!(t.byte_range().range(), 16..40);
}

/// `y = (x + w) * 2` and a copy of `y` into the cache leaf `c`.
struct Fixture {
    graph: Arc<Graph>,
    a: Buffer,
    b: Buffer,
}

fn fixture() -> Fixture {
    let mut g = Graph::new();
    let x = g.leaf("x", DType::F32, &[4], Flags::INPUT).expect("x");
    let w = g.leaf("w", DType::F32, &[4], Flags::WEIGHT).expect("w");
    let s = g.add(x, w).expect("add");
    let y = g.scale(s, 2.0).expect("scale");
    g.mark(y, Flags::OUTPUT).expect("mark");
    g.set_name(y, "y").expect("name");
    let c = g.leaf("c", DType::F32, &[4], Flags::NONE).expect("c");
    let k = g.copy_into(c, y).expect("copy_into");
    g.mark(k, Flags::OUTPUT).expect("mark");
    g.set_name(k, "k").expect("name");
    Fixture { graph: Arc::new(g), a: buffer(64), b: buffer(32) }
}

impl Fixture {
    fn tensor(&self, buffer: &Buffer, offset: usize) -> TensorRef {
        TensorRef::new(buffer, offset, DType::F32, &[4]).expect("tensor")
    }

    /// x at a[0..16], w at a[16..32], c at a[48..64], y at b[16..32].
    fn bindings(&self) -> Bindings {
        let mut bindings = Bindings::new(&self.graph);
        for (name, buffer, offset) in [("x", &self.a, 0), ("w", &self.a, 16), ("c", &self.a, 48), ("y", &self.b, 16)] {
            bindings.bind_name(name, self.tensor(buffer, offset)).expect(name);
        }
        bindings
    }
}

fn binding_error(result: Result<&mut Bindings, StreamError>) -> (String, String) {
    match result {
        Err(StreamError::Binding { node, reason }) => (node, reason),
        Err(other) => panic!("expected a binding error, got {other}"),
        Ok(_) => panic!("expected a binding error, it bound"),
    }
}

#[test]
fn only_leaves_and_outputs_of_the_same_type_and_shape_are_bound() {
    let f = fixture();
    let g = &f.graph;
    let node = |name: &str| g.find(name).expect(name);
    let mut b = Bindings::new(g);
    let s = g.nodes().iter().position(|n| n.name.is_none()).map(crate::graph::NodeId).expect("the add");
    assert_eq!(binding_error(b.bind(s, f.tensor(&f.a, 0))).0, format!("node {}", s.0), "an intermediate");
    assert_eq!(binding_error(b.bind_name("k", f.tensor(&f.a, 0))).0, "k", "an output that aliases its input");
    let wrong_type = TensorRef::new(&f.a, 0, DType::I32, &[4]).expect("i32");
    assert_eq!(binding_error(b.bind_name("x", wrong_type)).0, "x");
    let wrong_shape = TensorRef::new(&f.a, 0, DType::F32, &[5]).expect("5 floats");
    assert_eq!(binding_error(b.bind_name("x", wrong_shape)).0, "x");
    assert!(b.bind_name("nothing", f.tensor(&f.a, 0)).is_err());
    assert!(b.get(node("x")).is_none());
    b.bind_name("x", f.tensor(&f.a, 16)).expect("a leaf");
    b.bind_name("y", f.tensor(&f.b, 0)).expect("an output");
    assert_eq!(b.get(node("x")).map(|t| t.offset()), Some(16));
    assert!(Arc::ptr_eq(b.graph(), g), "the bindings hold their graph");
}

#[test]
fn bindings_take_a_graph_an_arc_or_a_borrowed_arc() {
    let f = fixture();
    let owned = Arc::clone(&f.graph);
    assert!(Arc::ptr_eq(Bindings::new(&f.graph).graph(), &f.graph), "&Arc: the same graph, cloned handle");
    assert!(Arc::ptr_eq(Bindings::new(owned).graph(), &f.graph), "Arc: moved in");
    let fresh = Bindings::new((*f.graph).clone());
    assert_eq!(fresh.graph().nodes().len(), f.graph.nodes().len(), "Graph: held in a new Arc");
    assert!(!Arc::ptr_eq(fresh.graph(), &f.graph));
}

#[test]
fn complete_bindings_are_checked_once_and_their_ranges_merged() {
    let f = fixture();
    let bindings = f.bindings();
    bindings.check_complete().expect("complete");
    let (reads, writes) = bindings.accesses();
    let spans = |ranges: &[super::BufferRange]| ranges.iter().map(|r| (r.buffer().id(), r.range())).collect::<Vec<_>>();
    assert_eq!(spans(&reads), [(f.a.id(), 0..32)], "x and w touch: one read range");
    assert_eq!(spans(&writes), [(f.a.id(), 48..64), (f.b.id(), 16..32)], "c (copied into) and y");
    let bound = BoundGraph::new(bindings).expect("bound");
    assert!(Arc::ptr_eq(bound.graph(), &f.graph));
    assert_eq!(bound.bindings().get(f.graph.find("y").expect("y")).map(|t| t.offset()), Some(16));

    let mut missing = Bindings::new(&f.graph);
    missing.bind_name("x", f.tensor(&f.a, 0)).expect("x");
    assert!(missing.check_complete().is_err(), "w, c and y are not bound");
    let mut overlapping = f.bindings();
    overlapping.bind_name("y", f.tensor(&f.a, 8)).expect("y over x and w");
    assert!(overlapping.check_complete().is_err(), "a written tensor overlapping a read one");
}

#[test]
fn host_buffers_are_their_elements_bytes() {
    let mut v = vec![1.0f32, -2.0];
    let expected: Vec<u8> = [1.0f32.to_ne_bytes(), (-2.0f32).to_ne_bytes()].concat();
    assert_eq!(as_bytes(&v), &expected[..]);
    assert_eq!(HostBytes::bytes(&v), &expected[..]);
    as_bytes_mut(&mut v)[..4].copy_from_slice(&3.0f32.to_ne_bytes());
    HostBytes::bytes_mut(&mut v)[4..].copy_from_slice(&4.0f32.to_ne_bytes());
    assert_eq!(v, [3.0, 4.0]);
    let mut boxed: Box<[i32]> = vec![7, 8].into_boxed_slice();
    assert_eq!(HostBytes::bytes(&boxed), &[7i32.to_ne_bytes(), 8i32.to_ne_bytes()].concat()[..]);
    HostBytes::bytes_mut(&mut boxed)[..4].copy_from_slice(&9i32.to_ne_bytes());
    assert_eq!(&boxed[..], &[9, 8]);
}

fn pending(host: &HostTimeline, buffer: Vec<u8>) -> (crate::sync::Release, Pending<Vec<u8>>) {
    let release = host.reserve();
    let pending = Pending::new(release.point(), "fake:0/stream-0".into(), Arc::new(Slot(Mutex::new(Some(buffer)))));
    (release, pending)
}

#[test]
fn a_pending_transfer_gives_its_buffer_back_or_itself_on_a_timeout() {
    let host = HostTimeline::new("h");
    let (release, p) = pending(&host, vec![1, 2]);
    assert!(!p.is_ready());
    assert!(matches!(p.wait_timeout(Duration::from_millis(5)), Err(StreamError::Wait(_))), "a pending point times out");
    let err = p.wait_within(Duration::from_millis(5)).expect_err("still pending");
    assert!(err.is_timeout(), "{err}");
    assert_eq!(err.to_string(), err.error.to_string(), "Display is the error's");
    assert_eq!(format!("{err:?}"), format!("{:?}", err.error), "Debug is the error's");
    let p = err.into_pending().expect("the transfer comes back");
    release.signal();
    assert!(p.is_ready() && p.wait_timeout(Duration::ZERO).is_ok());
    assert_eq!(p.point().value(), 1);
    assert_eq!(p.wait_within(Duration::from_secs(5)).expect("reached"), [1, 2]);

    let (release, p) = pending(&host, vec![3]);
    release.fail("gone");
    let err = within(move || p.wait()).expect_err("failed");
    assert!(!err.is_timeout() && err.to_string().contains("gone"), "{err}");
    assert_eq!(err.into_buffer(), Some(vec![3]), "a failed transfer returns its buffer (D-RETURN)");

    let (release, p) = pending(&host, vec![4]);
    release.fail("gone");
    let err = p.wait_within(Duration::from_secs(5)).expect_err("failed");
    assert!(err.into_pending().is_none(), "a failed transfer is over");
}

#[test]
fn a_pending_errors_source_is_its_stream_errors_source() {
    use std::error::Error;
    let shape = crate::shape::ShapeError::Rank(5);
    let refused = PendingError::refused(StreamError::Shape(shape.clone()), vec![0u8; 4]);
    let source = refused.source().expect("the stream error's source, the shape error");
    assert_eq!(source.downcast_ref::<crate::shape::ShapeError>(), Some(&shape));
    let closed = PendingError::refused(StreamError::Closed("fake:0/stream-0".into()), vec![0u8; 4]);
    assert!(closed.source().is_none(), "a stream error without a source gives none");
}

#[test]
fn a_pending_transfer_whose_buffer_is_gone_reports_the_stream_closed() {
    let host = HostTimeline::new("h");
    let release = host.reserve();
    let slot: Arc<Slot<Vec<u8>>> = Arc::new(Slot(Mutex::new(None)));
    let p = Pending::new(release.point(), "fake:0/stream-0".into(), slot);
    release.signal();
    match within(move || p.wait()) {
        Err(e) => assert!(matches!(&e.error, StreamError::Closed(s) if s == "fake:0/stream-0"), "{e}"),
        Ok(b) => panic!("expected Closed, got a buffer {b:?}"),
    }
}

#[test]
fn paths_print_their_names() {
    let names = [WaitPath::StreamOrder.to_string(), WaitPath::Native.to_string(), WaitPath::Relay.to_string()];
    assert_eq!(names, ["stream order", "native wait", "relay wait"]);
    assert_eq!([CopyPath::Direct.to_string(), CopyPath::HostStaged.to_string()], ["direct copy", "host-staged copy"]);
}

/// Set in the child processes of the test below (each reads its own
/// environment once).
const SANITIZE_CASE: &str = "BATON_TEST_SANITIZE_PRINTING";

#[test]
#[cfg_attr(miri, ignore = "Miri cannot spawn the child processes that read their own environment")]
fn the_sanitizer_prints_under_baton_sanitize_1() {
    let cases = [("unset", None, false), ("on", Some("1"), true), ("other", Some("yes"), false)];
    if let Ok(case) = std::env::var(SANITIZE_CASE) {
        let (_, _, expected) = cases.iter().find(|(name, _, _)| *name == case).expect("a known case");
        assert_eq!(super::hazard::printing(), *expected, "case {case}");
        return;
    }
    for (case, value, _) in cases {
        let mut child = std::process::Command::new(std::env::current_exe().expect("the test binary"));
        child.args(["--exact", "backend::tests::the_sanitizer_prints_under_baton_sanitize_1", "--test-threads=1"]);
        child.env_remove("BATON_SANITIZE").env(SANITIZE_CASE, case);
        if let Some(v) = value {
            child.env("BATON_SANITIZE", v);
        }
        let out = child.output().expect("run the test binary");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && stdout.contains("1 passed"), "case {case}: {stdout}");
    }
}

/// A stream that runs nothing: it records the names of the items queued
/// and hands out their values, which stay pending unless a test advances
/// them, so the safe front's decisions (which waits it inserts, what it
/// refuses) can be checked one by one.
struct FakeStream {
    label: String,
    timeline: Timeline,
    /// Held so the values stay pending (a dropped writer fails them).
    _writer: TimelineWriter,
    queued: Mutex<Vec<&'static str>>,
    /// Whether it waits natively on host-memory points.
    native: bool,
    /// When set, the next `submit` says so on the first channel and then
    /// waits for the second before it returns.
    hold: Mutex<Option<(mpsc::Sender<()>, mpsc::Receiver<()>)>>,
}

impl FakeStream {
    fn new(label: &str, native: bool) -> Arc<FakeStream> {
        let (timeline, writer) = Timeline::new(label);
        Arc::new(FakeStream {
            label: label.into(),
            timeline,
            _writer: writer,
            queued: Mutex::new(Vec::new()),
            native,
            hold: Mutex::new(None),
        })
    }

    fn queued(&self) -> Vec<&'static str> {
        self.queued.lock().clone()
    }
}

// SAFETY: it runs no item, so it never touches memory (its buffers are
// fake and never addressed) and no value is reached unless a test advances
// it after the item would have run; `submit` blocks only when a test holds
// it on purpose.
unsafe impl RawStream for FakeStream {
    fn label(&self) -> &str {
        &self.label
    }
    fn timeline(&self) -> &Timeline {
        &self.timeline
    }
    fn can_wait_on(&self, point: &SyncPoint) -> bool {
        self.native && *point.timeline().domain() == Domain::HostMemory
    }
    fn can_access(&self, range: &BufferRange) -> bool {
        range.buffer().len() < 1000
    }
    unsafe fn submit(&self, op: StreamOp) -> Result<u64, StreamError> {
        let held = self.hold.lock().take();
        if let Some((entered, leave)) = held {
            entered.send(()).expect("the test listens");
            leave.recv_timeout(BOUND).expect("the test lets the submission end");
        }
        let mut queued = self.queued.lock();
        queued.push(op.name());
        Ok(queued.len() as u64)
    }
}

fn fake_stream(label: &str) -> (Arc<FakeStream>, Stream) {
    let raw = FakeStream::new(label, true);
    (raw.clone(), Stream::with_policy(raw, WaitPolicy::Block))
}

#[test]
fn a_stream_reports_its_policy_deadline_and_paths() {
    let raw = FakeStream::new("fake:0/stream-0", true);
    let poll = WaitPolicy::Poll { bound: Duration::from_secs(3) };
    let s = Stream::with_policy(raw.clone(), poll);
    assert_eq!((s.wait_policy(), s.wait_deadline()), (poll, default_wait_deadline()));
    let s = s.with_deadline(Some(Duration::from_secs(7)));
    assert_eq!(s.wait_deadline(), Some(Duration::from_secs(7)));
    assert_eq!(s.with_deadline(None).wait_deadline(), None);
    let (small, big) = (buffer(64).all(), buffer(4096).all());
    assert_eq!((raw.can_compute_on(&small), raw.can_compute_on(&big)), (true, false), "by default, what it can access");
    let s = Stream::with_policy(raw.clone(), poll);
    assert_eq!((s.copy_path(&small), s.copy_path(&big)), (CopyPath::Direct, CopyPath::HostStaged));
    let host = HostTimeline::new("h");
    let release = host.reserve();
    assert_eq!(s.wait_path(&s.last_point()), WaitPath::StreamOrder);
    assert_eq!(s.wait_path(&release.point()), WaitPath::Native);
    let relaying = Stream::with_policy(FakeStream::new("fake:1/stream-0", false), poll);
    assert_eq!(relaying.wait_path(&release.point()), WaitPath::Relay);
    release.signal();
}

#[test]
fn the_relay_bridges_a_point_the_stream_cannot_wait_on() {
    let raw = FakeStream::new("fake:1/stream-0", false);
    let s = Stream::with_policy(raw.clone(), WaitPolicy::Block);
    let host = HostTimeline::new("h");
    let (first, second) = (host.reserve(), host.reserve());
    assert!(matches!(s.wait(&first.point()), Err(StreamError::ForeignPoint { .. })), "Stream::wait refuses it");
    let points = [first.point(), second.point(), s.last_point()];
    let relayed: Vec<bool> = points.iter().map(|p| s.wait_or_relay(p, WaitPolicy::Block).expect("queued")).collect();
    assert_eq!(relayed, [true, true, false], "two host points relayed, its own point in stream order");
    assert_eq!((s.relayed_waits(), raw.queued()), (2, vec!["host_fn", "host_fn"]));
    let native = FakeStream::new("fake:0/stream-0", true);
    let n = Stream::with_policy(native.clone(), WaitPolicy::Block);
    assert!(!n.wait_or_relay(&first.point(), WaitPolicy::Block).expect("native"), "a native wait, no relay");
    assert_eq!((n.relayed_waits(), native.queued()), (0, vec!["wait"]));
    first.signal();
    second.signal();
}

#[test]
fn copies_move_whole_tensors_of_one_type_and_size() {
    let (_raw, s) = fake_stream("fake:0/stream-0");
    let b = buffer(64);
    let t = |offset, dtype, dims: &[usize]| TensorRef::new(&b, offset, dtype, dims).expect("tensor");
    let f32x4 = t(0, DType::F32, &[4]);
    for (dst, what) in [(t(16, DType::F32, &[3]), "fewer elements"), (t(32, DType::I32, &[4]), "another type")] {
        assert!(matches!(s.copy(&f32x4, &dst, None), Err(StreamError::SizeMismatch { .. })), "{what}");
    }
    s.copy(&f32x4, &t(16, DType::F32, &[4]), None).expect("same type and size");
}

#[test]
fn a_refused_transfer_hands_the_callers_buffer_back() {
    let (raw, s) = fake_stream("fake:0/stream-0");
    let small = TensorRef::new(&buffer(64), 0, DType::F32, &[4]).expect("tensor");
    let far = TensorRef::new(&buffer(4096), 0, DType::F32, &[4]).expect("tensor");
    let (error, back) = s.write_async(&small, vec![1f32, 2.0, 3.0]).err().expect("a wrong size").into_parts();
    assert!(matches!(error, StreamError::SizeMismatch { host: 12, tensor: 16 }), "{error}");
    assert_eq!(back, Some(vec![1f32, 2.0, 3.0]), "refused before queueing: the buffer as lent");
    let refused = s.read_into_async(&small, vec![7f32; 5]).err().expect("a wrong size");
    assert_eq!(refused.into_buffer(), Some(vec![7f32; 5]));
    // Refused by the submission itself (the stream cannot reach the
    // buffer), after the transfer's slot was made.
    let (error, back) = s.write_async(&far, vec![3f32; 4]).err().expect("out of reach").into_parts();
    assert!(matches!(error, StreamError::InaccessibleBuffer { .. }), "{error}");
    assert_eq!(back, Some(vec![3f32; 4]));
    let refused = s.read_into_async(&far, vec![4f32; 4]).err().expect("out of reach");
    assert_eq!(refused.into_buffer(), Some(vec![4f32; 4]));
    let as_stream_error: StreamError = s.write_async(&small, vec![0f32; 1]).err().expect("refused").into();
    assert!(matches!(as_stream_error, StreamError::SizeMismatch { .. }), "`?` gives the stream error");
    assert!(raw.queued().is_empty(), "nothing refused was queued");
}

#[test]
fn only_overlapping_unordered_accesses_get_a_wait() {
    let (writer_raw, writer) = fake_stream("fake:0/stream-0");
    let (reader_raw, reader) = fake_stream("fake:0/stream-1");
    let b = buffer(64);
    let _transfer = writer.write_range_async(&b.range(16, 16).expect("range"), vec![0u8; 16]).expect("write");
    let floats = |offset, n| TensorRef::new(&b, offset, DType::F32, &[n]).expect("tensor");
    // Ranges that end where the write starts, or start where it ends.
    for (offset, n) in [(0, 4), (32, 2)] {
        let _transfer = reader.read_into_async(&floats(offset, n), vec![0f32; n]).expect("read");
        assert_eq!(
            reader.implicit_waits(),
            0,
            "bytes {:?} do not overlap 16..32",
            floats(offset, n).byte_range().range()
        );
    }
    let _transfer = reader.read_into_async(&floats(8, 4), vec![0f32; 4]).expect("read");
    assert_eq!(reader.implicit_waits(), 1, "bytes 8..24 overlap the write of 16..32");
    assert_eq!(reader_raw.queued(), ["read", "read", "wait", "read"]);
    assert_eq!(writer_raw.queued(), ["write"]);
    let report = &reader.hazard_reports()[0];
    assert_eq!((report.earlier.op, report.earlier.write, report.later.op), ("write", true, "read"));
    assert!(report.to_string().contains("fake:0/stream-1 must wait on fake:0/stream-0@1"), "{report}");
}

#[test]
fn a_wait_on_a_later_point_covers_the_earlier_ones_of_its_stream() {
    let (_a_raw, a) = fake_stream("fake:0/stream-0");
    let (_b_raw, b) = fake_stream("fake:0/stream-1");
    let (c_raw, c) = fake_stream("fake:0/stream-2");
    let (x, y) = (buffer(64), buffer(64));
    let tensor = |buf: &Buffer| TensorRef::new(buf, 0, DType::F32, &[16]).expect("tensor");
    let _transfer = a.write_async(&tensor(&x), vec![0f32; 16]).expect("write");
    let _transfer = a.write_async(&tensor(&x), vec![0f32; 16]).expect("write");
    let _transfer = b.write_async(&tensor(&y), vec![0f32; 16]).expect("write");
    // The copy reads x (two writes of a) and writes y (a write of b): one
    // wait on a's later point covers both of a's writes, one on b's.
    c.copy(&tensor(&x), &tensor(&y), None).expect("copy");
    assert_eq!(c.hazard_reports().len(), 3, "{:?}", c.hazard_reports());
    assert_eq!((c.implicit_waits(), c_raw.queued()), (2, vec!["wait", "wait", "copy"]));
}

/// Holds `stream`'s next raw submission (`raw` is its backend) while
/// `submit` runs on a thread, then runs `other` on another thread: whether
/// `other` ended while the first submission was held, and after it ended.
fn while_held(
    raw: &FakeStream,
    submit: impl FnOnce() -> Result<(), StreamError> + Send + 'static,
    other: impl FnOnce() -> Result<(), StreamError> + Send + 'static,
) -> bool {
    let (entered_tx, entered_rx) = mpsc::channel();
    let (leave_tx, leave_rx) = mpsc::channel();
    *raw.hold.lock() = Some((entered_tx, leave_rx));
    let holder = std::thread::spawn(submit);
    entered_rx.recv_timeout(BOUND).expect("the held submission started");
    let (done_tx, done_rx) = mpsc::channel();
    let submitter = std::thread::spawn(move || {
        other().expect("the other submission");
        done_tx.send(()).expect("send");
    });
    let overlapped = done_rx.recv_timeout(Duration::from_millis(200)).is_ok();
    leave_tx.send(()).expect("leave");
    if !overlapped {
        done_rx.recv_timeout(BOUND).expect("the other submission ends once the held one has");
    }
    holder.join().expect("holder").expect("held submission");
    submitter.join().expect("submitter");
    overlapped
}

#[test]
fn submissions_of_streams_that_share_no_buffer_run_in_parallel() {
    let (held_raw, held) = fake_stream("fake:0/stream-0");
    let (_other_raw, other) = fake_stream("fake:0/stream-1");
    let (a, b) = (buffer(64), buffer(64));
    let (ra, rb) = (a.all(), b.all());
    let overlapped = while_held(
        &held_raw,
        move || held.write_range_async(&ra, vec![0u8; 64]).map(drop).map_err(StreamError::from),
        move || other.write_range_async(&rb, vec![0u8; 64]).map(drop).map_err(StreamError::from),
    );
    assert!(overlapped, "a stream's submission waited for another stream's on other memory");
}

#[test]
fn submissions_that_touch_a_common_buffer_are_serialised() {
    let (held_raw, held) = fake_stream("fake:0/stream-0");
    let (_other_raw, other) = fake_stream("fake:0/stream-1");
    let shared = buffer(64);
    let (first, second) = (shared.range(0, 32).expect("range"), shared.range(32, 32).expect("range"));
    let overlapped = while_held(
        &held_raw,
        move || held.write_range_async(&first, vec![0u8; 32]).map(drop).map_err(StreamError::from),
        move || other.write_range_async(&second, vec![0u8; 32]).map(drop).map_err(StreamError::from),
    );
    assert!(!overlapped, "two streams checked and recorded accesses of one buffer at once");
}

#[test]
fn submissions_of_one_stream_are_serialised() {
    let (held_raw, held) = fake_stream("fake:0/stream-0");
    let again = held.clone();
    let overlapped =
        while_held(&held_raw, move || held.host_fn(|| Ok(())).map(drop), move || again.host_fn(|| Ok(())).map(drop));
    assert!(!overlapped, "two submissions of one stream ran at once");
}

#[test]
fn a_buffer_forgets_the_accesses_that_settled() {
    let b = buffer(64);
    let host = HostTimeline::new("h");
    let (write, read) = (host.reserve(), host.reserve());
    let mut log = b.accesses();
    log.record(Access { range: 0..8, write: true, point: write.point(), op: "write" });
    log.record(Access { range: 8..16, write: false, point: read.point(), op: "read" });
    let ops = |log: &mut super::buffer::AccessLog, write| log.conflicting(write).map(|a| a.op).collect::<Vec<_>>();
    assert_eq!(ops(&mut log, true), ["write", "read"], "a write conflicts with every access in flight");
    assert_eq!(ops(&mut log, false), ["write"], "a read with the writes only");
    write.signal();
    assert_eq!(ops(&mut log, false), Vec::<&str>::new(), "a reached write is settled");
    assert_eq!(log.kept(), (0, 1));
    drop(read);
    assert_eq!(ops(&mut log, true), Vec::<&str>::new(), "a failed read is settled too");
    assert_eq!(log.kept(), (0, 0));
}

/// Host memory the tests below read through `Buffer::final_host_bytes`;
/// nothing writes it after it is made.
struct HostMemory {
    bytes: NonNull<[u8]>,
}

impl HostMemory {
    fn holding(bytes: &[u8]) -> HostMemory {
        HostMemory { bytes: NonNull::from(Box::leak(bytes.to_vec().into_boxed_slice())) }
    }
}

impl Drop for HostMemory {
    fn drop(&mut self) {
        // SAFETY: `bytes` came from `Box::leak` in `holding` and is freed
        // once, here.
        drop(unsafe { Box::from_raw(self.bytes.as_ptr()) });
    }
}

// SAFETY: the memory is owned by the value alone and only read through
// the runtime's handle (no stream in these tests runs an item).
unsafe impl Send for HostMemory {}
// SAFETY: as above.
unsafe impl Sync for HostMemory {}

// SAFETY: `len` never changes; `host_ptr` points to `len` bytes owned by
// the value until it is dropped.
unsafe impl RawBuffer for HostMemory {
    fn len(&self) -> usize {
        self.bytes.len()
    }
    fn device(&self) -> &str {
        "host:0"
    }
    fn host_ptr(&self) -> Option<NonNull<u8>> {
        Some(self.bytes.cast())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[test]
fn the_host_reads_a_buffers_bytes_only_once_they_are_final_weights() {
    let b = Buffer::new(Box::new(HostMemory::holding(&[1, 2, 3, 4, 5, 6, 7, 8])));
    assert_eq!(b.final_host_bytes(0..8), None, "plain memory: any stream may write it");
    b.declare_weights();
    assert_eq!(b.final_host_bytes(0..8), None, "weights not sealed yet: uploads may come");
    let host = HostTimeline::new("h");
    let upload = host.reserve();
    b.accesses().record(Access { range: 0..4, write: true, point: upload.point(), op: "write" });
    b.seal_if_weights();
    assert_eq!(b.final_host_bytes(4..8), None, "an upload queued before the seal is still in flight");
    upload.signal();
    assert_eq!(b.final_host_bytes(2..6), Some(&[3u8, 4, 5, 6][..]), "sealed and settled: final");
    assert_eq!(b.final_host_bytes(8..8), Some(&[][..]));
    assert_eq!(b.final_host_bytes(4..9), None, "past the end");
    let no_host = buffer(8);
    no_host.declare_weights();
    no_host.seal_if_weights();
    assert_eq!(no_host.final_host_bytes(0..8), None, "memory the host cannot address");
    let mapped = Buffer::new_sealed_weights(Box::new(HostMemory::holding(&[9; 4])));
    assert_eq!(mapped.final_host_bytes(0..4), Some(&[9u8; 4][..]), "sealed from its creation (a file's pages)");
}
