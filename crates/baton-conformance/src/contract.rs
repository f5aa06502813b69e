//! One test per rule of `docs/contract.md`, named by the rule's ID.
//!
//! Host gates (a stream waiting on a host `Release`) make every ordering
//! test deterministic: work is queued behind a gate, checked to be pending,
//! and released, instead of relying on timing.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_core::backend::{Bindings, StreamError, TensorRef};
use baton_core::graph::{Flags, Graph};
use baton_core::sync::{Domain, Failure, FailureKind, HostTimeline, PointStatus, Timeline, WaitError};
use baton_core::DType;

use crate::relay;
use crate::util::{
    assert_pending, download, expect_failure, gate, random, synchronize, upload, within, Fixture, RULE_TIMEOUT,
};

/// `y = x * factor` over `n` f32 elements, with `x` and `y` named: the
/// small computation the rules (and other test suites) queue.
pub fn scale_graph(n: usize, factor: f32) -> Arc<Graph> {
    let mut g = Graph::new();
    let x = g.leaf("x", DType::F32, &[n], Flags::INPUT).expect("leaf");
    let y = g.scale(x, factor).expect("scale");
    g.mark(y, Flags::OUTPUT).expect("mark");
    g.set_name(y, "y").expect("name");
    Arc::new(g)
}

fn bind(graph: &Arc<Graph>, x: &TensorRef, y: &TensorRef) -> Bindings {
    let mut b = Bindings::new(graph);
    b.bind_name("x", x.clone()).expect("bind x");
    b.bind_name("y", y.clone()).expect("bind y");
    b
}

/// A graph whose computation fails: a row lookup with an id out of range.
fn failing_graph() -> (Arc<Graph>, Vec<i32>) {
    let mut g = Graph::new();
    let table = g.leaf("table", DType::F32, &[4, 8], Flags::WEIGHT).expect("leaf");
    let ids = g.leaf("ids", DType::I32, &[1], Flags::INPUT).expect("leaf");
    let rows = g.get_rows(table, ids).expect("get_rows");
    g.mark(rows, Flags::OUTPUT).expect("mark");
    g.set_name(rows, "rows").expect("name");
    (Arc::new(g), vec![1000])
}

/// P-MONO: reached stays reached, failed stays failed, values only grow.
pub fn p_mono(_f: &Fixture) {
    let host = HostTimeline::new("p-mono");
    let (r1, r2, r3) = (host.reserve(), host.reserve(), host.reserve());
    let (p1, p2, p3) = (r1.point(), r2.point(), r3.point());
    r2.signal();
    assert!(p1.is_reached() && p2.is_reached(), "signalling 2 reaches 1 and 2");
    assert_eq!(host.timeline().reached(), 2);
    r1.signal(); // an earlier release after a later one changes nothing
    assert_eq!(host.timeline().reached(), 2, "the counter never goes back");
    drop(r3);
    assert!(matches!(p3.status(), PointStatus::Failed(_)));
    assert!(p2.is_reached(), "a reached point stays reached after a later failure");
    assert!(matches!(p3.status(), PointStatus::Failed(_)), "a failed point stays failed");
}

/// P-VISIBLE: the data is complete at the first moment the point is seen.
pub fn p_visible(f: &Fixture) {
    let n = 1 << 18;
    let (s0, s1) = (f.stream(0), f.stream(1));
    let t0 = f.tensor(0, &[n]);
    let t1 = f.tensor(1, &[n]);
    for round in 0..20u32 {
        let data: Vec<f32> = (0..n).map(|i| (i as u32 ^ round) as f32).collect();
        let expected = data.clone();
        s0.write_async(&t0, data).expect("write").wait_within(RULE_TIMEOUT).expect("write");
        // Device side: another device's stream copies right after the point.
        let copied = s1.copy(&t0, &t1, Some(&s0.last_point())).expect("copy");
        // Host side: spin until the read's point is seen, then look at once.
        let read = s1.read_into_async(&t1, vec![0f32; n]).expect("read");
        let start = Instant::now();
        while !read.is_ready() {
            assert!(start.elapsed() < RULE_TIMEOUT, "round {round}: the read's point never came");
            std::hint::spin_loop();
        }
        assert!(copied.is_reached());
        let got = read.wait_within(RULE_TIMEOUT).expect("read");
        let bad = got.iter().zip(&expected).position(|(a, b)| a != b);
        assert_eq!(bad, None, "round {round}: first stale element");
    }
}

/// P-WAIT: wait blocks until reached, and returns the first cause on failure.
pub fn p_wait(_f: &Fixture) {
    let host = HostTimeline::new("p-wait");
    let release = host.reserve();
    let point = release.point();
    let (tx, rx) = mpsc::channel();
    let waiter = point.clone();
    std::thread::spawn(move || tx.send(waiter.wait()).expect("send"));
    assert!(rx.recv_timeout(Duration::from_millis(50)).is_err(), "wait returned before the point");
    release.signal();
    let result = rx.recv_timeout(RULE_TIMEOUT).expect("the waiter woke");
    assert!(result.is_ok(), "{result:?}");
    let failing = host.reserve();
    let p = failing.point();
    failing.fail("the producer crashed");
    match within("wait on a failed point", move || p.wait()) {
        Err(WaitError::Failed { cause, .. }) => assert_eq!(cause.message(), "the producer crashed"),
        other => panic!("expected the first cause, got {other:?}"),
    }
}

