//! Turning a [`Generation`]'s tokens into text: incremental decoding and
//! stop strings.

use std::future::Future;

use baton_llama::Tokenizer;

use super::stop::StopMatcher;
use super::types::Usage;
use crate::engine::{Event, FinishReason, Generation, TokenLogprobs};

/// How a generation ended, for the answer.
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
    },
    /// The engine failed; the message says why.
    Failed(String),
    /// The client went away (the generation was dropped).
    Cancelled,
}

/// Runs `generation` to its end, giving each piece of text that is safe to
/// send to `on_text`, with the log-probabilities of the tokens that came
/// since the last piece (when the request asked for them); stops early (dropping the generation, which frees its
/// sequence) when a stop string matches or `cancelled` completes.
pub async fn drive(
    mut generation: Generation,
    tokenizer: &Tokenizer,
    stops: Vec<String>,
    prompt_tokens: usize,
    mut on_text: impl FnMut(String, Vec<TokenLogprobs>),
    cancelled: impl Future<Output = ()>,
) -> Outcome {
    let mut pending: Vec<TokenLogprobs> = Vec::new();
    let mut cached = 0;
    let mut decoder = tokenizer.stream_decoder(false);
    let mut matcher = StopMatcher::new(stops);
    let mut completion = 0usize;
    tokio::pin!(cancelled);
    let mut send = |text: String, pending: &mut Vec<TokenLogprobs>| {
        if !text.is_empty() {
            on_text(text, std::mem::take(pending));
        }
    };
    loop {
        let event = tokio::select! {
            biased;
            () = &mut cancelled => return Outcome::Cancelled,
            event = generation.next() => event,
        };
        match event {
            Some(Event::Started { cached_tokens }) => cached = cached_tokens,
            Some(Event::Logprobs(entry)) => pending.push(entry),
            Some(Event::Token(token)) => {
                completion += 1;
                let piece = match decoder.push(token) {
                    Ok(piece) => piece,
                    Err(e) => return Outcome::Failed(format!("decoding token {token}: {e}")),
                };
                let Some(piece) = piece else { continue };
                let released = matcher.push(&piece);
                send(released.text, &mut pending);
                if released.stopped {
                    let usage = Usage::new(prompt_tokens, completion, cached);
                    return Outcome::Finished { reason: "stop", usage, logprobs: pending };
                }
            }
            Some(Event::Done(finish)) => {
                if let Some(rest) = decoder.finish() {
                    let released = matcher.push(&rest);
                    send(released.text, &mut pending);
                    if released.stopped {
                        let usage = Usage::new(prompt_tokens, completion, cached);
                        return Outcome::Finished { reason: "stop", usage, logprobs: pending };
                    }
                }
                send(matcher.finish(), &mut pending);
                let reason = match finish.reason {
                    FinishReason::Stop => "stop",
                    FinishReason::Length => "length",
                };
                let usage = Usage::new(finish.prompt_tokens, finish.completion_tokens, finish.cached_tokens);
                return Outcome::Finished { reason, usage, logprobs: pending };
            }
            Some(Event::Failed(why)) => return Outcome::Failed(why),
            None => return Outcome::Failed("the engine stopped before the generation ended".into()),
        }
    }
}
