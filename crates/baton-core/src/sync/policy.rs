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

/// Pause instructions between two polls, at most (the backoff ladder; more
/// would delay the wake-up by the time of the pauses).
const MAX_PAUSES: u32 = 8;
/// Pause instructions between two clock reads and yields (about 2 µs).
const PAUSES_PER_CHECK: u32 = if cfg!(loom) { 1 } else { 64 };

/// The default bound of a polling wait.
pub const DEFAULT_POLL_BOUND: Duration = Duration::from_secs(10);
/// The default spin time of a spin-then-block wait.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(50);

/// The default deadline of a stream's wait on another timeline's point
/// ([`default_wait_deadline`]): as PyTorch's NCCL watchdog, long enough for
/// any one step of real work, short enough that a silent peer surfaces.
pub const DEFAULT_WAIT_DEADLINE: Duration = Duration::from_secs(300);

/// How long a stream waits on another timeline's point before it fails with
/// `FailureKind::TimedOut` naming the point (contract rule `W-BOUND`):
/// `BATON_WAIT_DEADLINE` in seconds (`30`, `0.5`; `off` for none), else
/// [`DEFAULT_WAIT_DEADLINE`]. Read once; a value that does not parse is
/// reported through `tracing` and the default is used.
pub fn default_wait_deadline() -> Option<Duration> {
    static DEFAULT: std::sync::OnceLock<Option<Duration>> = std::sync::OnceLock::new();
    *DEFAULT.get_or_init(|| match std::env::var("BATON_WAIT_DEADLINE") {
        Err(_) => Some(DEFAULT_WAIT_DEADLINE),
        Ok(text) => parse_deadline(&text).unwrap_or_else(|| {
            tracing::warn!(
                "BATON_WAIT_DEADLINE={text:?} is not a number of seconds or `off`; using {DEFAULT_WAIT_DEADLINE:?}"
            );
            Some(DEFAULT_WAIT_DEADLINE)
        }),
    })
}

/// Parses a deadline: seconds (a positive finite number), or `off`/`none`
/// for no deadline. `None` when it does not parse.
pub fn parse_deadline(text: &str) -> Option<Option<Duration>> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("off") || text.eq_ignore_ascii_case("none") {
        return Some(None);
    }
    let seconds: f64 = text.parse().ok()?;
    (seconds.is_finite() && seconds > 0.0 && seconds < 1e9).then(|| Some(Duration::from_secs_f64(seconds)))
}

/// What ends a stream's wait besides its deadline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WaitUntil {
    /// The point is reached; a failed point fails the waiting stream with
    /// its first cause (`W-FAIL`). Every wait a caller asks for.
    #[default]
    Reached,
    /// The point is settled, reached or failed: the waiting stream goes on
    /// either way. The hazard tracking's own waits (`M-ORDER`): they order
    /// memory accesses after earlier work, which is over once its point is
    /// settled, and a stream the caller did not tie to that work must not
    /// fail with it.
    Settled,
}

/// The strategy of one waiter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WaitPolicy {
    /// Sleep in the kernel (condvar on a futex) until woken. Costs a wake-up
    /// (a few microseconds on Linux) and no CPU while waiting.
    #[default]
    Block,
    /// Poll with exponential backoff (1 to 8 pause instructions between
    /// polls) for at most `spin`, yielding the core about every 2 µs so an
    /// oversubscribed producer can run, then block. A hand-off that comes
    /// within `spin` costs no wake-up; a long wait costs `spin` of CPU.
    SpinThenBlock {
        /// How long to poll before parking.
        spin: Duration,
    },
    /// Poll the counter only (the fast fence): a pause between polls,
    /// yielding about every 2 µs so the producer can run on an
    /// oversubscribed core. Never parks; a wait that lasts longer than `bound` ends in
    /// [`WaitError::Timeout`] even when the caller gave no timeout, so a dead
    /// peer can never hang a poller.
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

    /// Parses `block`, `spin` or `poll` (with their default times).
    pub fn from_name(name: &str) -> Option<WaitPolicy> {
        match name {
            "block" => Some(WaitPolicy::Block),
            "spin" => Some(WaitPolicy::SpinThenBlock { spin: DEFAULT_SPIN }),
            "poll" => Some(WaitPolicy::Poll { bound: DEFAULT_POLL_BOUND }),
            _ => None,
        }
    }

    /// The process-wide default: `poll` when `BATON_FAST_SYNC=1`, else
    /// `BATON_WAIT_POLICY` (`block`, `spin`, `poll`) if set, else `block`.
    /// Read once.
    pub fn process_default() -> WaitPolicy {
        static DEFAULT: std::sync::OnceLock<WaitPolicy> = std::sync::OnceLock::new();
        *DEFAULT.get_or_init(|| {
            if std::env::var("BATON_FAST_SYNC").is_ok_and(|v| v == "1") {
                return WaitPolicy::Poll { bound: DEFAULT_POLL_BOUND };
            }
            std::env::var("BATON_WAIT_POLICY").ok().and_then(|n| WaitPolicy::from_name(&n)).unwrap_or_default()
        })
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
            WaitPolicy::SpinThenBlock { spin } => {
                if let Some(done) = poll(timeline, value, spin_end(started, spin, deadline), true) {
                    return done;
                }
                timeline.wait_blocking(value, started, deadline)
            }
            WaitPolicy::Poll { bound } => {
                let until = deadline.map_or(started + bound, |d| d.min(started + bound));
                match poll(timeline, value, until, false) {
                    Some(done) => done,
                    None => Err(timeline.timeout_error(value, started)),
                }
            }
        }
    }
}

/// When the spin phase of a spin-then-block wait that began at `started`
/// ends: after `spin`, or at the wait's deadline if that comes first.
fn spin_end(started: Instant, spin: Duration, deadline: Option<Instant>) -> Instant {
    let spun = started + spin;
    deadline.map_or(spun, |d| d.min(spun))
}

/// Polls until the point is settled or `until` passes (then `None`).
/// `backoff` grows the pause between polls from 1 to [`MAX_PAUSES`] instructions.
fn poll(timeline: &Timeline, value: u64, until: Instant, backoff: bool) -> Option<Result<(), WaitError>> {
    let mut pauses = 1u32;
    let mut since_check = 0u32;
    loop {
        if let Some(done) = check(timeline, value) {
            return Some(done);
        }
        // The clock and the yield come after a budget of pauses (about two
        // microseconds), not of polls, so backoff never delays them.
        since_check += pauses;
        if since_check >= PAUSES_PER_CHECK {
            since_check = 0;
            // `until <=`, not `now >=`: the budget's `>=` above stays the
            // only one of this function, so that its mutant has a name of
            // its own (.cargo/mutants.toml).
            if until <= Instant::now() {
                return None;
            }
            yield_now();
        }
        for _ in 0..pauses {
            spin_loop();
        }
        if backoff && pauses < MAX_PAUSES {
            pauses *= 2;
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
