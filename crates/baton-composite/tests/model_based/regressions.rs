//! The smallest sequences of the defects the model test found, one test
//! each, named by what must hold.

use std::sync::Arc;
use std::time::Duration;

use baton_composite::CompositeDevice;
use baton_core::backend::{Device, IntoDevice, TensorRef};
use baton_core::sync::{HostTimeline, WaitError, WaitPolicy};
use baton_core::DType;

fn cpus() -> Vec<Arc<dyn Device>> {
    baton_cpu::open_with(&["cpu:0", "cpu:1"], &baton_cpu::OpenOptions::default().with_threads(1))
        .expect("two CPU devices")
        .into_iter()
        .map(IntoDevice::into_device)
        .collect()
}

fn composite() -> Arc<dyn Device> {
    Arc::new(CompositeDevice::new(cpus(), WaitPolicy::Block).expect("composite"))
}

/// P-FAIL / E-STICKY: when a stream fails at an item, every point from it
/// on fails. A composite stream fails its timeline from two threads: the
/// worker of inner stream 0 (dropping an item's `Completion` unrun fails
/// that item's value) and the submitting thread (`CompositeStream::submit`
/// fails the new value when an inner stream refuses it as failed). When the
/// submitting thread comes first, it records the failure at the later value;
/// `TimelineWriter::fail` kept only the first failure, so the earlier
/// value's failure was dropped and its point stayed pending forever
/// (defect (f)).
#[test]
fn composite_points_before_a_failure_settle_when_a_later_submission_fails_first() {
    let device = composite();
    let buffer = device.alloc(64).expect("alloc");
    let t = TensorRef::new(&buffer, 0, DType::F32, &[2]).expect("tensor");
    for round in 0..200 {
        let stream = device.new_stream().expect("stream");
        let host = HostTimeline::new("gate");
        let release = host.reserve();
        let point = release.point();
        release.fail("gone");
        let waited = stream.wait(&point).expect("wait");
        // Accepted or refused as failed, depending on timing.
        let written = stream.write_async(&t, vec![1f32, 2.0]).map(|p| p.point().clone());
        for (what, p) in [("wait", Ok(waited)), ("write", written)] {
            let Ok(p) = p else { continue };
            match p.wait_timeout(Duration::from_secs(2)) {
                Err(WaitError::Failed { .. }) => {}
                other => panic!(
                    "round {round}: the composite's {what} after a wait on a failed point: {other:?}, expected Failed"
                ),
            }
        }
    }
}

fn assert_fails(point: &baton_core::sync::SyncPoint, what: &str) {
    match point.wait_timeout(Duration::from_secs(2)) {
        Err(WaitError::Failed { .. }) => {}
        other => panic!("{what} ({point}): {other:?}, expected Failed"),
    }
}

fn assert_reached(point: &baton_core::sync::SyncPoint, what: &str) {
    if let Err(e) = point.wait_timeout(Duration::from_secs(2)) {
        panic!("{what} ({point}): {e}, expected reached");
    }
}

/// Defect (a), H-ABANDON: dropping a release fails its point, even
/// when a later release of the timeline was dropped first.
#[test]
fn release_dropped_out_of_order_settles_every_point() {
    let host = HostTimeline::new("host");
    let (first, second) = (host.reserve(), host.reserve());
    let (p1, p2) = (first.point(), second.point());
    drop(second);
    drop(first);
    assert_fails(&p2, "the second release, dropped");
    assert_fails(&p1, "the first release, dropped after the second");
}

/// Defect (c), M-ORDER: a failed access ran nothing, so it orders
/// nothing; another stream's later write of the same bytes runs.
#[test]
fn failed_access_does_not_fail_later_users_of_the_buffer() {
    let cpu = cpus();
    let (s0, s1) = (cpu[0].new_stream().expect("stream"), cpu[1].new_stream().expect("stream"));
    let buffer = cpu[0].alloc(64).expect("alloc");
    let t = TensorRef::new(&buffer, 0, DType::F32, &[4]).expect("tensor");
    // The host function runs only once the write is queued behind it: else
    // a fast worker fails the stream first and the write is refused.
    let host = HostTimeline::new("gate");
    let gate = host.reserve();
    s0.wait(&gate.point()).expect("wait");
    let failed = s0.host_fn(|| Err("boom".into())).expect("host_fn");
    let write = s0.write_async(&t, vec![1f32; 4]).expect("queued before the failure is seen");
    gate.signal();
    assert_fails(write.point(), "a write after a failed host function");
    assert_fails(&failed, "the failed host function");
    let later = s1.write_async(&t, vec![2f32; 4]).expect("write");
    assert_reached(later.point(), "another stream's write of the same bytes, after the failed one");
}

