//! Single passes: work that takes a free sequence slot for one evaluation
//! of a whole text between the engine's steps, then gives the slot back.
//!
//! - An embedding: the text's final hidden states pooled
//!   ([`baton_model::Model::embed`]; callers normalise).
//! - A prompt's score: the log-probability of each of its tokens after the
//!   ones before it, with the most likely alternatives (`echo` with
//!   `logprobs` on `/v1/completions`, what evaluation harnesses ask).
//!
//! On one process without a tensor split, both ride the decode steps a
//! chunk of the prefill budget at a time (the worker's `embeds.rs` and
//! `scores.rs`), so a long text delays the running sequences' next tokens
//! by at most a chunk's work per step, as a long prompt does. Elsewhere a
//! pass is its own forward pass, queued on the devices after the decode
//! step in flight. Either way the running sequences' logits do not change
//! (the kernels give every row the bits it gets alone). The slot's cache
//! forgets what it held for the prefix cache.

use baton_model::{Logits, Model, ModelError, Pooling};
use tokio::sync::oneshot;

use super::scope::CacheScope;
use baton_gen::token_logprobs;
use baton_gen::TokenLogprobs;

/// A single pass waiting for a slot. A request's passes hold one place in
/// the queue together: its last pass holds it, and gives it back when it
/// leaves the queue (taken, failed or dropped), once the others before it
/// have left.
pub(super) struct QueuedPass {
    pub(super) job: PassJob,
    pub(super) holds_place: bool,
}

impl QueuedPass {
    /// A request's passes, in order, the last holding its place.
    pub(super) fn request(jobs: Vec<PassJob>) -> impl Iterator<Item = QueuedPass> {
        let last = jobs.len().saturating_sub(1);
        jobs.into_iter().enumerate().map(move |(i, job)| QueuedPass { job, holds_place: i == last })
    }
}

/// A single pass on its way to the worker.
pub(super) enum PassJob {
    /// An embedding; riding the steps, its slot keeps the text's keys and
    /// values as a prefix of `scope`.
    Embed { tokens: Vec<u32>, pooling: Pooling, scope: CacheScope, reply: oneshot::Sender<Result<Vec<f32>, String>> },
    /// A prompt's score, with `top` alternatives per token.
    Score { tokens: Vec<u32>, top: usize, reply: oneshot::Sender<Result<Vec<TokenLogprobs>, String>> },
}

impl PassJob {
    /// Tokens the pass evaluates.
    pub(super) fn tokens(&self) -> usize {
        match self {
            PassJob::Embed { tokens, .. } | PassJob::Score { tokens, .. } => tokens.len(),
        }
    }

    /// Whether its client went away.
    pub(super) fn abandoned(&self) -> bool {
        match self {
            PassJob::Embed { reply, .. } => reply.is_closed(),
            PassJob::Score { reply, .. } => reply.is_closed(),
        }
    }

    /// Runs the pass on `slot` and answers.
    pub(super) fn run(self, model: &mut Model, slot: usize) {
        match self {
            PassJob::Embed { tokens, pooling, reply, .. } => {
                let _ = reply.send(model.embed(slot, &tokens, pooling).map_err(|e| e.to_string()));
            }
            PassJob::Score { tokens, top, reply } => {
                let _ = reply.send(score(model, slot, &tokens, top).map_err(|e| e.to_string()));
            }
        }
    }

    /// Answers with `why` instead.
    /// Whether it is an embedding's pass.
    pub(super) fn is_embedding(&self) -> bool {
        matches!(self, PassJob::Embed { .. })
    }

    pub(super) fn fail(self, why: &str) {
        match self {
            PassJob::Embed { reply, .. } => drop(reply.send(Err(why.to_string()))),
            PassJob::Score { reply, .. } => drop(reply.send(Err(why.to_string()))),
        }
    }
}

/// Each token's log-probability after the ones before it (none for the
/// first), evaluated from position 0 of `slot` in batches of the model's
/// batch size, one batch's logits at a time.
pub(super) fn score(
    model: &mut Model,
    slot: usize,
    tokens: &[u32],
    top: usize,
) -> Result<Vec<TokenLogprobs>, ModelError> {
    let (batch, vocab) = (model.batch(), model.config().vocab);
    let mut out = Vec::with_capacity(tokens.len().saturating_sub(1));
    for (i, chunk) in tokens.chunks(batch).enumerate() {
        let start = i * batch;
        let logits = model.eval_slot(slot, chunk, start, Logits::All)?;
        for (row, logits) in logits.chunks_exact(vocab).enumerate() {
            // Row r predicts the token at position start + r + 1.
            if let Some(&next) = tokens.get(start + row + 1) {
                out.push(token_logprobs(logits, next, top));
            }
        }
    }
    Ok(out)
}

/// The answer to a single pass on its way: an embedding
/// ([`EmbeddingTicket`]) or a prompt's score ([`ScoreTicket`]).
#[derive(Debug)]
pub struct PassTicket<T> {
    pub(super) reply: oneshot::Receiver<Result<T, String>>,
}

/// The pooled hidden state of [`Engine::embed`](super::Engine::embed).
pub type EmbeddingTicket = PassTicket<Vec<f32>>;

/// The prompt's log-probabilities of [`Engine::score`](super::Engine::score).
pub type ScoreTicket = PassTicket<Vec<TokenLogprobs>>;

impl<T> PassTicket<T> {
    /// The answer, or why the pass failed. Once it has given its answer,
    /// the ticket gives only an error.
    pub async fn wait(&mut self) -> Result<T, String> {
        if self.reply.is_terminated() {
            return Err(Self::gone());
        }
        (&mut self.reply).await.unwrap_or_else(|_| Err(Self::gone()))
    }

    /// As [`wait`](Self::wait), blocking this thread (not for async code).
    pub fn blocking_wait(self) -> Result<T, String> {
        self.reply.blocking_recv().unwrap_or_else(|_| Err(Self::gone()))
    }

    fn gone() -> String {
        "the engine stopped before the pass was done".into()
    }
}
