//! How a waiter waits: a policy, not a type.
//!
//! The same point can be waited on by blocking in the kernel, by spinning a
//! little and then blocking, or by polling the counter until a bound runs
//! out. Each ends in the same three outcomes (reached, failed, timed out), so
//! callers never depend on the strategy.

use std::time::{Duration, Instant};

use crate::loom::{spin_loop, yield_now};
use crate::sync::failure::WaitError;
use crate::sync::timeline::{PointStatus, Timeline};

/// Spins of the backoff ladder before a spinning waiter yields its core.
const SPIN_STEPS: u32 = 6;

/// The strategy of one waiter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WaitPolicy {
    /// Sleep in the kernel (condvar on a futex) until woken. Costs a wake-up
    /// (a few microseconds on Linux) and no CPU while waiting.
    #[default]
    Block,
    /// Spin with exponential backoff for `spins` rounds (each up to 64 pause
    /// instructions, then `yield` so an oversubscribed core lets the producer
    /// run), then block.
    SpinThenBlock {
        /// Backoff rounds before parking.
        spins: u32,
    },
    /// Poll the counter only: `spin_loop` hints, yielding every 64 polls
    /// so the producer can run on an oversubscribed core. Never parks; a wait
    /// that lasts longer than `bound` ends in [`WaitError::Timeout`] even when
    /// the caller gave no timeout, so a dead peer can never hang a poller.
    Poll {
        /// Upper bound of one wait.
        bound: Duration,
    },
}

impl WaitPolicy {
    /// Short name for tables and plans (`block`, `spin`, `poll`).
    pub fn name(&self) -> &'static str {
        match self {
            WaitPolicy::Block => "block",
            WaitPolicy::SpinThenBlock { .. } => "spin",
            WaitPolicy::Poll { .. } => "poll",
        }
    }

    /// Waits until `value` of `timeline` is reached, fails, or `timeout`
    /// (and, for `Poll`, the policy's own bound) runs out.
    pub fn wait(&self, timeline: &Timeline, value: u64, timeout: Option<Duration>) -> Result<(), WaitError> {
        let started = Instant::now();
        if let Some(done) = check(timeline, value) {
            return done;
        }
        let deadline = timeout.map(|t| started + t);
        match *self {
            WaitPolicy::Block => timeline.wait_blocking(value, started, deadline),
            WaitPolicy::SpinThenBlock { spins } => {
                for round in 0..spins {
                    if round < SPIN_STEPS {
                        for _ in 0..(1u32 << round) {
                            spin_loop();
                        }
                    } else {
                        yield_now();
                    }
                    if let Some(done) = check(timeline, value) {
                        return done;
                    }
                }
                timeline.wait_blocking(value, started, deadline)
            }
            WaitPolicy::Poll { bound } => {
                let poll_deadline = match deadline {
                    Some(d) => d.min(started + bound),
                    None => started + bound,
                };
                let mut polls: u32 = 0;
                loop {
                    if let Some(done) = check(timeline, value) {
                        return done;
                    }
                    polls = polls.wrapping_add(1);
                    if polls.is_multiple_of(64) {
                        if Instant::now() >= poll_deadline {
                            return Err(timeline.timeout_error(value, started));
                        }
                        yield_now();
                    } else {
                        spin_loop();
                    }
                }
            }
        }
    }
}

fn check(timeline: &Timeline, value: u64) -> Option<Result<(), WaitError>> {
    match timeline.status(value) {
        PointStatus::Reached => Some(Ok(())),
        PointStatus::Failed(cause) => Some(Err(timeline.failed_error(value, cause))),
        PointStatus::Pending => None,
    }
}
