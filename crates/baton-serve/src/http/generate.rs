//! Turning a [`Generation`]'s tokens into text: incremental decoding and
//! stop strings.

use std::future::Future;
use std::sync::Arc;

use baton_model::Tokenizer;

use crate::engine::{Generation, TokenLogprobs};
use crate::text::{Progress, TextStream};
use crate::timings::Timings;

pub use crate::text::Outcome;

/// Runs `generation` to its end, giving each piece of text that is safe to
/// send to `on_text`, with the log-probabilities of the tokens that came
/// since the last piece (when the request asked for them); stops early (dropping the generation, which frees its
/// sequence) when a stop string matches or `cancelled` completes.
pub async fn drive(
    generation: Generation,
    tokenizer: &Arc<Tokenizer>,
    stops: Vec<String>,
    prompt_tokens: usize,
    on_text: impl FnMut(String, Vec<TokenLogprobs>),
    cancelled: impl Future<Output = ()>,
) -> Outcome {
    drive_to_stop(generation, tokenizer, stops, prompt_tokens, on_text, cancelled).await.0
}

/// As [`drive`], with the stop string that ended the text, when one did.
pub async fn drive_to_stop(
    generation: Generation,
    tokenizer: &Arc<Tokenizer>,
    stops: Vec<String>,
    prompt_tokens: usize,
    mut on_text: impl FnMut(String, Vec<TokenLogprobs>),
    cancelled: impl Future<Output = ()>,
) -> (Outcome, Option<String>) {
    let on = (move |t, e, _| on_text(t, e), |_| {});
    drive_reporting(generation, tokenizer, stops, prompt_tokens, on, cancelled).await
}

/// As [`drive_to_stop`], giving the first of `on` each piece of text with
/// the timings so far, and the second each report of the prompt's
/// progress (before the first token).
pub async fn drive_reporting(
    mut generation: Generation,
    tokenizer: &Arc<Tokenizer>,
    stops: Vec<String>,
    prompt_tokens: usize,
    (mut on_text, mut on_progress): (impl FnMut(String, Vec<TokenLogprobs>, Timings), impl FnMut(Progress)),
    cancelled: impl Future<Output = ()>,
) -> (Outcome, Option<String>) {
    let mut stream = TextStream::new(tokenizer, stops, prompt_tokens);
    tokio::pin!(cancelled);
    loop {
        let event = tokio::select! {
            biased;
            () = &mut cancelled => return (Outcome::Cancelled, None),
            event = generation.next() => event,
        };
        let pushed = stream.push(event);
        if let Some(progress) = pushed.progress {
            on_progress(progress);
        }
        if let Some((text, logprobs)) = pushed.text {
            on_text(text, logprobs, stream.timings());
        }
        if let Some(end) = pushed.end {
            return (end, stream.matched_stop().map(str::to_string));
        }
    }
}