/// Defect (e), W-BOUND: a stream wait with a deadline on a point
/// that never comes ends, failing the stream `TimedOut`, under the
/// blocking policy too (see `api::wait_with_deadline`).
#[test]
fn stream_wait_with_a_deadline_on_a_silent_peer_ends() {
    let cpu = cpus();
    let stream = cpu[0].new_stream().expect("stream");
    let host = HostTimeline::new("silent");
    let release = host.reserve();
    let deadline = Duration::from_millis(100);
    let waited = crate::api::wait_with_deadline(&stream, &release.point(), WaitPolicy::Block, deadline).expect("wait");
    let result = waited.wait_timeout(Duration::from_secs(2));
    drop(release);
    match result {
        Err(WaitError::Failed { cause, .. }) if cause.kind() == baton_core::sync::FailureKind::TimedOut => {}
        other => panic!("a stream wait past its deadline: {other:?}, expected Failed(TimedOut)"),
    }
}

/// Defect (b), H-OWN / P-TIMEOUT: a bounded host wait on a transfer that
/// times out leaves the transfer queued and intact: it still runs once its
/// gate opens (the stream does not fail for lack of its host buffer), and
/// the buffer comes back through `PendingError::into_pending`. (`wait()`
/// under the poll policy ends in the same timeout, through the same path.)
#[test]
fn pending_wait_timeout_keeps_the_transfer() {
    let cpu = cpus();
    let stream = cpu[0].new_stream().expect("stream");
    let buffer = cpu[0].alloc(64).expect("alloc");
    let t = TensorRef::new(&buffer, 0, DType::F32, &[4]).expect("tensor");
    let host = HostTimeline::new("gate");
    let gate = host.reserve();
    stream.wait(&gate.point()).expect("wait");
    let pending = stream.write_async(&t, vec![3f32; 4]).expect("write");
    let point = pending.point().clone();
    let timed_out = match pending.wait_within(Duration::from_millis(50)) {
        Ok(_) => panic!("the gate is closed, yet the write behind it came back done"),
        Err(e) => e,
    };
    assert!(timed_out.is_timeout(), "a bounded wait on a gated write: {timed_out}, expected a timeout");
    let pending = timed_out.into_pending().expect("a timed-out wait hands the transfer back");
    gate.signal();
    assert_reached(&point, "the write, once the gate opens after a timed-out wait");
    let sent = pending.wait_within(Duration::from_secs(2)).expect("the host buffer back");
    assert_eq!(sent, vec![3f32; 4], "the host buffer of a write comes back unchanged");
    let read = stream.read_into_async(&t, vec![0f32; 4]).expect("read");
    let got = read.wait_within(Duration::from_secs(2)).expect("read back");
    assert_eq!(got, vec![3f32; 4], "the bytes of a write whose first wait timed out");
}

/// Defect (s), C-CROSS: `copy_staged` moves the bytes intact. Into a
/// composite buffer it moved zeros: `CompositeStream::dispatch` scattered a
/// `Write`'s host bytes when the item was submitted, not when it ran;
/// `copy_staged`'s host buffer is only filled later, by the source stream's
/// read, in stream order.
#[test]
fn copy_staged_into_a_composite_buffer_moves_the_bytes() {
    let cpu = cpus();
    let device = composite();
    let (reader, writer) = (cpu[0].new_stream().expect("stream"), device.new_stream().expect("stream"));
    let src = cpu[0].alloc_tensor(DType::F32, &[4]).expect("alloc");
    let dst = device.alloc_tensor(DType::F32, &[4]).expect("alloc");
    let data = vec![1.5f32, 2.5, 3.5, 4.5];
    reader.write_async(&src, data.clone()).expect("write").wait_timeout(Duration::from_secs(2)).expect("written");
    let host = HostTimeline::new("gate");
    let gate = host.reserve();
    reader.wait(&gate.point()).expect("wait"); // the read runs after the copy is queued
    let copied = writer.copy_staged(&reader, &src, &dst, None).expect("copy_staged");
    gate.signal();
    assert_reached(&copied, "the staged copy");
    let read = writer.read_into_async(&dst, vec![0f32; 4]).expect("read");
    let got = read.wait_within(Duration::from_secs(2)).expect("read back");
    assert_eq!(got, data, "bytes a staged copy moved into a composite buffer");
}

