//! A generation's events turned into text: tokens decoded incrementally
//! (never half a character), stop strings matched across tokens, and the
//! log-probabilities of the tokens behind each piece handed out with it.
//!
//! The HTTP answers (`http::generate`) and the Python package drive the
//! same [`TextStream`], one [`Event`] at a time, each waiting for events
//! its own way.

use std::sync::Arc;

use baton_model::baton_tokenizer::StreamDecoder;
use baton_model::Tokenizer;

use crate::engine::{Event, FinishReason, TokenLogprobs};
use crate::timings::{Clock, Timings};
use baton_gen::openai::Usage;
use baton_gen::StopMatcher;

/// How a generation ended.
#[derive(Debug)]
pub enum Outcome {
    /// It finished: `stop` (end of generation or a stop string) or
    /// `length`, with its counts.
    Finished {
        /// `stop` or `length`.
        reason: &'static str,
        /// Token counts.
        usage: Usage,
        /// Log-probabilities of tokens not yet handed out with text.
        logprobs: Vec<TokenLogprobs>,
        /// Each generated token's end in the text handed out, in bytes
        /// (what the reasoning tokens are counted by).
        token_ends: Vec<usize>,
        /// How long the prompt and the generation took.
        timings: Timings,
    },
    /// The engine failed; the message says why.
    Failed(String),
    /// The client went away (the generation was dropped).
    Cancelled,
}

/// What one [`TextStream::push`] gives: text that is safe to hand out now
/// (with the log-probabilities of the tokens since the last piece), and
/// the end, when this event ended the generation.
#[derive(Debug, Default)]
pub struct Pushed {
    /// Text to hand out, never empty.
    pub text: Option<(String, Vec<TokenLogprobs>)>,
    /// The end of the generation (the caller drops it then, which frees
    /// its sequence when a stop string ended it early).
    pub end: Option<Outcome>,
    /// How far reading the prompt got, when this event told (before the
    /// first token, each report further than the last).
    pub progress: Option<Progress>,
}

/// llama-server's `prompt_progress`: of `total` prompt tokens, `cache`
/// came from the cache and `processed` (those included) are read, in
/// `time_ms` since reading the prompt began (the first report's, 0).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progress {
    /// The prompt's tokens.
    pub total: usize,
    /// Those the cache held.
    pub cache: usize,
    /// Those in the cache now.
    pub processed: usize,
    /// Milliseconds since the first report (the slot took the request).
    pub time_ms: f64,
}

impl Progress {
    /// `prompt_progress` as llama-server writes it.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "total": self.total,
            "cache": self.cache,
            "processed": self.processed,
            "time_ms": self.time_ms,
        })
    }

    /// The `timings` of the prompt read so far: the tokens read beyond the
    /// cache's in `time_ms`, nothing generated yet.
    pub fn timings(&self) -> Timings {
        Timings {
            cached: self.cache,
            prompt_n: self.processed.saturating_sub(self.cache),
            prompt_ms: self.time_ms,
            ..Timings::default()
        }
    }
}

/// Turns one generation's events into text.
#[derive(Debug)]
pub struct TextStream {
    decoder: StreamDecoder<'static, Arc<Tokenizer>>,
    matcher: StopMatcher,
    stops: Vec<String>,
    /// The end of the text pushed into the matcher: at least the longest
    /// stop string's length before the last piece, so that a stop string
    /// the matcher finds lies in it.
    window: String,
    /// The stop string that ended the text, once one has.
    matched: Option<String>,
    pending: Vec<TokenLogprobs>,
    prompt_tokens: usize,
    completion: usize,
    cached: usize,
    /// Bytes decoded so far after each token.
    token_ends: Vec<usize>,
    decoded: usize,
    clock: Clock,
    /// The prompt tokens read by the last progress reported, and when
    /// the first was.
    reported: Option<usize>,
    first_report: Option<std::time::Instant>,
}

impl TextStream {
    /// A stream for a generation of a `prompt_tokens`-token prompt that
    /// ends at any of `stops` (non-empty strings).
    pub fn new(tokenizer: &Arc<Tokenizer>, stops: Vec<String>, prompt_tokens: usize) -> TextStream {
        TextStream {
            decoder: tokenizer.shared_stream_decoder(false),
            matcher: StopMatcher::new(stops.clone()),
            stops,
            window: String::new(),
            matched: None,
            pending: Vec::new(),
            prompt_tokens,
            completion: 0,
            cached: 0,
            token_ends: Vec::new(),
            decoded: 0,
            clock: Clock::new(),
            reported: None,
            first_report: None,
        }
    }

