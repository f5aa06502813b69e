//! llama-server's `timings` of a generation: how long reading the prompt
//! and generating took, measured where the answer is written (from the
//! request's submission to its first token, then to its last), with the
//! tokens each covered.

use std::time::Instant;

use serde_json::{json, Value};

/// A generation's counts and times (by default none yet: all zero).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Timings {
    /// Prompt tokens the cache held (not evaluated).
    pub cached: usize,
    /// Prompt tokens evaluated.
    pub prompt_n: usize,
    /// Milliseconds from the submission to the first token (the wait in
    /// the queue included).
    pub prompt_ms: f64,
    /// Tokens generated.
    pub predicted_n: usize,
    /// Milliseconds from the first token to the last: the steps of the
    /// tokens after the first (the first comes from the prompt's last
    /// step), which the generation rate is over, as llama-server's.
    pub predicted_ms: f64,
}

impl Timings {
    /// The `timings` object as llama-server writes it.
    pub fn to_json(&self) -> Value {
        let per = |ms: f64, n: usize| if n == 0 { (0.0, 0.0) } else { (ms / n as f64, n as f64 * 1e3 / ms.max(1e-9)) };
        let (prompt_per_token, prompt_per_second) = per(self.prompt_ms, self.prompt_n);
        let (predicted_per_token, predicted_per_second) = per(self.predicted_ms, self.predicted_n.saturating_sub(1));
        json!({
            "cache_n": self.cached,
            "prompt_n": self.prompt_n,
            "prompt_ms": self.prompt_ms,
            "prompt_per_token_ms": prompt_per_token,
            "prompt_per_second": prompt_per_second,
            "predicted_n": self.predicted_n,
            "predicted_ms": self.predicted_ms,
            "predicted_per_token_ms": predicted_per_token,
            "predicted_per_second": predicted_per_second,
        })
    }
}

/// The instants a generation's timings are measured between.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    started: Instant,
    first: Option<Instant>,
}

impl Default for Clock {
    fn default() -> Clock {
        Clock::new()
    }
}

impl Clock {
    /// A clock started now (at the submission).
    pub fn new() -> Clock {
        Clock { started: Instant::now(), first: None }
    }

    /// A token came (the first one marks the prompt read).
    pub fn token(&mut self) {
        self.first.get_or_insert_with(Instant::now);
    }

    /// The timings now, of a `prompt`-token prompt of which `cached` came
    /// from the cache, with `predicted` tokens generated.
    pub fn timings(&self, prompt: usize, cached: usize, predicted: usize) -> Timings {
        let now = Instant::now();
        let first = self.first.unwrap_or(now);
        Timings {
            cached,
            prompt_n: prompt.saturating_sub(cached),
            prompt_ms: (first - self.started).as_secs_f64() * 1e3,
            predicted_n: predicted,
            predicted_ms: (now - first).as_secs_f64() * 1e3,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_follow_counts_and_times_and_none_divide_by_zero() {
        let t = Timings { cached: 3, prompt_n: 10, prompt_ms: 20.0, predicted_n: 4, predicted_ms: 8.0 };
        let v = t.to_json();
        assert_eq!(v["cache_n"], 3);
        assert_eq!(v["prompt_per_token_ms"], 2.0);
        assert_eq!(v["prompt_per_second"], 500.0);
        // 3 tokens after the first in 8 ms.
        let rates = (v["predicted_per_second"].as_f64(), v["predicted_per_token_ms"].as_f64());
        assert_eq!(rates, (Some(375.0), Some(8.0 / 3.0)));
        for n in [0, 1] {
            // No token after the first: no rate (not a division by ~0).
            let none = Timings { predicted_n: n, predicted_ms: 1e-6, ..t }.to_json();
            let rates = (none["predicted_per_second"].as_f64(), none["predicted_per_token_ms"].as_f64());
            assert_eq!(rates, (Some(0.0), Some(0.0)), "{n} tokens");
        }
        let mut clock = Clock::new();
        std::thread::sleep(std::time::Duration::from_millis(2));
        clock.token();
        let t = clock.timings(12, 2, 1);
        assert_eq!((t.prompt_n, t.cached, t.predicted_n), (10, 2, 1));
        assert!(t.prompt_ms >= 2.0 && t.predicted_ms >= 0.0, "{t:?}");
    }
}
