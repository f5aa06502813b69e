//! The same figures under llama-server's names (`llamacpp:*`, its
//! `--metrics` exposition), so that dashboards and alerts written for
//! llama-server read Baton's server unchanged. What each means is
//! llama-server's; how Baton measures it:
//!
//! - prompt tokens are the ones evaluated (the prefix cache's apart, in
//!   `prompt_tokens_cached_total`), as Baton's `baton_prompt_tokens_total`;
//! - the seconds are those of the engine's steps, from submission to
//!   logits, each step's shared out between its prompt rows and its other
//!   rows by their count (a step mixes prompts and generation), and the
//!   two throughput gauges are the tokens over those seconds since start
//!   (llama-server's average over the window between two scrapes);
//! - a decode is one of Baton's steps (`baton_steps_total`), busy slots per
//!   decode the sequences a step carried on average;
//! - `n_tokens_max` is the most positions a sequence has held;
//! - a draft is a sequence's verification of drafts in a step.

use super::exposition::single;
use crate::engine::EngineMetrics;

/// Appends the `llamacpp:*` families of `m` to `out`.
pub(super) fn render(out: &mut String, m: &EngineMetrics) {
    let s = &m.stats;
    let per_second = |n: u64, seconds: f64| if seconds > 0.0 { n as f64 / seconds } else { 0.0 };
    let counters = [
        ("prompt_tokens_total", "Number of prompt tokens processed, excluding cached tokens.", s.prompt_tokens as f64),
        ("prompt_tokens_cached_total", "Number of prompt tokens reused from the cache.", m.prompt_tokens_cached as f64),
        ("prompt_seconds_total", "Total time spent processing prompts.", m.prompt_seconds),
        ("tokens_predicted_total", "Number of generation tokens processed.", s.generated_tokens as f64),
        ("tokens_predicted_seconds_total", "Total time spent generating tokens.", m.decode_seconds),
        ("n_decode_total", "Total number of batched steps (llama_decode() calls).", s.steps as f64),
        ("n_tokens_max", "Largest observed sequence length (prompt + generation).", m.longest_sequence as f64),
        ("spec_decode_num_draft_tokens_total", "Speculative: total draft tokens generated.", m.drafted_tokens as f64),
        (
            "spec_decode_num_accepted_tokens_total",
            "Speculative: total draft tokens accepted by the target model.",
            m.accepted_tokens as f64,
        ),
        (
            "spec_decode_num_drafts_total",
            "Speculative: total speculative decoding verification steps.",
            m.draft_verifications as f64,
        ),
    ];
    let busy = if s.steps > 0 { m.step_sequences as f64 / s.steps as f64 } else { 0.0 };
    let gauges = [
        (
            "prompt_tokens_seconds",
            "Average prompt throughput in tokens/s.",
            per_second(s.prompt_tokens, m.prompt_seconds),
        ),
        (
            "predicted_tokens_seconds",
            "Average generation throughput in tokens/s.",
            per_second(s.generated_tokens, m.decode_seconds),
        ),
        ("requests_processing", "Number of requests processing.", s.running as f64),
        ("requests_deferred", "Number of requests deferred.", s.queued as f64),
        ("n_busy_slots_per_decode", "Average number of busy slots per batched step.", busy),
    ];
    for (kind, family) in [("counter", &counters[..]), ("gauge", &gauges[..])] {
        for &(name, help, value) in family {
            single(out, &format!("llamacpp:{name}"), kind, help, value);
        }
    }
}