/// P-TIMEOUT: a point that never comes times out; the point is unaffected.
pub fn p_timeout(_f: &Fixture) {
    let host = HostTimeline::new("p-timeout");
    let release = host.reserve();
    let point = release.point();
    let bound = Duration::from_millis(30);
    match point.wait_timeout(bound) {
        Err(WaitError::Timeout { waited, reached, .. }) => {
            assert!(waited >= bound, "gave up after {waited:?}, before the bound {bound:?}");
            assert_eq!(reached, 0);
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    release.signal();
    assert!(point.wait_timeout(bound).is_ok(), "the point is still reachable after a timeout");
}

/// P-FAIL: a failure fails every later point with the same first cause.
pub fn p_fail(_f: &Fixture) {
    let (timeline, writer) = Timeline::new("p-fail");
    writer.advance(2);
    writer.fail(3, Failure::new(FailureKind::WorkFailed, "p-fail@3", "boom"));
    writer.fail(5, Failure::new(FailureKind::WorkFailed, "p-fail@5", "second"));
    writer.advance(9);
    assert!(timeline.point(2).is_reached());
    for v in [3, 4, 10] {
        let point = timeline.point(v);
        match within("wait on a failed point", move || point.wait()) {
            Err(WaitError::Failed { cause, .. }) => {
                assert_eq!(cause.message(), "boom", "point {v}")
            }
            other => panic!("point {v}: {other:?}"),
        }
    }
    assert_eq!(timeline.reached(), 2, "a failed timeline does not advance");
}

/// H-RELEASE: a release reaches its point and gates a stream.
pub fn h_release(f: &Fixture) {
    let s = f.stream(0);
    let t = f.tensor(0, &[4]);
    let (_host, release) = gate();
    s.wait(&release.point()).expect("wait");
    let write = s.write_async(&t, vec![1f32, 2.0, 3.0, 4.0]).expect("write");
    assert_pending(write.point().status(), "write behind an unsignalled release");
    release.signal();
    write.wait_within(RULE_TIMEOUT).expect("write");
    assert_eq!(download(&s, &t), vec![1.0, 2.0, 3.0, 4.0]);
}

/// H-ABANDON: dropping a release wakes every waiter at once with an error.
pub fn h_abandon(f: &Fixture) {
    let host = HostTimeline::new("h-abandon");
    let release = host.reserve();
    let point = release.point();
    let (tx, rx) = mpsc::channel();
    for _ in 0..3 {
        let (p, tx) = (point.clone(), tx.clone());
        std::thread::spawn(move || tx.send(p.wait()).expect("send"));
    }
    std::thread::sleep(Duration::from_millis(20));
    drop(release);
    for _ in 0..3 {
        match rx.recv_timeout(RULE_TIMEOUT).expect("a waiter woke") {
            Err(WaitError::Failed { cause, .. }) => {
                assert_eq!(cause.kind(), FailureKind::Abandoned)
            }
            other => panic!("expected abandonment, got {other:?}"),
        }
    }
    // Out of order: the later release dropped first, then the earlier one.
    // Each point fails with its own cause, and a stream waiting on the
    // earlier point fails with it (a later failure at a lower value is not
    // hidden by the first one).
    let host = HostTimeline::new("h-abandon-order");
    let (first, second) = (host.reserve(), host.reserve());
    let (p1, p2) = (first.point(), second.point());
    let s = f.stream(0);
    s.wait(&p1).expect("wait");
    let after = s.write_async(&f.tensor(0, &[4]), vec![0f32; 4]).expect("write");
    drop(second);
    drop(first);
    for (name, point) in [("the later point", &p2), ("the earlier point", &p1)] {
        match point.wait_timeout(RULE_TIMEOUT) {
            Err(WaitError::Failed { cause, .. }) => {
                assert_eq!(cause.kind(), FailureKind::Abandoned, "{name}: {cause}");
                assert!(cause.origin().ends_with(&format!("@{}", point.value())), "{name}: its own cause: {cause}");
            }
            other => panic!("{name} must fail at once when its release is dropped out of order, got {other:?}"),
        }
    }
    let err = after.wait_within(RULE_TIMEOUT).expect_err("the stream waiting on the earlier point fails");
    assert!(!err.is_timeout(), "the stream's work must fail, not hang: {}", err.error);
}

/// Q-FIFO: work runs in submission order.
pub fn q_fifo(f: &Fixture) {
    let s = f.stream(0);
    let (x, y1, y2) = (f.tensor(0, &[8]), f.tensor(0, &[8]), f.tensor(0, &[8]));
    let graph = scale_graph(8, 2.0);
    let (_host, release) = gate();
    s.wait(&release.point()).expect("wait");
    let first = s.write_async(&x, vec![1f32; 8]).expect("write");
    s.compute(bind(&graph, &x, &y1)).expect("compute");
    let second = s.write_async(&x, vec![5f32; 8]).expect("write");
    let last = s.compute(bind(&graph, &x, &y2)).expect("compute");
    assert_pending(last.status(), "work behind the gate");
    release.signal();
    last.wait_timeout(RULE_TIMEOUT).expect("done");
    assert!(first.point().value() < second.point().value() && second.point().value() < last.value());
    first.wait_within(RULE_TIMEOUT).expect("first");
    second.wait_within(RULE_TIMEOUT).expect("second");
    assert_eq!(download(&s, &y1), vec![2.0; 8], "the first compute saw the first write");
    assert_eq!(download(&s, &y2), vec![10.0; 8], "the second compute saw the second write");
}

/// Q-NONBLOCK: submitting never waits for queued work.
pub fn q_nonblock(f: &Fixture) {
    let s = f.stream(0);
    let t = f.tensor(0, &[16]);
    let (_host, release) = gate();
    s.wait(&release.point()).expect("wait");
    let mut pending = Vec::new();
    for i in 0..100 {
        pending.push(s.write_async(&t, vec![i as f32; 16]).expect("submit returns"));
    }
    assert!(pending.iter().all(|p| !p.is_ready()), "nothing ran behind the gate");
    release.signal();
    for p in pending {
        p.wait_within(RULE_TIMEOUT).expect("write");
    }
    assert_eq!(download(&s, &t), vec![99.0; 16]);
}

/// W-ORDER: a stream's later work starts after a point of another device.
pub fn w_order(f: &Fixture) {
    let (s0, s1) = (f.stream(0), f.stream(1));
    let t0 = f.tensor(0, &[64]);
    let t1 = f.tensor(1, &[64]);
    let (_host, release) = gate();
    s0.wait(&release.point()).expect("wait");
    let produced = s0.write_async(&t0, random(64, 7)).expect("write");
    s1.wait(produced.point()).expect("cross-device wait");
    let copied = s1.copy(&t0, &t1, None).expect("copy");
    assert_pending(copied.status(), "the consumer waits for the producer");
    release.signal();
    produced.wait_within(RULE_TIMEOUT).expect("produced");
    copied.wait_timeout(RULE_TIMEOUT).expect("copied");
    assert_eq!(download(&s1, &t1), random(64, 7));
    assert_eq!(s1.implicit_waits(), 0, "the explicit wait ordered the copy");
}

/// W-FAIL: a stream waiting on a failed point fails with the same cause.
pub fn w_fail(f: &Fixture) {
    let s = f.stream(0);
    let t = f.tensor(0, &[4]);
    let host = HostTimeline::new("w-fail");
    let release = host.reserve();
    let gate_point = release.point();
    s.wait(&gate_point).expect("wait");
    let write = s.write_async(&t, vec![1f32; 4]).expect("write");
    release.fail("upstream died");
    let err = expect_failure(write, "the write must not run");
    let cause = err.error.to_string();
    assert!(cause.contains("upstream died"), "{cause}");
    let upstream = match gate_point.status() {
        PointStatus::Failed(c) => c,
        other => panic!("{other:?}"),
    };
    match synchronize(&s) {
        Err(StreamError::Failed { cause, .. }) => {
            assert!(cause.same_cause(&upstream), "same first cause")
        }
        other => panic!("{other:?}"),
    }
}

/// W-FOREIGN: a point the stream cannot wait on natively is an error, and
/// the relay bridges it with the same semantics. On a pair of devices whose
/// streams wait natively on no other stream's point (the chaos wrapper
/// refuses every such wait, as two logical Vulkan devices refuse each
/// other's): a relayed wait on a failed point fails the stream with the
/// point's cause, while a wait the hazard tracking inserted, relayed too,
/// ends when its point settles and leaves the stream unfailed (M-ORDER).
pub fn w_foreign(f: &Fixture) {
    let s = f.stream(0);
    let domain = Domain::Device { backend: "imaginary", device: "imaginary:0".into() };
    let (foreign, writer) = Timeline::with_domain("imaginary:0/stream-0", domain);
    match s.wait(&foreign.point(1)) {
        Err(StreamError::ForeignPoint { point, .. }) => assert!(point.contains("imaginary")),
        other => panic!("expected ForeignPoint, got {other:?}"),
    }
    writer.advance(1);
    let relayed = relay::without_native_waits(f);
    relay::a_relayed_wait_on_a_failed_point_fails_the_stream(&relayed);
    relay::an_inserted_relayed_wait_ends_when_its_point_fails(&relayed);
}

/// W-HOLD: a stream that waits on a point whose signal is not submitted
/// yet (its producer is still gated on the host) holds up only itself:
/// another stream of the same device runs on meanwhile (on a device with one
/// queue the wait is held back on the host until its signal is submitted,
/// never queued before it), and the wait ends once the point is reached.
pub fn w_hold(f: &Fixture) {
    let (producer, waiter, bystander) = (f.stream(0), f.stream(0), f.stream(0));
    let (t, u) = (f.tensor(0, &[64]), f.tensor(0, &[64]));
    let (x, y) = (f.tensor(0, &[64]), f.tensor(0, &[64]));
    let (_host, release) = gate();
    producer.wait(&release.point()).expect("wait");
    let produced = producer.write_async(&t, random(64, 31)).expect("write");
    // The producer's write is not even submitted to the device yet.
    waiter.wait(produced.point()).expect("a wait on a stream of the same device");
    let copied = waiter.copy(&t, &u, None).expect("copy");
    // Independent work of the same device must not be stuck behind it.
    let graph = scale_graph(64, 2.0);
    let written = bystander.write_async(&x, random(64, 32)).expect("write");
    let done = bystander.compute(bind(&graph, &x, &y)).expect("compute");
    let read = bystander.read_into_async(&y, vec![0f32; 64]).expect("read");
    read.wait_timeout(RULE_TIMEOUT).expect("work of another stream runs while the wait is pending");
    assert!(done.is_reached());
    written.wait_within(RULE_TIMEOUT).expect("write");
    let expected: Vec<f32> = random(64, 32).iter().map(|v| v * 2.0).collect();
    assert_eq!(read.wait_within(RULE_TIMEOUT).expect("read"), expected);
    assert_pending(copied.status(), "the waiting stream waits for the gated producer");
    release.signal();
    produced.wait_timeout(RULE_TIMEOUT).expect("produced");
    copied.wait_timeout(RULE_TIMEOUT).expect("the held-back wait ends once its signal comes");
    let got = waiter.read_into_async(&u, vec![0f32; 64]).expect("read");
    got.wait_timeout(RULE_TIMEOUT).expect("read");
    assert_eq!(got.wait_within(RULE_TIMEOUT).expect("read"), random(64, 31));
    assert_eq!(waiter.implicit_waits(), 0, "the explicit wait ordered the copy");
}

/// M-ORDER: an unordered conflicting access gets a wait inserted and is
/// reported; an order through a third stream counts.
pub fn m_order(f: &Fixture) {
    let (s0, s1) = (f.stream(0), f.stream(1));
    let t = f.tensor(0, &[32]);
    let (_host, release) = gate();
    s0.wait(&release.point()).expect("wait");
    let write = s0.write_async(&t, random(32, 3)).expect("write");
    // No explicit wait: the safe stream must order the read after the write.
    let read = s1.read_into_async(&t, vec![0f32; 32]).expect("read");
    assert_eq!(s1.implicit_waits(), 1, "one wait inserted");
    let reports = s1.hazard_reports();
    assert_eq!(reports.len(), 1, "the race is reported: {reports:?}");
    let r = &reports[0];
    assert!(r.earlier.write && r.earlier.op == "write" && r.earlier.stream == s0.label(), "{r}");
    assert!(!r.later.write && r.later.op == "read" && r.later.stream == s1.label(), "{r}");
    assert!(r.to_string().contains("missing edge"), "{r}");
    assert!(s0.hazard_reports().is_empty(), "the writer did nothing wrong");
    assert!(!read.is_ready(), "the read waits for the unsignalled write");
    release.signal();
    write.wait_within(RULE_TIMEOUT).expect("write");
    assert_eq!(read.wait_within(RULE_TIMEOUT).expect("read"), random(32, 3));

    // Order through a third stream counts (vector clocks): cpu:0 writes,
    // another cpu:0 stream waits on it, cpu:1 waits on that stream and reads.
    let (a, b, c) = (f.stream(0), f.stream(0), f.stream(1));
    let u = f.tensor(0, &[32]);
    let (_host2, gate2) = gate();
    a.wait(&gate2.point()).expect("wait");
    let w = a.write_async(&u, random(32, 4)).expect("write");
    b.wait(w.point()).expect("b after a");
    let relay_point = b.host_fn(|| Ok(())).expect("b's own work");
    c.wait(&relay_point).expect("c after b");
    let r = c.read_into_async(&u, vec![0f32; 32]).expect("read");
    assert!(c.hazard_reports().is_empty(), "ordered through b: {:?}", c.hazard_reports());
    assert_eq!(c.implicit_waits(), 0);
    gate2.signal();
    w.wait_within(RULE_TIMEOUT).expect("write");
    assert_eq!(r.wait_within(RULE_TIMEOUT).expect("read"), random(32, 4));

    // A write after another stream's queued read conflicts too; two reads
    // do not.
    let (p, q) = (f.stream(0), f.stream(1));
    let v = f.tensor(0, &[32]);
    upload(&p, &v, random(32, 5));
    let (_host3, gate3) = gate();
    p.wait(&gate3.point()).expect("wait");
    let first = p.read_into_async(&v, vec![0f32; 32]).expect("read");
    let second = q.read_into_async(&v, vec![0f32; 32]).expect("read");
    assert_eq!(q.implicit_waits(), 0, "two reads do not conflict");
    let overwrite = q.write_async(&v, random(32, 6)).expect("write");
    assert_eq!(q.implicit_waits(), 1, "the write waits for the other stream's read");
    let reports = q.hazard_reports();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert!(!reports[0].earlier.write && reports[0].earlier.stream == p.label() && reports[0].later.write);
    assert!(!overwrite.is_ready(), "the write waits for the gated read");
    gate3.signal();
    assert_eq!(first.wait_within(RULE_TIMEOUT).expect("read"), random(32, 5), "the read saw the old values");
    assert_eq!(second.wait_within(RULE_TIMEOUT).expect("read"), random(32, 5));
    overwrite.wait_within(RULE_TIMEOUT).expect("write");

    // An inserted wait ends when the earlier access settles: if that work
    // fails, the stream that only shared its memory goes on, unfailed.
    let (p, q) = (f.stream(0), f.stream(1));
    let w = f.tensor(0, &[16]);
    let (_host4, gate4) = gate();
    p.wait(&gate4.point()).expect("wait");
    let doomed = p.write_async(&w, vec![1f32; 16]).expect("write");
    let after = q.write_async(&w, vec![2f32; 16]).expect("write");
    assert_eq!(q.implicit_waits(), 1, "the write waits for the other stream's pending write");
    drop(gate4);
    assert!(doomed.wait_within(RULE_TIMEOUT).is_err(), "the gated stream fails");
    let back = after.wait_within(RULE_TIMEOUT).expect("the other stream's write runs, unfailed");
    assert_eq!(back, vec![2f32; 16]);
    assert_eq!(download(&q, &w), vec![2f32; 16], "the write that ran is in memory");
}

/// H-OWN: the host buffer comes back, the same allocation.
pub fn h_own(f: &Fixture) {
    let s = f.stream(0);
    let t = f.tensor(0, &[256]);
    let mut buf = vec![3f32; 256];
    let ptr = buf.as_ptr();
    for i in 0..10 {
        buf.fill(i as f32);
        buf = s.write_async(&t, buf).expect("write").wait_within(RULE_TIMEOUT).expect("back");
        buf = s.read_into_async(&t, buf).expect("read").wait_within(RULE_TIMEOUT).expect("back");
        assert_eq!(buf.as_ptr(), ptr, "the same allocation comes back");
        assert!(buf.iter().all(|&v| v == i as f32));
    }
    // A wait that times out leaves the transfer and its buffer alone: it
    // still runs when its gate opens, the stream does not fail, and the
    // buffer comes back from a later wait.
    let (_host, release) = gate();
    s.wait(&release.point()).expect("wait");
    let pending = s.write_async(&t, vec![9f32; 256]).expect("write");
    let err = pending.wait_within(Duration::from_millis(20)).expect_err("the write is gated");
    assert!(err.is_timeout(), "a timeout, not a failure: {}", err.error);
    let pending = err.into_pending().expect("the transfer comes back intact after a timeout");
    release.signal();
    let back = pending.wait_within(RULE_TIMEOUT).expect("the write runs once the gate opens");
    assert_eq!(back, vec![9f32; 256], "the same buffer comes back");
    assert_eq!(download(&s, &t), vec![9f32; 256], "the stream did not fail and the write landed");
}

/// R-OWN: a read completes while later work on its stream is still blocked.
pub fn r_own(f: &Fixture) {
    let s = f.stream(0);
    let t = f.tensor(0, &[16]);
    upload(&s, &t, vec![7.0; 16]);
    let read = s.read_into_async(&t, vec![0f32; 16]).expect("read");
    let (_host, release) = gate();
    s.wait(&release.point()).expect("wait");
    let later = s.write_async(&t, vec![0f32; 16]).expect("write");
    read.wait_timeout(RULE_TIMEOUT).expect("the read needs only its own point");
    assert!(!later.is_ready(), "later work is still gated");
    assert_eq!(read.wait_within(RULE_TIMEOUT).expect("read"), vec![7.0; 16]);
    release.signal();
    later.wait_within(RULE_TIMEOUT).expect("later");
}

/// D-RETURN: a failed transfer returns its buffer with the error.
pub fn d_return(f: &Fixture) {
    let s = f.stream(0);
    let t = f.tensor(0, &[8]);
    let (_host, release) = gate();
    s.wait(&release.point()).expect("wait");
    let buf = vec![42f32; 8];
    let pending = s.write_async(&t, buf).expect("write");
    drop(release);
    let err = expect_failure(pending, "the write's point fails");
    assert_eq!(err.into_buffer(), Some(vec![42f32; 8]), "nothing is lost");
}

/// C-ORDER: a copy runs after its producer point and its stream's work.
pub fn c_order(f: &Fixture) {
    let (s0, s1) = (f.stream(0), f.stream(1));
    let (src, dst) = (f.tensor(0, &[128]), f.tensor(1, &[128]));
    let (_host, release) = gate();
    s0.wait(&release.point()).expect("wait");
    let write = s0.write_async(&src, random(128, 11)).expect("write");
    let copied = s1.copy(&src, &dst, Some(write.point())).expect("copy");
    let read = s1.read_into_async(&dst, vec![0f32; 128]).expect("read");
    assert_pending(copied.status(), "copy waits for its producer");
    release.signal();
    write.wait_within(RULE_TIMEOUT).expect("write");
    assert_eq!(read.wait_within(RULE_TIMEOUT).expect("read"), random(128, 11));
}

/// C-CROSS: copies between devices move the bytes intact, both ways.
pub fn c_cross(f: &Fixture) {
    let (s0, s1) = (f.stream(0), f.stream(1));
    let n = 100_003;
    let (a, b, c) = (f.tensor(0, &[n]), f.tensor(1, &[n]), f.tensor(0, &[n]));
    upload(&s0, &a, random(n, 5));
    let there = s1.copy(&a, &b, Some(&s0.last_point())).expect("copy 0->1");
    let back = s0.copy(&b, &c, Some(&there)).expect("copy 1->0");
    back.wait_timeout(RULE_TIMEOUT).expect("copies");
    assert_eq!(download(&s0, &c), random(n, 5));
    // A copy into a sub-range of a larger buffer leaves the rest alone.
    let big = f.buffer(1, 16 * 4);
    let window = TensorRef::new(&big, 16, DType::F32, &[4]).expect("window");
    let whole = TensorRef::new(&big, 0, DType::F32, &[16]).expect("whole");
    let small = f.tensor(0, &[4]);
    upload(&s0, &small, vec![1.0, 2.0, 3.0, 4.0]);
    s1.copy(&small, &window, Some(&s0.last_point())).expect("copy").wait_timeout(RULE_TIMEOUT).expect("copy");
    let got = download(&s1, &whole);
    assert_eq!(&got[4..8], &[1.0, 2.0, 3.0, 4.0]);
    assert!(got[..4].iter().chain(&got[8..]).all(|&v| v == 0.0), "bytes outside the window: {got:?}");
    // Ranges and tensors outside a buffer cannot be made, so no transfer,
    // copy or binding can reach past one.
    for (offset, len) in [(64, 4096), (60, 8), (usize::MAX, 2), (65, 0)] {
        assert!(big.range(offset, len).is_err(), "bytes {offset}+{len} of a 64-byte buffer");
    }
    assert!(TensorRef::new(&big, 60, DType::F32, &[2]).is_err(), "a tensor past the end");
    assert!(TensorRef::new(&big, usize::MAX - 3, DType::F32, &[2]).is_err(), "an offset that overflows");
    let last = big.range(60, 4).expect("the last four bytes");
    s1.write_range_async(&last, vec![7u8; 4]).expect("write").wait_within(RULE_TIMEOUT).expect("write the last bytes");
}

/// G-SEALED: declared weights take writes until a computation reads them,
/// then refuse every write (transfer, copy, bound output) with
/// `SealedWeights`, and still serve reads and computations; plain buffers
/// are not affected.
pub fn g_sealed(f: &Fixture) {
    let s = f.stream(0);
    let (w, y, other) = (f.tensor(0, &[256]), f.tensor(0, &[256]), f.tensor(0, &[256]));
    w.buffer().declare_weights();
    w.buffer().declare_weights();
    assert!(w.buffer().is_weights() && !w.buffer().is_sealed(), "declared, not yet read");
    assert!(!y.buffer().is_weights(), "only the declared buffer holds weights");
    upload(&s, &w, random(256, 3));
    upload(&s, &w, random(256, 4));
    let graph = scale_graph(256, 2.0);
    s.compute(bind(&graph, &w, &y)).expect("compute").wait_timeout(RULE_TIMEOUT).expect("computed");
    assert!(w.buffer().is_sealed(), "a computation read the weights");
    let expected: Vec<f32> = random(256, 4).iter().map(|v| v * 2.0).collect();
    assert_eq!(download(&s, &y), expected, "the computation read the last upload");
    let sealed = |e: &StreamError| matches!(e, StreamError::SealedWeights { .. });
    match s.write_async(&w, random(256, 5)) {
        Err(e) => assert!(sealed(&e.error), "write into sealed weights: {}", e.error),
        Ok(_) => panic!("a write into sealed weights was accepted"),
    }
    match s.copy(&y, &w, None) {
        Err(e) => assert!(sealed(&e), "copy into sealed weights: {e}"),
        Ok(_) => panic!("a copy into sealed weights was accepted"),
    }
    match s.compute(bind(&graph, &y, &w)) {
        Err(e) => assert!(sealed(&e), "sealed weights bound as an output: {e}"),
        Ok(_) => panic!("sealed weights were accepted as an output"),
    }
    assert_eq!(download(&s, &w), random(256, 4), "reads still serve the weights, unchanged");
    s.compute(bind(&graph, &w, &other)).expect("compute").wait_timeout(RULE_TIMEOUT).expect("computed again");
    assert_eq!(download(&s, &other), expected, "computations still read them");
    upload(&s, &y, random(256, 6));
    s.synchronize().expect("the refusals did not fail the stream");
}

/// G-ASYNC: compute returns at once; results are there at its point.
pub fn g_async(f: &Fixture) {
    let s = f.stream(0);
    let (x, y) = (f.tensor(0, &[1000]), f.tensor(0, &[1000]));
    let graph = scale_graph(1000, -3.0);
    let (_host, release) = gate();
    s.wait(&release.point()).expect("wait");
    let _queued = s.write_async(&x, random(1000, 9)).expect("write");
    let done = s.compute(bind(&graph, &x, &y)).expect("compute returns");
    assert_pending(done.status(), "compute behind the gate");
    release.signal();
    done.wait_timeout(RULE_TIMEOUT).expect("compute");
    let expected: Vec<f32> = random(1000, 9).iter().map(|v| v * -3.0).collect();
    assert_eq!(download(&s, &y), expected);
    // Bindings that break the graph's rules are refused before queueing.
    let wrong = f.tensor(0, &[999]);
    let mut b = Bindings::new(&graph);
    assert!(b.bind_name("x", wrong).is_err(), "shape mismatch");
    let mut overlapping = Bindings::new(&graph);
    overlapping.bind_name("x", x.clone()).expect("x");
    overlapping.bind_name("y", x.clone()).expect("y");
    assert!(matches!(s.compute(overlapping), Err(StreamError::Binding { .. })), "output overlapping input");
}

/// E-STICKY: a failure stops the stream and surfaces at the next wait.
pub fn e_sticky(f: &Fixture) {
    let s = f.stream(0);
    let (graph, bad_ids) = failing_graph();
    let table = f.tensor(0, &[4, 8]);
    let ids = f.typed_tensor(0, DType::I32, &[1]);
    let rows = f.tensor(0, &[1, 8]);
    let (_host, release) = gate();
    s.wait(&release.point()).expect("wait");
    let _queued = s.write_async(&ids, bad_ids).expect("write");
    let mut b = Bindings::new(&graph);
    b.bind_name("table", table.clone()).expect("table");
    b.bind_name("ids", ids.clone()).expect("ids");
    b.bind_name("rows", rows.clone()).expect("rows");
    let failed = s.compute(b).expect("queued");
    let after = s.write_async(&table, vec![0f32; 32]).expect("queued after");
    release.signal();
    let first = match failed.wait_timeout(RULE_TIMEOUT) {
        Err(WaitError::Failed { cause, .. }) => cause,
        other => panic!("expected the compute to fail, got {other:?}"),
    };
    assert!(first.message().contains("1000"), "the error names the bad id: {first}");
    let later = expect_failure(after, "work after a failure does not run");
    assert!(later.error.to_string().contains("1000"), "{}", later.error);
    match s.write_async(&table, vec![7f32; 32]) {
        Err(refused) => {
            match &refused.error {
                StreamError::Failed { cause, .. } => assert!(cause.same_cause(&first)),
                other => panic!("{other:?}"),
            }
            let back = refused.into_buffer();
            assert_eq!(back, Some(vec![7f32; 32]), "a refused write hands the caller's buffer back");
        }
        Ok(_) => panic!("a failed stream accepted work"),
    }
    assert!(synchronize(&s).is_err());
    // The failed stream's accesses hold nothing up: another stream writes
    // and reads the same buffer after it, without failing.
    let other = f.stream(0);
    other
        .write_async(&table, vec![5f32; 32])
        .expect("another stream writes")
        .wait_within(RULE_TIMEOUT)
        .expect("and is not failed");
    let read = other.read_into_async(&rows, vec![0f32; 8]).expect("reads");
    read.wait_within(RULE_TIMEOUT).expect("a failed stream's access does not fail later users of the buffer");
}

/// E-NOPANIC: a failing stream never panics the host, and its device works on.
pub fn e_nopanic(f: &Fixture) {
    let broken = f.stream(0);
    let (graph, bad_ids) = failing_graph();
    let ids = f.typed_tensor(0, DType::I32, &[1]);
    broken.write_async(&ids, bad_ids).expect("write").wait_within(RULE_TIMEOUT).expect("write");
    let mut b = Bindings::new(&graph);
    b.bind_name("table", f.tensor(0, &[4, 8])).expect("table");
    b.bind_name("ids", ids).expect("ids");
    b.bind_name("rows", f.tensor(0, &[1, 8])).expect("rows");
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        broken.compute(b).expect("queued").wait_timeout(RULE_TIMEOUT)
    }));
    assert!(matches!(result, Ok(Err(_))), "an error, not a panic");
    let healthy = f.stream(0);
    let (x, y) = (f.tensor(0, &[8]), f.tensor(0, &[8]));
    upload(&healthy, &x, vec![1.0; 8]);
    let g = scale_graph(8, 4.0);
    healthy.compute(bind(&g, &x, &y)).expect("compute").wait_timeout(RULE_TIMEOUT).expect("the device still works");
    assert_eq!(download(&healthy, &y), vec![4.0; 8]);
}

