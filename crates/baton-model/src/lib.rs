//! Decoder models on Baton devices: a GGUF file loaded onto one device,
//! a layer split, tensor shares or ranks; the architectures as data
//! ([`ArchTraits`]); the graph of a batched step; a sequence's state (the KV
//! cache in slots, sliding-window rings, prefixes copied, saved and
//! restored); logits and hidden states.
//!
//! What drives a model lives elsewhere: sampling, constrained decoding,
//! chat templates, conversations and perplexity in baton-gen; synthetic
//! files in baton-synth; known models fetched by name in baton-fetch.
//! Depends on baton-core, baton-sched (placement and pipelined runs),
//! baton-composite (tensor parallelism), baton-kernels (weight types,
//! quantization), baton-gguf and baton-tokenizer.
//!
//! ```no_run
//! use baton_model::{EncodeOptions, LoadOptions, Model};
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
mod config;
mod embedding;
mod error;
mod expert_parallel;
mod gemma4;
mod graph;
mod hybrid;
mod memory;
mod model;
mod mtp;
mod state;
mod tensor_parallel;
mod vocab;
mod weights;

// The crates whose types the API uses: GGUF files and tokenizers.
pub use baton_gguf;
pub use baton_tokenizer;
pub use baton_tokenizer::{EncodeOptions, Tokenizer};

// Loading a model and evaluating tokens.
pub use arch::{Activation, ArchTraits, Architecture, LayerAttention};
pub use config::{Experts, LlamaConfig, MAX_EXPERTS};
pub use embedding::{normalize, Pooling};
pub use error::ModelError;
pub use expert_parallel::{share_name, share_of, ExpertSplit, ShareHolding};
pub use gemma4::Gemma4;
pub use graph::{BatchShape, GraphShape, Logits, SeqShape, WINDOW_STEP};
pub use hybrid::Recurrent;
pub use memory::ModelMemory;
pub use model::{BatchTicket, LoadOptions, MakeRemoteEdges, Model, Placement, SeqStep, CHAT_TEMPLATE_KEY};
pub use mtp::MtpHead;
pub use state::{
    host_memory_available, BlockCopy, BlockTables, BlockUsage, KvCache, KvPool, KvTypes, LayerCache, PoolFull,
    PoolSize, SavedPrefix,
};
pub use tensor_parallel::TensorShares;
pub use vocab::{tokenizer_config_from_gguf, tokenizer_from_gguf};
pub use weights::Weights;

/// The README's code, compiled and run as doc tests (its library example
/// runs; the whole-model example compiles).
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
