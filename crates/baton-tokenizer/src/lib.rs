//! Baton's tokenizers, built from a GGUF file's tokenizer metadata.
//!
//! Depends on no other Baton crate; baton-model builds its tokenizers with
//! it.
//!
//! Three algorithms, chosen by `tokenizer.ggml.model`:
//!
//! - `llama`: SentencePiece-style. Spaces become `▁`, a space is prefixed
//!   (`add_space_prefix`), adjacent symbols are merged by best token score,
//!   and characters outside the vocabulary fall back to `<0xXX>` byte tokens
//!   (or the unknown token).
//! - `gpt2`: byte-level BPE. Text is split into words by the pre-tokenizer
//!   named by `tokenizer.ggml.pre` (see [`PreTokenizer`]), each word's bytes
//!   become GPT-2's printable byte characters, and merges apply by rank.
//! - `gemma4`: SentencePiece-style BPE (Gemma 4). Spaces become `▁`, text
//!   is split only at newline runs, merges apply by rank over whole
//!   characters, and characters outside the vocabulary fall back to
//!   `<0xXX>` byte tokens. BOS is always added, as llama.cpp does.
//!
//! Special tokens (control and user-defined) written in the text are matched
//! verbatim before pre-tokenization; BOS/EOS are added as the metadata says.
//! Decoding reassembles bytes into text, whole ([`Tokenizer::decode`]) or
//! token by token without ever emitting half a character ([`StreamDecoder`]).
//!
//! This crate does not read GGUF: the model crate fills a
//! [`TokenizerConfig`] from the `tokenizer.ggml.*` keys.
//!
//! ```
//! use baton_tokenizer::{synthetic_bpe, EncodeOptions, Tokenizer};
//!
//! let tokenizer = Tokenizer::from_config(&synthetic_bpe(512))?;
//! let ids = tokenizer.encode("<|im_start|>user\nHello, world!", EncodeOptions { add_special: true, parse_special: true })?;
//! assert_eq!(ids[0], 1); // <|im_start|> matched as one control token
//! assert_eq!(tokenizer.decode_with(&ids, true)?, "<|im_start|>user\nHello, world!");
//! # Ok::<(), baton_tokenizer::TokenizerError>(())
//! ```
//!
//! The reference check against HF `tokenizers` (feature `reference-tests`)
//! is described in `tests/it/reference.rs`.
#![deny(missing_docs)]

mod bpe;
mod bytes;
mod config;
mod decode;
mod end_of_generation;
mod error;
mod harmony;
mod pretokenize;
mod special;
mod spm;
mod spm_bpe;
mod synth;
mod table;
mod tokenizer;
mod unicode;

pub use config::{ModelKind, TokenType, TokenizerConfig, SUPPORTED_MODELS};
pub use decode::StreamDecoder;
pub use error::{Result, TokenizerError};
pub use pretokenize::{PreTokenizer, SUPPORTED_PRE};
pub use synth::{
    synthetic_bpe, synthetic_gemma4, SYNTHETIC_GEMMA4_MARKERS, SYNTHETIC_GEMMA4_SPECIALS,
    SYNTHETIC_GEMMA4_TOOL_MARKERS, SYNTHETIC_SPECIALS,
};
pub use tokenizer::{EncodeOptions, Tokenizer};
