//! loom models of the sync core: every interleaving of the timeline's
//! writer and its waiters (bounded by loom's preemption bound).
//!
//! Built only under `--cfg loom` in tests: `scripts/loom.sh` runs them.

use std::time::Duration;

use crate::loom::model;
use crate::sync::{Failure, FailureKind, HostTimeline, PointStatus, Timeline, WaitError, WaitPolicy};
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

/// A blocked waiter is always woken by the writer (no lost wake-up), and it
/// sees the payload written before the point (release/acquire).
#[test]
fn blocking_wait_never_misses_the_wake_and_sees_the_payload() {
    model(|| {
        let (timeline, writer) = Timeline::new("loom");
        let payload = Arc::new(AtomicUsize::new(0));
        let p = payload.clone();
        let producer = thread::spawn(move || {
            p.store(42, Ordering::Relaxed);
            writer.advance(1);
        });
        timeline.point(1).wait_with(WaitPolicy::Block, None).expect("reached");
        assert_eq!(payload.load(Ordering::Relaxed), 42, "payload visible at the point");
        producer.join().expect("producer");
    });
}

/// Two waiters on different points both wake; values only grow.
#[test]
fn every_waiter_wakes_and_the_counter_is_monotonic() {
    model(|| {
        let (timeline, writer) = Timeline::new("loom");
        let t2 = timeline.clone();
        let waiter = thread::spawn(move || {
            t2.point(2).wait_with(WaitPolicy::Block, None).expect("reached");
            t2.reached()
        });
        writer.advance(1);
        let seen = timeline.reached();
        writer.advance(2);
        assert!(timeline.reached() >= seen);
        assert!(waiter.join().expect("waiter") >= 2);
    });
}

/// Dropping a release wakes its blocked waiter with an abandonment error.
#[test]
fn abandoning_a_release_fails_its_waiter() {
    model(|| {
        let host = HostTimeline::new("loom-host");
        let release = host.reserve();
        let point = release.point();
        let waiter = thread::spawn(move || point.wait_with(WaitPolicy::Block, None));
        drop(release);
        match waiter.join().expect("waiter") {
            Err(WaitError::Failed { cause, .. }) => {
                assert_eq!(cause.kind(), FailureKind::Abandoned)
            }
            other => panic!("expected abandonment, got {other:?}"),
        }
    });
}

/// Signal and abandon of two releases race; each point ends in one state
/// and never changes it.
#[test]
fn a_point_is_reached_or_failed_never_both() {
    model(|| {
        let host = HostTimeline::new("loom-host");
        let (r1, r2) = (host.reserve(), host.reserve());
        let (p1, p2) = (r1.point(), r2.point());
        let a = thread::spawn(move || r1.signal());
        let b = thread::spawn(move || drop(r2));
        let first = matches!(p2.status(), PointStatus::Reached);
        a.join().expect("a");
        b.join().expect("b");
        assert!(p1.is_reached());
        assert!(matches!(p2.status(), PointStatus::Failed(_)), "2 was abandoned");
        assert!(!first, "a failed point was never seen reached");
    });
}

/// A wait with a bound on a point nobody reaches ends in a timeout, for the
/// blocking and the polling policy.
#[test]
fn a_bounded_wait_on_a_point_that_never_comes_times_out() {
    model(|| {
        let (timeline, _writer) = Timeline::new("loom");
        let r = timeline.point(1).wait_with(WaitPolicy::Block, Some(Duration::ZERO));
        assert!(matches!(r, Err(WaitError::Timeout { .. })), "{r:?}");
        let poll = WaitPolicy::Poll { bound: Duration::ZERO };
        let r = timeline.point(1).wait_with(poll, None);
        assert!(matches!(r, Err(WaitError::Timeout { .. })), "{r:?}");
    });
}

/// Spin-then-block waiters wake too, whichever phase they are in.
#[test]
fn spin_then_block_waiter_wakes() {
    model(|| {
        let (timeline, writer) = Timeline::new("loom");
        let waiter = thread::spawn(move || {
            timeline.point(1).wait_with(WaitPolicy::SpinThenBlock { spin: Duration::ZERO }, None)
        });
        writer.advance(1);
        waiter.join().expect("waiter").expect("reached");
    });
}

/// A poller sees the payload complete at the first poll that sees the point,
/// and an abandoned point wakes it at once (no bound needed).
#[test]
fn poller_sees_the_payload_and_wakes_on_abandonment() {
    model(|| {
        let (timeline, writer) = Timeline::new("loom");
        let payload = Arc::new(AtomicUsize::new(0));
        let p = payload.clone();
        let producer = thread::spawn(move || {
            p.store(7, Ordering::Relaxed);
            writer.advance(1);
        });
        let poll = WaitPolicy::Poll { bound: Duration::from_secs(3600) };
        timeline.point(1).wait_with(poll, None).expect("reached");
        assert_eq!(payload.load(Ordering::Relaxed), 7);
        producer.join().expect("producer");

        let host = HostTimeline::new("loom-host");
        let release = host.reserve();
        let point = release.point();
        let abandoner = thread::spawn(move || drop(release));
        let r = point.wait_with(poll, None);
        assert!(matches!(r, Err(WaitError::Failed { .. })), "{r:?}");
        abandoner.join().expect("abandoner");
    });
}

/// Two releases dropped from two threads in either order: both points fail
/// and a blocked waiter of the earlier one wakes, whichever failure came
/// first (the timeline fails from the lowest failed value).
#[test]
fn releases_abandoned_out_of_order_fail_both_points() {
    model(|| {
        let host = HostTimeline::new("loom-host");
        let (first, second) = (host.reserve(), host.reserve());
        let (p1, p2) = (first.point(), second.point());
        let waiter = thread::spawn(move || p1.wait_with(WaitPolicy::Block, None));
        let dropper = thread::spawn(move || drop(second));
        drop(first);
        dropper.join().expect("dropper");
        assert!(matches!(waiter.join().expect("waiter"), Err(WaitError::Failed { .. })), "the earlier point fails");
        assert!(matches!(p2.status(), PointStatus::Failed(_)), "the later point fails");
    });
}

/// A writer shared between threads (as the composite device shares one):
/// advancing and failing the same value race, and whatever an observer saw
/// first, the point never changes state afterwards.
#[test]
fn advance_and_fail_from_two_threads_never_both_hold() {
    model(|| {
        let (timeline, writer) = Timeline::new("loom");
        let writer = Arc::new(writer);
        let w = writer.clone();
        let failer = thread::spawn(move || {
            w.fail(1, Failure::new(FailureKind::WorkFailed, "loom@1", "x"));
        });
        writer.advance(1);
        let seen = timeline.status(1);
        failer.join().expect("failer");
        let last = timeline.status(1);
        match (seen, last) {
            (PointStatus::Reached, PointStatus::Reached) | (PointStatus::Failed(_), PointStatus::Failed(_)) => {}
            (a, b) => panic!("the point moved from {a:?} to {b:?}"),
        }
    });
}
