//! Embedding requests: a text's tokens evaluated once on a free sequence
//! slot between the engine's steps, their hidden states pooled
//! ([`baton_llama::Model::embed`]; callers normalise).
//!
//! An embedding is its own forward pass, queued on the devices after the
//! decode step in flight: the running sequences' logits do not change (the
//! kernels give every row the bits it gets alone), they only wait for it.
//! The slot's cache forgets what it held for the prefix cache.

use baton_llama::Pooling;
use tokio::sync::oneshot;

/// An embedding request on its way to the worker.
pub(super) struct EmbedJob {
    pub(super) tokens: Vec<u32>,
    pub(super) pooling: Pooling,
    pub(super) reply: oneshot::Sender<Result<Vec<f32>, String>>,
}

/// The answer to [`Engine::embed`](super::Engine::embed) on its way.
#[derive(Debug)]
pub struct EmbeddingTicket {
    pub(super) reply: oneshot::Receiver<Result<Vec<f32>, String>>,
}

impl EmbeddingTicket {
    /// The pooled hidden state (`dim` values), or why it failed. Once it
    /// has given its answer, the ticket gives only an error.
    pub async fn wait(&mut self) -> Result<Vec<f32>, String> {
        if self.reply.is_terminated() {
            return Err(Self::gone());
        }
        (&mut self.reply).await.unwrap_or_else(|_| Err(Self::gone()))
    }

    /// As [`wait`](Self::wait), blocking this thread (not for async code).
    pub fn blocking_wait(self) -> Result<Vec<f32>, String> {
        self.reply.blocking_recv().unwrap_or_else(|_| Err(Self::gone()))
    }

    fn gone() -> String {
        "the engine stopped before the embedding was computed".into()
    }
}
