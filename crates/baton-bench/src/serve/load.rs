//! The load itself: streaming completions from N client threads, and what
//! their token streams' timings say (throughput, time to first token,
//! inter-token latency, the longest stall while a long prompt arrives).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use super::client::{Endpoint, Flow};
use crate::stats::percentile;

/// The prompts the clients send in turn: open-ended, so that a model
/// writes on for many tokens even where the server cannot ignore the end
/// of text.
const PROMPTS: [&str; 8] = [
    "Once upon a time, in a small village by the sea, there lived",
    "The history of the printing press begins in",
    "Here is a long story about a dragon who wanted to learn to cook:",
    "Write a detailed essay about the rivers of Europe. The first river is",
    "The old clockmaker opened his shop every morning and",
    "A list of one hundred things to do on a rainy day: 1.",
    "In the year 2150, the first city on Mars",
    "Dear diary, today was the strangest day of my life because",
];

/// How each request of a phase is made.
#[derive(Clone, Debug)]
pub struct RequestShape {
    /// Tokens to generate per request.
    pub max_tokens: usize,
    /// Send `ignore_eos: true` (llama.cpp's and, where supported, ours).
    pub ignore_eos: bool,
    /// The model name to send, if any.
    pub model: Option<String>,
    /// The `response_format` to ask for (constrained decoding's cost).
    pub response_format: Option<serde_json::Value>,
    /// The GBNF `grammar` to ask for.
    pub grammar: Option<String>,
    /// Text every prompt of the phases starts with (a shared system
    /// prompt: what a prefix cache saves); empty for none.
    pub shared_prefix: String,
    /// Time allowed for one whole response.
    pub timeout: Duration,
    /// `speculative.n_max` to send (drafted tokens a step verifies, as
    /// Baton's and llama.cpp's servers read it); `None` sends none.
    pub draft_max: Option<usize>,
}

