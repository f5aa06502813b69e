//! The llama crate's tests, one test binary (`--test it`): synthetic models,
//! bad input, chat, layer and tensor split, and, behind `reference-tests`,
//! the NumPy and jinja2 references. Sampling is a binary of its own
//! (`tests/sampling.rs`): it installs a counting global allocator.

mod bad_input;
mod batch;
mod cache_types;
mod chat;
mod chat_reference;
mod embedding;
mod kv_copy;
mod long_context;
mod mapped;
mod reference;
mod ring;
mod split;
mod synth;
mod tensor_parallel;
mod warm_up;
