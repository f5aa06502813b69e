//! Llama-family models on Baton: GGUF loading, tokenizers, the llama graph
//! with its KV cache, sampling, chat templates and conversations,
//! perplexity, and synthetic models.
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

pub mod chat;
pub mod config;
pub mod conversation;
pub mod error;
pub mod fetch;
pub mod graph;
pub mod model;
pub mod perplexity;
pub mod sampling;
pub mod synth;
pub mod tensor_parallel;
pub mod vocab;
pub mod weights;

pub use baton_gguf;
pub use baton_tokenizer;
pub use baton_tokenizer::{EncodeOptions, Tokenizer};
pub use chat::{ChatTemplate, Message};
pub use config::LlamaConfig;
pub use conversation::Conversation;
pub use error::ModelError;
pub use graph::Logits;
pub use model::{LoadOptions, Model};

/// The README's code, compiled and run as doc tests (its library example
/// runs; the whole-model example compiles).
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
