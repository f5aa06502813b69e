//! An embedding whose tokens ride the decode steps (see the worker's
//! `embeds.rs`).

use baton_model::Pooling;
use tokio::sync::oneshot;

use super::scope::CacheScope;

/// An embedding on its way through the steps.
pub(super) struct EmbedSeq {
    pub(super) id: u64,
    pub(super) slot: usize,
    pub(super) group: usize,
    pub(super) tokens: Vec<u32>,
    /// Tokens sent in steps so far.
    pub(super) read: usize,
    pub(super) pooling: Pooling,
    /// Whose prefix its slot holds once the text is read.
    pub(super) scope: CacheScope,
    /// Hidden states of the tokens read, `dim` each.
    pub(super) hidden: Vec<f32>,
    pub(super) reply: oneshot::Sender<Result<Vec<f32>, String>>,
}
