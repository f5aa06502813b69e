//! Llama-family models on Baton: GGUF loading, tokenizers, the llama graph
//! with its KV cache, sampling, chat templates and conversations,
//! perplexity, and synthetic models. Known models fetched by name into the
//! cache are baton-fetch's.
//!
//! The top library: depends on baton-core, baton-sched (placement and
//! pipelined runs), baton-composite (tensor parallelism), baton-kernels
//! (weight types, quantization), baton-gguf and baton-tokenizer; baton-cli
//! is its user in the workspace.
//!
//! ```no_run
//! use baton_llama::{EncodeOptions, LoadOptions, Model};
//!
//! let device = baton_cpu::open(&["cpu"])?.remove(0);
//! let mut model = Model::load("model.gguf", device, &LoadOptions::default())?;
//! let prompt = model.tokenizer().encode("Once upon a time", EncodeOptions { add_special: true, parse_special: false })?;
//! let logits = model.eval_prompt(&prompt, 0)?;
//! println!("{} logits", logits.len());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

mod arch;
mod chat;
mod chat_tokens;
mod config;
pub mod constraint;
mod conversation;
mod embedding;
mod error;
mod graph;
mod kv_copy;
mod memory;
mod model;
mod perplexity;
mod sampling;
mod synth;
mod tensor_parallel;
mod vocab;
mod weights;

// The crates whose types the API uses: GGUF files and tokenizers.
pub use baton_gguf;
pub use baton_tokenizer;
pub use baton_tokenizer::{EncodeOptions, Tokenizer};

// Loading a model and evaluating tokens.
pub use arch::{Activation, ArchTraits, Architecture, LayerAttention};
pub use config::LlamaConfig;
pub use embedding::{normalize, Pooling};
pub use error::ModelError;
pub use graph::{BatchShape, GraphShape, Logits, SeqShape, WINDOW_STEP};
pub use kv_copy::SavedPrefix;
pub use memory::ModelMemory;
pub use model::{BatchTicket, LoadOptions, MakeRemoteEdges, Model, SeqStep};
pub use tensor_parallel::TensorShares;
pub use vocab::{tokenizer_config_from_gguf, tokenizer_from_gguf};
pub use weights::{KvCache, Weights};

// Choosing the next token.
pub use sampling::{Candidate, LogitBias, Sampler, SamplingError, SamplingParams, DEFAULT_SEED};

// Chat: templates and conversations that keep their KV cache.
pub use chat::{ChatError, ChatTemplate, Message, TemplateOrigin};
pub use conversation::{Conversation, ConversationError, PromptStats};

// Measuring a model: perplexity over a text.
pub use perplexity::{perplexity, PerplexityOptions, PerplexityResult};

// Synthetic models for tests and benchmarks.
pub use synth::{
    write_synth_model, write_synth_model_mixed, ShapeParams, SynthError, SynthMix, SynthShape, SynthSpec, SynthSummary,
};

/// The README's code, compiled and run as doc tests (its library example
/// runs; the whole-model example compiles).
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
