//! The timeline's write side: failures out of order, writers dropped early.

use std::time::Duration;

use super::{
    default_wait_deadline, parse_deadline, policy, Clock, Failure, FailureKind, HostTimeline, PointStatus, Timeline,
    WaitError, WaitPolicy, DEFAULT_WAIT_DEADLINE,
};

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

#[test]
fn failures_are_the_same_cause_only_when_shared() {
    let cause = Failure::new(FailureKind::WorkFailed, "t@1", "boom");
    let twin = Failure::new(FailureKind::WorkFailed, "t@1", "boom");
    assert!(cause.same_cause(&cause.clone()), "a clone is the same first cause");
    assert!(!cause.same_cause(&twin), "an equal failure made apart is another cause");
}

#[test]
fn failures_and_points_print_what_they_name() {
    let cause = Failure::new(FailureKind::Abandoned, "h@2", "dropped");
    assert_eq!(cause.to_string(), "abandoned at h@2: dropped");
    assert_eq!(format!("{cause:?}"), cause.to_string(), "Debug prints as Display");
    let (timeline, writer) = Timeline::new("cpu:0/stream-1");
    writer.advance(4);
    let point = timeline.point(7);
    assert_eq!((point.to_string(), format!("{point:?}")), ("cpu:0/stream-1@7".into(), "cpu:0/stream-1@7".into()));
    assert_eq!(format!("{timeline:?}"), "Timeline(cpu:0/stream-1 at 4)");
    assert_eq!(format!("{writer:?}"), "TimelineWriter(cpu:0/stream-1)");
}

#[test]
fn a_point_covers_the_earlier_points_of_its_own_timeline_only() {
    let (timeline, _writer) = Timeline::new("t");
    let (other, _other_writer) = Timeline::new("t");
    let p = timeline.point(3);
    let covered: Vec<bool> =
        [timeline.point(2), timeline.point(3), timeline.point(4), other.point(1)].iter().map(|q| p.covers(q)).collect();
    assert_eq!(covered, [true, true, false, false], "t@3 covers t@2, t@3; not t@4, nor a point of another timeline");
}

#[test]
fn a_clock_snapshot_of_an_unreached_value_is_kept() {
    let (timeline, _writer) = Timeline::new("t");
    let first = std::sync::Arc::new(Clock::from([(timeline.id(), 1)]));
    timeline.publish_clock(1, first.clone());
    for v in 2..=600 {
        timeline.publish_clock(v, std::sync::Arc::new(Clock::new()));
    }
    let kept = timeline.clock_at(1).map(|c| c.get(&timeline.id()).copied());
    assert_eq!(kept, Some(Some(1)), "nothing is reached: every snapshot is still needed");
    assert_eq!(timeline.clock_history(), 600);
}

#[test]
fn the_clock_history_is_pruned_once_reached() {
    let (timeline, writer) = Timeline::new("t");
    for v in 1..=600 {
        timeline.publish_clock(v, std::sync::Arc::new(Clock::from([(timeline.id(), v)])));
    }
    writer.advance(600);
    for v in 601..=1200 {
        writer.advance(v - 1);
        timeline.publish_clock(v, std::sync::Arc::new(Clock::from([(timeline.id(), v)])));
    }
    let history = timeline.clock_history();
    assert!(history <= 257, "a timeline whose values are reached keeps at most 257 snapshots, kept {history}");
    let newest = timeline.clock_at(1200).and_then(|c| c.get(&timeline.id()).copied());
    assert_eq!(newest, Some(1200), "the newest snapshot is kept");
}

#[test]
fn deadlines_parse_as_positive_seconds_or_off() {
    let cases: [(&str, Option<Option<Duration>>); 12] = [
        ("30", Some(Some(Duration::from_secs(30)))),
        (" 0.5 ", Some(Some(Duration::from_millis(500)))),
        ("off", Some(None)),
        ("OFF", Some(None)),
        ("none", Some(None)),
        ("0", None),
        ("-1", None),
        ("nan", None),
        ("inf", None),
        ("1e9", None),
        ("999999999", Some(Some(Duration::from_secs(999_999_999)))),
        ("soon", None),
    ];
    for (text, expected) in cases {
        assert_eq!(parse_deadline(text), expected, "parse_deadline({text:?})");
    }
}

#[test]
fn wait_policies_are_named_and_found_by_name() {
    let policies = [
        WaitPolicy::Block,
        WaitPolicy::SpinThenBlock { spin: policy::DEFAULT_SPIN },
        WaitPolicy::Poll { bound: policy::DEFAULT_POLL_BOUND },
    ];
    let names: Vec<&str> = policies.iter().map(|p| p.name()).collect();
    assert_eq!(names, ["block", "spin", "poll"]);
    for p in policies {
        assert_eq!(WaitPolicy::from_name(p.name()), Some(p), "from_name({:?})", p.name());
    }
    assert_eq!(WaitPolicy::from_name("fast"), None);
}

/// Set in the child processes of the test below (each reads its own
/// environment once).
const DEFAULTS_CASE: &str = "BATON_TEST_PROCESS_DEFAULTS";

