//! The timeline's write side: failures out of order, writers dropped early.

use std::time::Duration;

use super::{Failure, FailureKind, HostTimeline, PointStatus, Timeline, WaitError};

fn failed(status: PointStatus) -> Failure {
    match status {
        PointStatus::Failed(cause) => cause,
        other => panic!("expected a failed point, got {other:?}"),
    }
}

#[test]
fn a_failure_below_the_first_fails_the_values_between_with_its_own_cause() {
    let (timeline, writer) = Timeline::new("t");
    writer.fail(5, Failure::new(FailureKind::WorkFailed, "t@5", "second item"));
    writer.fail(3, Failure::new(FailureKind::Abandoned, "t@3", "first item"));
    assert!(matches!(timeline.status(2), PointStatus::Pending), "below every failure: still pending");
    assert_eq!(failed(timeline.status(3)).origin(), "t@3");
    assert_eq!(failed(timeline.status(4)).origin(), "t@3");
    assert_eq!(failed(timeline.status(5)).origin(), "t@5", "a point keeps the cause it failed with first");
    assert_eq!(failed(timeline.status(99)).origin(), "t@5");
    assert_eq!(timeline.failed_from(), Some(3));
    writer.advance(2);
    assert!(matches!(timeline.status(2), PointStatus::Reached));
    writer.advance(4);
    assert_eq!(timeline.reached(), 2, "a failed value is never reached");
    writer.fail(4, Failure::new(FailureKind::WorkFailed, "t@4", "late"));
    assert_eq!(failed(timeline.status(4)).origin(), "t@3", "a failure above the lowest changes nothing");
}

#[test]
fn releases_dropped_out_of_order_each_fail_their_point() {
    let host = HostTimeline::new("h");
    let (first, second) = (host.reserve(), host.reserve());
    let (p1, p2) = (first.point(), second.point());
    drop(second);
    drop(first);
    for p in [&p1, &p2] {
        match p.wait_timeout(Duration::from_secs(5)) {
            Err(WaitError::Failed { cause, .. }) => assert_eq!(cause.kind(), FailureKind::Abandoned),
            other => panic!("{p}: expected abandonment, got {other:?}"),
        }
    }
    assert_eq!(failed(p1.status()).origin(), "h@1");
    assert_eq!(failed(p2.status()).origin(), "h@2");
}

#[test]
fn a_release_failed_with_a_cause_passes_that_cause_on() {
    let host = HostTimeline::new("h");
    let cause = Failure::new(FailureKind::WorkFailed, "cpu:0/stream-1@3", "kernel error");
    let release = host.reserve();
    let point = release.point();
    release.fail_with(cause.clone());
    assert!(failed(point.status()).same_cause(&cause));
}

#[test]
fn a_dropped_writer_abandons_every_value_it_did_not_reach() {
    let (timeline, writer) = Timeline::new("gone");
    writer.advance(2);
    drop(writer);
    assert!(matches!(timeline.status(2), PointStatus::Reached));
    let cause = failed(timeline.status(3));
    assert_eq!(cause.kind(), FailureKind::Abandoned);
    assert_eq!(cause.origin(), "gone@3");
    match timeline.point(7).wait_timeout(Duration::from_secs(5)) {
        Err(WaitError::Failed { .. }) => {}
        other => panic!("a point of a writerless timeline must fail, got {other:?}"),
    }
}

#[test]
fn a_dropped_writer_keeps_an_earlier_failure() {
    let (timeline, writer) = Timeline::new("t");
    writer.fail(1, Failure::new(FailureKind::WorkFailed, "t@1", "boom"));
    drop(writer);
    assert_eq!(failed(timeline.status(1)).message(), "boom");
}

#[test]
fn accessors_report_what_was_done() {
    let (timeline, writer) = Timeline::new("t");
    let (other, _other_writer) = Timeline::new("t");
    assert!(timeline.same_as(&writer.timeline()));
    assert!(!timeline.same_as(&other), "two timelines with one label are not the same");
    assert_eq!((writer.reached(), writer.is_failed(), timeline.failure().is_none()), (0, false, true));
    writer.advance(3);
    assert_eq!(writer.reached(), 3);
    writer.fail(5, Failure::new(FailureKind::WorkFailed, "t@5", "x"));
    assert!(writer.is_failed());
    assert_eq!(timeline.failure().map(|f| f.origin().to_string()), Some("t@5".into()));
}
