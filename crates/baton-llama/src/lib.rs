//! Llama-family models on Baton: GGUF loading, tokenizers, the llama graph
//! with its KV cache, sampling, chat templates and conversations,
//! perplexity, and synthetic models.
//!
//! The top library: depends on baton-core, baton-sched (placement and
//! pipelined runs), baton-composite (tensor parallelism), baton-kernels
//! (weight types, quantization), baton-gguf and baton-tokenizer; baton-cli
//! is its user in the workspace.
//!
//! ```no_run
//! use std::sync::Arc;
//! use baton_core::backend::Device;
//! use baton_llama::{LoadOptions, Model};
//!
//! let device: Arc<dyn Device> = baton_cpu::open(&["cpu"], None)?.remove(0);
//! let mut model = Model::load("model.gguf".as_ref(), device, &LoadOptions::default())?;
//! let prompt = model.tokenizer().encode("Once upon a time", true, false)?;
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
pub use chat::{ChatTemplate, Message};
pub use config::LlamaConfig;
pub use conversation::Conversation;
pub use error::ModelError;
pub use graph::Logits;
pub use model::{LoadOptions, Model};
