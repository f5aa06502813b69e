//! The safe types' own logic without a backend: ranges, bindings, host
//! buffers and pending transfers, printed names.

use std::any::Any;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::host::Slot;
use super::{
    as_bytes, as_bytes_mut, Bindings, BoundGraph, Buffer, CopyPath, HostBytes, Pending, RawBuffer, StreamError,
    TensorRef, WaitPath,
};
use crate::graph::{Flags, Graph};
use crate::sync::HostTimeline;
use crate::DType;

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

fn buffer(len: usize) -> Buffer {
    Buffer::new(Box::new(FakeBuffer { len }))
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
            bindings.bind_name(&self.graph, name, self.tensor(buffer, offset)).expect(name);
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
    assert_eq!(binding_error(b.bind(g, s, f.tensor(&f.a, 0))).0, format!("node {}", s.0), "an intermediate");
    assert_eq!(binding_error(b.bind_name(g, "k", f.tensor(&f.a, 0))).0, "k", "an output that aliases its input");
    let wrong_type = TensorRef::new(&f.a, 0, DType::I32, &[4]).expect("i32");
    assert_eq!(binding_error(b.bind_name(g, "x", wrong_type)).0, "x");
    let wrong_shape = TensorRef::new(&f.a, 0, DType::F32, &[5]).expect("5 floats");
    assert_eq!(binding_error(b.bind_name(g, "x", wrong_shape)).0, "x");
    assert!(b.bind_name(g, "nothing", f.tensor(&f.a, 0)).is_err());
    assert!(b.get(node("x")).is_none());
    b.bind_name(g, "x", f.tensor(&f.a, 16)).expect("a leaf");
    b.bind_name(g, "y", f.tensor(&f.b, 0)).expect("an output");
    assert_eq!(b.get(node("x")).map(|t| t.offset()), Some(16));
    let mut other = Graph::new();
    other.leaf("x", DType::F32, &[4], Flags::INPUT).expect("x");
    let mut foreign = Bindings::new(&other);
    let (_, reason) = binding_error(foreign.bind_name(g, "x", f.tensor(&f.a, 0)));
    assert!(reason.contains("another graph"), "{reason}");
    assert!(f.bindings().check_complete(&other).is_err(), "bindings of another graph");
}

#[test]
fn complete_bindings_are_checked_once_and_their_ranges_merged() {
    let f = fixture();
    let bindings = f.bindings();
    bindings.check_complete(&f.graph).expect("complete");
    let (reads, writes) = bindings.accesses(&f.graph);
    let spans = |ranges: &[super::BufferRange]| ranges.iter().map(|r| (r.buffer().id(), r.range())).collect::<Vec<_>>();
    assert_eq!(spans(&reads), [(f.a.id(), 0..32)], "x and w touch: one read range");
    assert_eq!(spans(&writes), [(f.a.id(), 48..64), (f.b.id(), 16..32)], "c (copied into) and y");
    let bound = BoundGraph::new(&f.graph, bindings).expect("bound");
    assert!(Arc::ptr_eq(bound.graph(), &f.graph));
    assert_eq!(bound.bindings().get(f.graph.find("y").expect("y")).map(|t| t.offset()), Some(16));

    let mut missing = Bindings::new(&f.graph);
    missing.bind_name(&f.graph, "x", f.tensor(&f.a, 0)).expect("x");
    assert!(missing.check_complete(&f.graph).is_err(), "w, c and y are not bound");
    let mut overlapping = f.bindings();
    overlapping.bind_name(&f.graph, "y", f.tensor(&f.a, 8)).expect("y over x and w");
    assert!(overlapping.check_complete(&f.graph).is_err(), "a written tensor overlapping a read one");
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
    let err = p.wait().expect_err("failed");
    assert!(!err.is_timeout() && err.to_string().contains("gone"), "{err}");
    assert_eq!(err.into_buffer(), Some(vec![3]), "a failed transfer returns its buffer (D-RETURN)");

    let (release, p) = pending(&host, vec![4]);
    release.fail("gone");
    let err = p.wait_within(Duration::from_secs(5)).expect_err("failed");
    assert!(err.into_pending().is_none(), "a failed transfer is over");
}

#[test]
fn a_pending_transfer_whose_buffer_is_gone_reports_the_stream_closed() {
    let host = HostTimeline::new("h");
    let release = host.reserve();
    let slot: Arc<Slot<Vec<u8>>> = Arc::new(Slot(Mutex::new(None)));
    let p = Pending::new(release.point(), "fake:0/stream-0".into(), slot);
    release.signal();
    match p.wait() {
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