/// D-NOBLOCK: dropping a stream with queued work does not wait for it.
pub fn d_noblock(f: &Fixture) {
    let s = f.stream(0);
    let t = f.tensor(0, &[8]);
    let (_host, release) = gate();
    s.wait(&release.point()).expect("wait");
    let write = s.write_async(&t, vec![6f32; 8]).expect("write");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        drop(s);
        tx.send(()).expect("send");
    });
    rx.recv_timeout(RULE_TIMEOUT).expect("drop returned while work was gated");
    release.signal();
    write.wait_within(RULE_TIMEOUT).expect("queued work still runs after the drop");
    assert_eq!(download(&f.stream(0), &t), vec![6.0; 8]);
}

/// D-DEFER: a buffer dropped while work uses it lives until the work is done.
pub fn d_defer(f: &Fixture) {
    let s = f.stream(0);
    let (_host, release) = gate();
    s.wait(&release.point()).expect("wait");
    let read = {
        let t = f.tensor(0, &[64]);
        let _queued = s.write_async(&t, random(64, 21)).expect("write");
        s.read_into_async(&t, vec![0f32; 64]).expect("read")
        // `t` and its buffer handle are dropped here.
    };
    let start = Instant::now();
    release.signal();
    assert_eq!(read.wait_within(RULE_TIMEOUT).expect("read"), random(64, 21));
    assert!(start.elapsed() < RULE_TIMEOUT);
}

