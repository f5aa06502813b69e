//! How long and how a rank waits for a remote operation.
//!
//! MPI offers no blocking wait with a deadline, so every remote operation is
//! non-blocking and its requests are tested in a loop shaped by the edge's
//! [`WaitPolicy`], until they complete or the deadline passes.

use std::time::{Duration, Instant};

use baton_core::sync::{parse_deadline, WaitPolicy};

/// The default deadline of a remote operation.
pub const DEFAULT_REMOTE_DEADLINE: Duration = Duration::from_secs(30);

/// How long a waiter that does not poll still tests back to back, yielding
/// the core between tests: MPI progresses only inside MPI calls (a
/// non-blocking collective's rounds, a large message's fragments), so a
/// waiter that sleeps stalls the operation it waits for.
const PROGRESS_WINDOW: Duration = Duration::from_millis(2);
/// The first sleep between two tests after the window.
const FIRST_SLEEP: Duration = Duration::from_micros(10);
/// The longest sleep between two tests: the latency it adds at most to a
/// step of an operation that needs this rank's progress.
const MAX_SLEEP: Duration = Duration::from_micros(100);
/// Tests between two clock reads of a polling waiter.
const TESTS_PER_CLOCK: u32 = 64;

/// The deadline and wait policy of one remote edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteBound {
    /// How long a remote operation may take before it fails with the
    /// ranks that did not answer.
    pub deadline: Duration,
    /// How the waiting thread waits. MPI progresses only inside MPI calls
    /// (Open MPI's own blocking waits poll), so no policy sleeps at once:
    /// `poll` tests without sleeping (yielding now and then) until the
    /// deadline; `spin` tests so for its spin time, `block` not at all;
    /// both then test back to back yielding the core for 2 ms, then sleep
    /// between tests (10 µs, doubling to 100 µs).
    pub policy: WaitPolicy,
}

impl Default for RemoteBound {
    fn default() -> Self {
        RemoteBound { deadline: DEFAULT_REMOTE_DEADLINE, policy: WaitPolicy::process_default() }
    }
}

impl RemoteBound {
    /// A bound of `deadline` waited with `policy`.
    pub fn new(deadline: Duration, policy: WaitPolicy) -> Self {
        RemoteBound { deadline, policy }
    }

    /// The process default: `BATON_REMOTE_DEADLINE` in seconds (`30`,
    /// `0.5`) if set, else [`DEFAULT_REMOTE_DEADLINE`], with
    /// [`WaitPolicy::process_default`]. A remote wait is always bounded:
    /// `off`, or a value that does not parse, is reported through `tracing`
    /// and the default is used.
    pub fn from_env() -> Self {
        let deadline = match std::env::var("BATON_REMOTE_DEADLINE") {
            Err(_) => DEFAULT_REMOTE_DEADLINE,
            Ok(text) => match parse_deadline(&text) {
                Some(Some(d)) => d,
                _ => {
                    tracing::warn!(
                        "BATON_REMOTE_DEADLINE={text:?} is not a number of seconds; using {DEFAULT_REMOTE_DEADLINE:?}"
                    );
                    DEFAULT_REMOTE_DEADLINE
                }
            },
        };
        RemoteBound { deadline, ..RemoteBound::default() }
    }

    /// Calls `test` until it returns `Ok(true)` (done), an error, or the
    /// deadline passes (`Ok(false)`), waiting between calls as the policy
    /// says. `test` runs at least once.
    pub fn wait<E>(&self, mut test: impl FnMut() -> Result<bool, E>) -> Result<bool, E> {
        let started = Instant::now();
        let until = started + self.deadline;
        let spin_until = match self.policy {
            WaitPolicy::Poll { .. } => until,
            WaitPolicy::SpinThenBlock { spin } => started + spin,
            WaitPolicy::Block => started,
        };
        let mut tests = 0u32;
        loop {
            if test()? {
                return Ok(true);
            }
            tests += 1;
            if tests.is_multiple_of(TESTS_PER_CLOCK) {
                if Instant::now() >= spin_until {
                    break;
                }
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        let window_until = Instant::now().max(started + PROGRESS_WINDOW).min(until);
        while Instant::now() < window_until {
            if test()? {
                return Ok(true);
            }
            std::thread::yield_now();
        }
        let mut sleep = FIRST_SLEEP;
        loop {
            let now = Instant::now();
            if now >= until {
                return test();
            }
            std::thread::sleep(sleep.min(until - now));
            if test()? {
                return Ok(true);
            }
            sleep = (sleep * 2).min(MAX_SLEEP);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;

    fn policies() -> [WaitPolicy; 3] {
        [
            WaitPolicy::Block,
            WaitPolicy::SpinThenBlock { spin: Duration::from_micros(50) },
            WaitPolicy::Poll { bound: Duration::from_secs(10) },
        ]
    }

    #[test]
    fn a_test_that_never_completes_ends_at_the_deadline_under_every_policy() {
        for policy in policies() {
            let bound = RemoteBound::new(Duration::from_millis(30), policy);
            let started = Instant::now();
            let done = bound.wait(|| Ok::<_, Infallible>(false)).unwrap();
            let took = started.elapsed();
            assert!(!done, "{policy:?}: an operation that never completes is not done");
            assert!(took >= Duration::from_millis(30), "{policy:?}: ended early, after {took:?}");
            assert!(took < Duration::from_millis(500), "{policy:?}: overran the 30 ms deadline: {took:?}");
        }
    }

    #[test]
    fn a_completing_operation_is_seen_done_after_its_completion_under_every_policy() {
        for policy in policies() {
            let bound = RemoteBound::new(Duration::from_secs(5), policy);
            let mut calls = 0;
            let done = bound
                .wait(|| {
                    calls += 1;
                    Ok::<_, Infallible>(calls == 200)
                })
                .unwrap();
            assert!(done, "{policy:?}");
            assert_eq!(calls, 200, "{policy:?}: tests stop at the first that succeeds");
        }
    }

    #[test]
    fn an_error_of_the_test_ends_the_wait_with_it() {
        let bound = RemoteBound::new(Duration::from_secs(5), WaitPolicy::Block);
        assert_eq!(bound.wait(|| Err::<bool, _>("broken")), Err("broken"));
    }
}
