//! A prompt's score whose tokens ride the decode steps (see the worker's
//! `scores.rs`).

use tokio::sync::oneshot;

use super::request::TokenLogprobs;

/// A score on its way through the steps.
pub(super) struct ScoreSeq {
    pub(super) id: u64,
    pub(super) slot: usize,
    pub(super) group: usize,
    pub(super) tokens: Vec<u32>,
    /// Tokens sent in steps so far.
    pub(super) read: usize,
    /// Alternatives per token.
    pub(super) top: usize,
    /// The entries of the tokens after the first, so far.
    pub(super) entries: Vec<TokenLogprobs>,
    pub(super) reply: oneshot::Sender<Result<Vec<TokenLogprobs>, String>>,
}