#[test]
#[cfg_attr(miri, ignore = "Miri cannot spawn the child processes that read their own environment")]
fn the_process_defaults_follow_the_environment() {
    let poll = WaitPolicy::Poll { bound: policy::DEFAULT_POLL_BOUND };
    let spin = WaitPolicy::SpinThenBlock { spin: policy::DEFAULT_SPIN };
    let default_deadline = Some(DEFAULT_WAIT_DEADLINE);
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], (WaitPolicy, Option<Duration>));
    let cases: [Case; 6] = [
        ("unset", &[], (WaitPolicy::Block, default_deadline)),
        ("fast", &[("BATON_FAST_SYNC", "1"), ("BATON_WAIT_POLICY", "spin")], (poll, default_deadline)),
        ("named", &[("BATON_FAST_SYNC", "0"), ("BATON_WAIT_POLICY", "spin")], (spin, default_deadline)),
        (
            "deadline",
            &[("BATON_WAIT_POLICY", "poll"), ("BATON_WAIT_DEADLINE", "2.5")],
            (poll, Some(Duration::from_millis(2500))),
        ),
        ("off", &[("BATON_WAIT_DEADLINE", "off")], (WaitPolicy::Block, None)),
        (
            "bad",
            &[("BATON_WAIT_POLICY", "fast"), ("BATON_WAIT_DEADLINE", "soon")],
            (WaitPolicy::Block, default_deadline),
        ),
    ];
    if let Ok(case) = std::env::var(DEFAULTS_CASE) {
        let (_, _, expected) = cases.iter().find(|(name, _, _)| *name == case).expect("a known case");
        let actual = (WaitPolicy::process_default(), default_wait_deadline());
        assert_eq!(actual, *expected, "case {case}: (policy, deadline)");
        return;
    }
    for (case, vars, _) in cases {
        let mut child = std::process::Command::new(std::env::current_exe().expect("the test binary"));
        child.args(["--exact", "sync::tests::the_process_defaults_follow_the_environment", "--test-threads=1"]);
        for var in ["BATON_FAST_SYNC", "BATON_WAIT_POLICY", "BATON_WAIT_DEADLINE"] {
            child.env_remove(var);
        }
        child.env(DEFAULTS_CASE, case).envs(vars.iter().copied());
        let out = child.output().expect("run the test binary");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && stdout.contains("1 passed"), "case {case}: {stdout}");
    }
}

#[test]
fn an_earlier_release_dropped_after_a_later_one_was_signalled_changes_nothing() {
    let host = HostTimeline::new("h");
    let (first, second, third) = (host.reserve(), host.reserve(), host.reserve());
    let (p1, p3) = (first.point(), third.point());
    second.signal();
    drop(first);
    assert_eq!(host.timeline().failed_from(), None, "value 1 was reached: dropping its release fails nothing");
    assert!(p1.is_reached(), "expected h@1 reached, got {:?}", p1.status());
    assert!(matches!(p3.status(), PointStatus::Pending), "expected h@3 pending, got {:?}", p3.status());
    third.signal();
    assert!(p3.is_reached(), "expected h@3 reached after its signal, got {:?}", p3.status());
}

/// Starts a thread that waits on `point` with `policy` for at most 10 s,
/// and returns what the wait gives, or `None` if it has not returned 2 s
/// after `act` ran: a waiter that is not woken at once only notices at
/// its bound (10 s).
fn woken_by(point: super::SyncPoint, policy: WaitPolicy, act: impl FnOnce()) -> Option<Result<(), WaitError>> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(point.wait_with(policy, Some(Duration::from_secs(10))));
    });
    // Time to park, so that the wake-up is what ends the wait.
    std::thread::sleep(Duration::from_millis(50));
    act();
    rx.recv_timeout(Duration::from_secs(2)).ok()
}

#[test]
fn a_blocked_waiter_wakes_at_once_when_its_point_is_reached_or_fails() {
    for policy in [WaitPolicy::Block, WaitPolicy::SpinThenBlock { spin: policy::DEFAULT_SPIN }] {
        let (timeline, writer) = Timeline::new("t");
        let reached = woken_by(timeline.point(1), policy, || writer.advance(1));
        assert!(matches!(reached, Some(Ok(()))), "{policy:?}: expected a waiter woken by the advance, got {reached:?}");
        let failed = woken_by(timeline.point(2), policy, || {
            writer.fail(2, Failure::new(FailureKind::WorkFailed, "t@2", "boom"))
        });
        assert!(
            matches!(failed, Some(Err(WaitError::Failed { .. }))),
            "{policy:?}: expected a waiter woken by the failure, got {failed:?}"
        );
    }
}

#[test]
fn a_poller_sees_its_point_reached_or_failed_at_once() {
    let poll = WaitPolicy::Poll { bound: Duration::from_secs(10) };
    let (timeline, writer) = Timeline::new("t");
    let reached = woken_by(timeline.point(1), poll, || writer.advance(1));
    assert!(matches!(reached, Some(Ok(()))), "expected the poller to see the advance, got {reached:?}");
    let failed =
        woken_by(timeline.point(2), poll, || writer.fail(2, Failure::new(FailureKind::WorkFailed, "t@2", "boom")));
    assert!(
        matches!(failed, Some(Err(WaitError::Failed { .. }))),
        "expected the poller to see the failure, got {failed:?}"
    );
}
