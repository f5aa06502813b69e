//! The generation crate's tests, one test binary (`--test it`): chat
//! templates and conversations on synthetic models, speculative decoding
//! (n-grams, draft models, the MTP head), and, behind
//! `reference-tests`, the jinja2 reference. Sampling is a binary of its
//! own (`tests/sampling.rs`): it installs a counting global allocator.

mod chat;
mod chat_reference;
mod speculative;
mod speculative_hybrid;
mod speculative_mtp;
mod verify_bits;