impl RequestShape {
    fn body(&self, prompt: &str, max_tokens: usize) -> String {
        let mut body = json!({
            "prompt": prompt,
            "max_tokens": max_tokens,
            "temperature": 0.0,
            "seed": 1,
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        if self.ignore_eos {
            body["ignore_eos"] = json!(true);
        }
        if let Some(model) = &self.model {
            body["model"] = json!(model);
        }
        if let Some(format) = &self.response_format {
            body["response_format"] = format.clone();
        }
        if let Some(n_max) = self.draft_max {
            body["speculative.n_max"] = json!(n_max);
        }
        if let Some(grammar) = &self.grammar {
            body["grammar"] = json!(grammar);
        }
        body.to_string()
    }
}

/// One streamed response: when it was sent and when each token arrived.
#[derive(Debug, Default)]
pub struct Streamed {
    /// Arrival of each event that carried text.
    pub token_times: Vec<Instant>,
    /// `usage.completion_tokens` when the server sent it.
    pub usage_tokens: Option<usize>,
}

impl Streamed {
    /// Generated tokens: the server's count where it gave one.
    pub fn tokens(&self) -> usize {
        self.usage_tokens.unwrap_or(self.token_times.len())
    }
}

/// Streams one completion; `keep_going` decides after each token.
pub fn stream_one(
    endpoint: &Endpoint,
    shape: &RequestShape,
    prompt: &str,
    max_tokens: usize,
    mut keep_going: impl FnMut(&Streamed) -> bool,
) -> Result<(Instant, Streamed)> {
    let body = shape.body(prompt, max_tokens);
    let mut streamed = Streamed::default();
    let mut bad_event = None;
    let sent = Instant::now();
    let refused = endpoint.stream("/v1/completions", &body, shape.timeout, |data, at| {
        let Ok(event) = serde_json::from_str::<Value>(data) else {
            bad_event = Some(data.to_owned());
            return Flow::Disconnect;
        };
        if let Some(n) = event["usage"]["completion_tokens"].as_u64() {
            streamed.usage_tokens = Some(n as usize);
        }
        let text = event["choices"][0]["text"].as_str().unwrap_or("");
        if !text.is_empty() {
            streamed.token_times.push(at);
        }
        if keep_going(&streamed) {
            Flow::Continue
        } else {
            Flow::Disconnect
        }
    })?;
    if let Some(response) = refused {
        bail!("the server answered {}: {}", response.status, response.body.trim());
    }
    if let Some(data) = bad_event {
        bail!("an event is not JSON: {data:?}");
    }
    Ok((sent, streamed))
}

/// What one client count measured.
#[derive(Clone, Debug)]
pub struct PhaseResult {
    /// Concurrent clients.
    pub clients: usize,
    /// The `speculative.n_max` its requests sent, if any.
    pub draft_max: Option<usize>,
    /// Requests completed.
    pub requests: usize,
    /// Tokens generated in all.
    pub tokens: usize,
    /// Tokens per second over the phase's wall time.
    pub tokens_per_s: f64,
    /// Time to first token, p50 and p99, in milliseconds.
    pub ttft_ms: (f64, f64),
    /// Inter-token latency, p50 and p99, in milliseconds.
    pub itl_ms: (f64, f64),
    /// KV memory per sequence after the phase, in MiB: a paged cache's
    /// bytes in use over the slots holding any (`/metrics`; `None` for a
    /// server that does not say).
    pub kv_mib_per_sequence: Option<f64>,
}

/// KV memory per sequence a server's `/metrics` states: `baton_kv_bytes_used`
/// over `baton_kv_sequences_holding`, in MiB (`None` where it has no
/// paged cache or does not say).
pub fn kv_mib_per_sequence(endpoint: &Endpoint) -> Option<f64> {
    let text = endpoint.get("/metrics", Duration::from_secs(10)).ok().filter(|r| r.status == 200)?.body;
    let value = |name: &str| -> Option<f64> {
        text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
    };
    let (bytes, holders) = (value("baton_kv_bytes_used")?, value("baton_kv_sequences_holding")?);
    (holders > 0.0).then(|| bytes / holders / (1024.0 * 1024.0))
}

/// Runs `requests` streaming completions from `clients` threads, stopping
/// early (after the requests in flight) once `time_limit` has passed.
pub fn run_phase(
    endpoint: &Endpoint,
    shape: &RequestShape,
    clients: usize,
    requests: usize,
    time_limit: Duration,
) -> Result<PhaseResult> {
    let next = AtomicUsize::new(0);
    let records = Mutex::new(Vec::new());
    let start = Instant::now();
    std::thread::scope(|scope| -> Result<()> {
        let workers: Vec<_> = (0..clients)
            .map(|_| {
                scope.spawn(|| -> Result<()> {
                    loop {
                        let index = next.fetch_add(1, Ordering::Relaxed);
                        if index >= requests || start.elapsed() > time_limit {
                            return Ok(());
                        }
                        let prompt = format!("{}{}", shape.shared_prefix, PROMPTS[index % PROMPTS.len()]);
                        let record = stream_one(endpoint, shape, &prompt, shape.max_tokens, |_| true)?;
                        records.lock().map_err(|_| anyhow::anyhow!("a client thread panicked"))?.push(record);
                    }
                })
            })
            .collect();
        for worker in workers {
            worker.join().map_err(|_| anyhow::anyhow!("a client thread panicked"))??;
        }
        Ok(())
    })?;
    let elapsed = start.elapsed().as_secs_f64();
    let records = records.into_inner().map_err(|_| anyhow::anyhow!("a client thread panicked"))?;
    let mut ttft = Vec::new();
    let mut itl = Vec::new();
    let mut tokens = 0;
    for (sent, streamed) in &records {
        tokens += streamed.tokens();
        if let Some(first) = streamed.token_times.first() {
            ttft.push(ms(first.duration_since(*sent)));
        }
        itl.extend(streamed.token_times.windows(2).map(|w| ms(w[1].duration_since(w[0]))));
    }
    if tokens == 0 {
        bail!("{clients} client(s) got no tokens at all");
    }
    ttft.sort_by(f64::total_cmp);
    itl.sort_by(f64::total_cmp);
    Ok(PhaseResult {
        clients,
        draft_max: shape.draft_max,
        requests: records.len(),
        tokens,
        tokens_per_s: tokens as f64 / elapsed,
        ttft_ms: (percentile(&ttft, 0.5), percentile(&ttft, 0.99)),
        itl_ms: (percentile(&itl, 0.5), percentile(&itl, 0.99)),
        kv_mib_per_sequence: kv_mib_per_sequence(endpoint),
    })
}

/// What the long-prompt phase measured.
#[derive(Clone, Debug)]
pub struct StallResult {
    /// Streams running while the long prompt arrived.
    pub streams: usize,
    /// Words of the long prompt (about one token each).
    pub prompt_words: usize,
    /// From sending the long prompt to its first token, in milliseconds.
    pub prefill_ms: f64,
    /// The running streams' inter-token latency p50 before it arrived.
    pub itl_before_ms: f64,
    /// The longest gap between two tokens of a running stream that
    /// overlaps the long prompt's prefill, in milliseconds.
    pub longest_stall_ms: f64,
    /// Running streams whose last token came before the long prompt's first
    /// one (they ended early, so their stall was not seen).
    pub ended_early: usize,
}

/// `streams` streams of at most `stream_tokens` tokens run; once each has a
/// few tokens, a prompt of `prompt_words` words arrives. The streams are dropped once its first
/// token is out.
pub fn run_stall(
    endpoint: &Endpoint,
    shape: &RequestShape,
    streams: usize,
    stream_tokens: usize,
    prompt_words: usize,
) -> Result<StallResult> {
    const WARM_TOKENS: usize = 8;
    let started = AtomicUsize::new(0);
    let prefill_done = Mutex::new(None::<(Instant, Instant)>);
    let long_prompt = long_prompt(prompt_words);
    let results = std::thread::scope(|scope| -> Result<Vec<Streamed>> {
        let runners: Vec<_> = (0..streams)
            .map(|i| {
                let started = &started;
                let prefill_done = &prefill_done;
                scope.spawn(move || -> Result<Streamed> {
                    let mut counted = false;
                    let (_, streamed) = stream_one(endpoint, shape, PROMPTS[i % PROMPTS.len()], stream_tokens, |s| {
                        if !counted && s.token_times.len() >= WARM_TOKENS {
                            counted = true;
                            started.fetch_add(1, Ordering::Release);
                        }
                        // Run on until the long prompt's first token, and a few
                        // tokens more so the gap that spans it is seen.
                        match *prefill_done.lock().unwrap_or_else(|e| e.into_inner()) {
                            Some((_, end)) => s.token_times.last().is_none_or(|t| *t < end),
                            None => true,
                        }
                    })?;
                    Ok(streamed)
                })
            })
            .collect();
        let wait_start = Instant::now();
        // A stream that ends (or fails) before its first tokens would keep
        // the others waiting: the long prompt goes then, and the stream
        // counts as ended early.
        while started.load(Ordering::Acquire) < streams && !runners.iter().any(|r| r.is_finished()) {
            if wait_start.elapsed() > shape.timeout {
                *prefill_done.lock().unwrap_or_else(|e| e.into_inner()) = Some((wait_start, wait_start));
                bail!("the {streams} running streams did not all start within {:?}", shape.timeout);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let long = stream_one(endpoint, shape, &long_prompt, 2, |s| s.token_times.is_empty());
        let window = match &long {
            Ok((sent, s)) => (*sent, s.token_times.first().copied().unwrap_or_else(Instant::now)),
            Err(_) => (Instant::now(), Instant::now()),
        };
        *prefill_done.lock().unwrap_or_else(|e| e.into_inner()) = Some(window);
        long.context("the long prompt")?;
        runners.into_iter().map(|r| r.join().map_err(|_| anyhow::anyhow!("a stream thread panicked"))?).collect()
    })?;
    let (from, to) =
        prefill_done.into_inner().unwrap_or_else(|e| e.into_inner()).context("the long prompt never ran")?;
    let mut before = Vec::new();
    let mut longest = 0.0f64;
    let mut ended_early = 0;
    for streamed in &results {
        if streamed.token_times.last().is_none_or(|t| *t < to) {
            ended_early += 1;
        }
        for w in streamed.token_times.windows(2) {
            let gap = ms(w[1].duration_since(w[0]));
            if w[1] <= from {
                before.push(gap);
            } else if w[0] < to {
                longest = longest.max(gap);
            }
        }
    }
    before.sort_by(f64::total_cmp);
    Ok(StallResult {
        streams,
        prompt_words,
        prefill_ms: ms(to.duration_since(from)),
        itl_before_ms: percentile(&before, 0.5),
        longest_stall_ms: longest,
        ended_early,
    })
}

/// A prompt of `words` words, each about one token, that does not repeat
/// itself in short periods.
/// A shared prefix of `words` words (about one token each), ending in a
/// paragraph break; empty for 0.
pub fn shared_prefix(words: usize) -> String {
    if words == 0 {
        return String::new();
    }
    format!("{}\n\n", long_prompt(words))
}

fn long_prompt(words: usize) -> String {
    const WORDS: [&str; 16] = [
        "river", "stone", "garden", "light", "window", "music", "paper", "green", "table", "winter", "city", "horse",
        "bread", "cloud", "letter", "bridge",
    ];
    let mut state: u32 = 12345;
    let mut text = String::from("Summarise the following notes.");
    for _ in 0..words {
        state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        text.push(' ');
        text.push_str(WORDS[(state >> 16) as usize % WORDS.len()]);
    }
    text
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_long_prompt_has_the_words_asked() {
        let text = super::long_prompt(2000);
        assert_eq!(text.split(' ').count(), 2000 + 4);
        assert_eq!(text, super::long_prompt(2000));
    }
}