/// Defect (g), E-STICKY / P-FAIL: when a stream fails at an item, every
/// later point fails with the same first cause. A composite stream's wait
/// with a deadline is queued on every inner stream, so on a silent peer
/// each inner stream times out with a cause of its own. When a later
/// submission finds inner stream 1 failed before inner stream 0 has
/// dropped the wait's `Completion`, `CompositeStream::submit` fails the
/// later value with inner stream 1's cause, and the wait's value then
/// fails with inner stream 0's: the timeline keeps both (per value range),
/// so the later points report another cause than the first failed one.
#[test]
fn composite_points_after_a_timed_out_wait_fail_with_its_cause() {
    let device = composite();
    let buffer = device.alloc(64).expect("alloc");
    let t = TensorRef::new(&buffer, 0, DType::F32, &[2]).expect("tensor");
    let silent = HostTimeline::new("silent");
    let held = silent.reserve();
    let deadline = Duration::from_millis(20);
    for round in 0..100 {
        let stream = device.new_stream().expect("stream");
        let waited = stream.wait_bounded(&held.point(), WaitPolicy::Block, Some(deadline)).expect("wait");
        // Submits across the moment the inner streams time out, until the
        // stream refuses as failed.
        let mut later = Vec::new();
        let started = std::time::Instant::now();
        while started.elapsed() < Duration::from_millis(200) {
            match stream.write_async(&t, vec![1f32, 2.0]) {
                Ok(p) => later.push(p.point().clone()),
                Err(_) => break,
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        let cause = match waited.wait_timeout(Duration::from_secs(2)) {
            Err(WaitError::Failed { cause, .. }) => cause,
            other => panic!("round {round}: a composite wait past its deadline: {other:?}, expected Failed"),
        };
        for p in later {
            match p.wait_timeout(Duration::from_secs(2)) {
                Err(WaitError::Failed { cause: c, .. }) if c.same_cause(&cause) => {}
                other => {
                    panic!("round {round}: {p} after the wait failed with {cause}: {other:?}, expected that cause")
                }
            }
        }
    }
    drop(held);
}

/// Defect (h), M-ORDER: a wait the hazard tracking inserts ends when its
/// point settles, so it must not pass on the order its point's stream had
/// learnt: stream 1 failed (its wait on a silent stream timed out) before
/// its own inserted wait on stream 2's read ran, so stream 0, which waited
/// for stream 1's later access to settle, does not know that read is over.
/// Stream 0's write of the bytes stream 2 reads must still wait for that
/// read; the read sees the old bytes.
#[test]
fn an_inserted_wait_on_failed_work_inherits_no_order() {
    let cpu = cpus();
    let (s0, s1, s2) = (
        cpu[0].new_stream().expect("stream"),
        cpu[1].new_stream().expect("stream"),
        cpu[0].new_stream().expect("stream"),
    );
    let tensor = |d: usize| {
        let buffer = cpu[d].alloc(64).expect("alloc");
        TensorRef::new(&buffer, 0, DType::F32, &[16]).expect("tensor")
    };
    let (x, y, z) = (tensor(0), tensor(1), tensor(0));
    let host = HostTimeline::new("silent");
    let held = host.reserve();
    s2.wait(&held.point()).expect("stream 2 goes silent");
    let read = s2.read_into_async(&y, vec![9f32; 16]).expect("stream 2 reads y, held");
    s1.wait_bounded(&s2.last_point(), WaitPolicy::Block, Some(Duration::from_millis(30))).expect("wait");
    let graph = baton_conformance::contract::scale_graph(16, 2.0);
    let mut b = baton_core::backend::Bindings::new(&graph);
    b.bind_name("x", x.clone()).expect("x").bind_name("y", y.clone()).expect("y");
    s1.compute(b).expect("stream 1 computes y from x after its (doomed) wait");
    s0.copy(&z, &x, None).expect("stream 0 overwrites x, after stream 1's read of it settles");
    let write = s0.write_async(&y, vec![5f32; 16]).expect("stream 0 overwrites y");
    let write = match write.wait_within(Duration::from_millis(300)) {
        Err(e) if e.is_timeout() => e.into_pending().expect("the transfer"),
        other => panic!("the write of y ran before stream 2's held read of it: {other:?}"),
    };
    held.signal();
    let old = read.wait_within(Duration::from_secs(2)).expect("the read runs once its stream resumes");
    assert_eq!(old, vec![0f32; 16], "the read saw the bytes from before the later write");
    write.wait_within(Duration::from_secs(2)).expect("then the write runs");
}
