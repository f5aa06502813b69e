//! The engine's latency histograms and recent throughput, which the worker
//! records and `GET /metrics` reads at any time (atomics and one short
//! lock; the worker never waits on a reader for long).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use baton_core::loom::plain::Mutex;

/// Upper bounds (seconds) of the latency histograms' buckets (a last one,
/// `+Inf`, holds everything).
pub const LATENCY_BUCKETS: [f64; 14] =
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

/// How far back [`Throughput`] looks.
pub const THROUGHPUT_WINDOW: Duration = Duration::from_secs(10);

/// A histogram of durations over [`LATENCY_BUCKETS`].
#[derive(Debug, Default)]
pub struct Histogram {
    /// Per bucket (the last is `+Inf`), the observations that fell in it
    /// (not cumulative).
    counts: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    /// Sum of every observation, in nanoseconds.
    sum_nanos: AtomicU64,
}

/// What a [`Histogram`] held when it was read.
#[derive(Clone, Debug, PartialEq)]
pub struct HistogramSnapshot {
    /// Cumulative counts: observations at most `LATENCY_BUCKETS[i]` (the
    /// last: all of them).
    pub cumulative: Vec<u64>,
    /// Sum of the observations, in seconds.
    pub sum_seconds: f64,
}

impl HistogramSnapshot {
    /// Observations in all.
    pub fn count(&self) -> u64 {
        self.cumulative.last().copied().unwrap_or(0)
    }
}

impl Histogram {
    /// Counts one duration.
    pub fn observe(&self, d: Duration) {
        let seconds = d.as_secs_f64();
        let bucket = LATENCY_BUCKETS.iter().position(|&b| seconds <= b).unwrap_or(LATENCY_BUCKETS.len());
        self.counts[bucket].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// The counts now (each bucket read once; an observation recorded
    /// meanwhile may be in the counts and not the sum, or the reverse).
    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut total = 0;
        let cumulative = self
            .counts
            .iter()
            .map(|c| {
                total += c.load(Ordering::Relaxed);
                total
            })
            .collect();
        HistogramSnapshot { cumulative, sum_seconds: self.sum_nanos.load(Ordering::Relaxed) as f64 * 1e-9 }
    }
}

/// Tokens generated over the last [`THROUGHPUT_WINDOW`]: the worker adds
/// each step's, a reader divides by the window.
#[derive(Debug)]
pub struct Throughput {
    started: Instant,
    steps: Mutex<VecDeque<(Instant, u64)>>,
}

impl Default for Throughput {
    fn default() -> Throughput {
        Throughput { started: Instant::now(), steps: Mutex::new(VecDeque::new()) }
    }
}

impl Throughput {
    /// Counts `tokens` generated now.
    pub fn add(&self, tokens: u64) {
        let now = Instant::now();
        let mut steps = self.steps.lock();
        while steps.front().is_some_and(|&(at, _)| now.duration_since(at) > THROUGHPUT_WINDOW) {
            steps.pop_front();
        }
        if tokens > 0 {
            steps.push_back((now, tokens));
        }
    }

    /// Tokens per second over the window (over the time since the engine
    /// started, while that is shorter).
    pub fn per_second(&self) -> f64 {
        let now = Instant::now();
        let tokens: u64 = {
            let steps = self.steps.lock();
            steps.iter().filter(|&&(at, _)| now.duration_since(at) <= THROUGHPUT_WINDOW).map(|&(_, n)| n).sum()
        };
        let span = now.duration_since(self.started).min(THROUGHPUT_WINDOW).as_secs_f64();
        if span > 0.0 {
            tokens as f64 / span
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative_and_sum_in_seconds() {
        let h = Histogram::default();
        for ms in [0.5, 3.0, 3.0, 40.0, 60_000.0] {
            h.observe(Duration::from_secs_f64(ms / 1000.0));
        }
        let s = h.snapshot();
        assert_eq!(s.cumulative.len(), LATENCY_BUCKETS.len() + 1);
        // <= 1 ms: 1; <= 2.5 ms: 1; <= 5 ms: 3; ... <= 50 ms: 4; +Inf: 5.
        assert_eq!(&s.cumulative[..6], &[1, 1, 3, 3, 3, 4]);
        assert_eq!(s.cumulative[LATENCY_BUCKETS.len() - 1], 4, "60 s is past the last bound");
        assert_eq!(s.count(), 5);
        assert!((s.sum_seconds - 60.0465).abs() < 1e-6, "{}", s.sum_seconds);
    }

    #[test]
    fn throughput_counts_the_window_only() {
        let t = Throughput::default();
        assert_eq!(t.per_second(), 0.0);
        t.add(30);
        t.add(0);
        t.add(10);
        let rate = t.per_second();
        // 40 tokens over the (short) time since start: a large rate.
        assert!(rate > 40.0, "{rate}");
        // Entries older than the window are dropped.
        if let Some(old) = Instant::now().checked_sub(THROUGHPUT_WINDOW * 2) {
            t.steps.lock().push_front((old, 1_000_000));
            t.add(1);
            assert_eq!(t.steps.lock().len(), 3);
        }
    }
}