    /// Takes the next event (`None`: the engine dropped the generation).
    pub fn push(&mut self, event: Option<Event>) -> Pushed {
        let mut pushed = Pushed::default();
        match event {
            Some(Event::Started { cached_tokens }) => {
                self.cached = cached_tokens;
                pushed.progress = self.progress(cached_tokens);
            }
            Some(Event::Progress { read }) => pushed.progress = self.progress(read),
            Some(Event::Logprobs(entry)) => self.pending.push(entry),
            Some(Event::Token(token)) => {
                self.clock.token();
                self.completion += 1;
                let decoded = self.decoder.push(token);
                if let Ok(Some(piece)) = &decoded {
                    self.decoded += piece.len();
                }
                self.token_ends.push(self.decoded);
                match decoded {
                    Ok(Some(piece)) if self.release(&piece, &mut pushed) => pushed.end = Some(self.stop_string_end()),
                    Ok(_) => {}
                    Err(e) => pushed.end = Some(Outcome::Failed(format!("decoding token {token}: {e}"))),
                }
            }
            Some(Event::Done(finish)) => {
                if let Some(rest) = self.decoder.finish() {
                    self.decoded += rest.len();
                    if let Some(last) = self.token_ends.last_mut() {
                        *last = self.decoded;
                    }
                    if self.release(&rest, &mut pushed) {
                        pushed.end = Some(self.stop_string_end());
                        return pushed;
                    }
                }
                let rest = self.matcher.finish();
                self.hand_out(rest, &mut pushed);
                let reason = match finish.reason {
                    FinishReason::Stop => "stop",
                    FinishReason::Length => "length",
                };
                let usage = Usage::new(finish.prompt_tokens, finish.completion_tokens, finish.cached_tokens);
                let logprobs = std::mem::take(&mut self.pending);
                let token_ends = std::mem::take(&mut self.token_ends);
                let timings = self.timings();
                pushed.end = Some(Outcome::Finished { reason, usage, logprobs, token_ends, timings });
            }
            Some(Event::Failed(why)) => pushed.end = Some(Outcome::Failed(why)),
            None => pushed.end = Some(Outcome::Failed("the engine stopped before the generation ended".into())),
        }
        pushed
    }

    /// The timings so far.
    pub fn timings(&self) -> Timings {
        self.clock.timings(self.prompt_tokens, self.cached, self.completion)
    }

    /// The progress of `read` prompt tokens, unless a token came already or
    /// it is no further than the last reported (a sequence preempted
    /// reads its prompt again).
    fn progress(&mut self, read: usize) -> Option<Progress> {
        let total = self.prompt_tokens;
        let processed = read.min(total);
        if self.completion > 0 || self.reported.is_some_and(|last| processed <= last) {
            return None;
        }
        self.reported = Some(processed);
        let now = std::time::Instant::now();
        let time_ms = (now - *self.first_report.get_or_insert(now)).as_secs_f64() * 1e3;
        Some(Progress { total, cache: self.cached.min(total), processed, time_ms })
    }

    /// The stop string that ended the text (the one found first in it),
    /// once one has.
    pub fn matched_stop(&self) -> Option<&str> {
        self.matched.as_deref()
    }

    /// Passes `piece` through the stop strings; whether one matched.
    fn release(&mut self, piece: &str, pushed: &mut Pushed) -> bool {
        let released = self.matcher.push(piece);
        self.hand_out(released.text, pushed);
        if self.stops.is_empty() {
            return released.stopped;
        }
        self.window.push_str(piece);
        if released.stopped {
            let window = self.window.as_str();
            self.matched = self
                .stops
                .iter()
                .filter_map(|s| window.find(s.as_str()).map(|at| (at, s)))
                .min_by_key(|(at, _)| *at)
                .map(|(_, s)| s.clone());
        } else {
            // The matcher holds back less than the longest stop string.
            let longest = self.stops.iter().map(String::len).max().unwrap_or(0);
            let mut cut = self.window.len().saturating_sub(longest);
            while !self.window.is_char_boundary(cut) {
                cut -= 1;
            }
            self.window.drain(..cut);
        }
        released.stopped
    }

    fn hand_out(&mut self, text: String, pushed: &mut Pushed) {
        if text.is_empty() {
            return;
        }
        let logprobs = std::mem::take(&mut self.pending);
        match &mut pushed.text {
            Some((held, held_logprobs)) => {
                held.push_str(&text);
                held_logprobs.extend(logprobs);
            }
            None => pushed.text = Some((text, logprobs)),
        }
    }

    /// The end a stop string made: `stop`, with the tokens so far.
    fn stop_string_end(&mut self) -> Outcome {
        let usage = Usage::new(self.prompt_tokens, self.completion, self.cached);
        let (logprobs, token_ends) = (std::mem::take(&mut self.pending), std::mem::take(&mut self.token_ends));
        Outcome::Finished { reason: "stop", usage, logprobs, token_ends, timings: self.timings() }
    }
}