/// D-CANCEL: cancelling gated work fails every dependent point at once.
pub fn d_cancel(f: &Fixture) {
    let (s0, s1) = (f.stream(0), f.stream(1));
    let (a, b) = (f.tensor(0, &[8]), f.tensor(1, &[8]));
    let (_host, release) = gate();
    s0.wait(&release.point()).expect("wait");
    let w = s0.write_async(&a, vec![1f32; 8]).expect("write");
    let copy = s1.copy(&a, &b, Some(w.point())).expect("copy");
    drop(release); // cancel
    assert!(matches!(copy.wait_timeout(RULE_TIMEOUT), Err(WaitError::Failed { .. })), "the dependent copy fails");
    expect_failure(w, "the cancelled write");
    assert!(synchronize(&s0).is_err() && synchronize(&s1).is_err());
}

/// W-BOUND: a bounded wait on a peer that never releases fails the stream
/// with a timeout within the bound; an abandoned point wakes a poller at
/// once, long before its bound.
pub fn w_bound(f: &Fixture) {
    use baton_core::sync::WaitPolicy;
    let s = f.stream(0);
    let (_host, release) = gate();
    let bound = Duration::from_millis(50);
    s.wait_with(&release.point(), WaitPolicy::Poll { bound }).expect("wait");
    let after = s.write_async(&f.tensor(0, &[4]), vec![0f32; 4]).expect("write");
    let start = Instant::now();
    let err = expect_failure(after, "the dead peer's wait times out");
    let waited = start.elapsed();
    match synchronize(&s) {
        Err(StreamError::Failed { cause, .. }) => {
            assert_eq!(cause.kind(), FailureKind::TimedOut, "{cause}");
            assert!(cause.message().contains("test-gate"), "the failure names the point: {cause}");
        }
        other => panic!("expected a timed-out stream, got {other:?}"),
    }
    assert!(waited < RULE_TIMEOUT, "the bound of {bound:?} ended the wait: {}", err.error);
    drop(release);

    let host = HostTimeline::new("w-bound-poller");
    let release = host.reserve();
    let point = release.point();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let poll = WaitPolicy::Poll { bound: Duration::from_secs(3600) };
        tx.send(point.wait_with(poll, None)).expect("send")
    });
    std::thread::sleep(Duration::from_millis(10));
    drop(release);
    let woke = rx.recv_timeout(RULE_TIMEOUT).expect("the poller woke at once, not after its bound");
    assert!(matches!(woke, Err(WaitError::Failed { .. })), "{woke:?}");

    // Policies without a bound of their own (block, spin) end at the
    // stream's deadline: a peer that goes silent fails the waiting stream
    // with `TimedOut` naming the point, it does not hang it.
    for policy in [WaitPolicy::Block, WaitPolicy::SpinThenBlock { spin: Duration::from_micros(50) }] {
        let deadline = Duration::from_millis(100);
        let s = f.stream(0).with_deadline(Some(deadline));
        let silent = HostTimeline::new("w-bound-silent");
        let held = silent.reserve();
        let start = Instant::now();
        s.wait_with(&held.point(), policy).expect("wait");
        let after = s.write_async(&f.tensor(0, &[4]), vec![0f32; 4]).expect("write");
        let err = after.wait_within(RULE_TIMEOUT).expect_err("the silent peer's wait ends at the deadline");
        assert!(!err.is_timeout(), "{policy:?}: the stream failed, the host did not time out: {}", err.error);
        match synchronize(&s) {
            Err(StreamError::Failed { cause, .. }) => {
                assert_eq!(cause.kind(), FailureKind::TimedOut, "{policy:?}: {cause}");
                assert!(cause.message().contains("w-bound-silent@1"), "{policy:?}: names the point: {cause}");
            }
            other => panic!("{policy:?}: expected a timed-out stream, got {other:?}"),
        }
        assert!(start.elapsed() >= deadline, "{policy:?}: failed before the deadline");
        held.signal();
    }
}
