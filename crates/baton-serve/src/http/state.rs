//! What every handler shares: the engine, the chat template and the
//! server's counters.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use crate::engine::Engine;

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    pub(super) engine: Engine,
    /// The chat template, and what renders conversations with it.
    pub(super) prompter: super::chat_prompt::Prompter,
    /// Unix seconds when the server started.
    pub(super) started: u64,
    pub(super) requests: Arc<AtomicU64>,
    /// How long a request body may take to arrive.
    pub(super) body_timeout: std::time::Duration,
    /// How `/v1/embeddings` pools a text's hidden states.
    pub(super) pooling: baton_model::Pooling,
    /// The width of an embedding (the model's hidden size).
    pub(super) embedding_dim: usize,
    /// The random keys of the hash that gives a request its cache scope
    /// (`auth.rs`), drawn when the server starts.
    pub(super) scope_seed: Arc<std::collections::hash_map::RandomState>,
    /// Refuse (404) a `model` other than the served one's name.
    pub(super) strict_model_name: bool,
    /// The model's other names, which `strict_model_name` accepts too.
    pub(super) model_aliases: Arc<[String]>,
    /// The model's tags, as `/v1/models` lists them.
    pub(super) model_tags: Arc<[String]>,
    /// The model file, as `/props` tells it.
    pub(super) model_path: String,
    /// What becomes of a chat answer's thinking.
    pub(super) reasoning_format: super::options::ReasoningFormat,
    /// What a request that leaves out its temperature, seed or
    /// `max_tokens` takes.
    pub(super) defaults: super::defaults::RequestDefaults,
}

/// Unix seconds now.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
