//! Serving a Baton model to many clients at once.
//!
//! Two layers:
//!
//! - [`engine`]: one thread owns the [`Model`](baton_model::Model) and runs
//!   *continuous batching*. Requests join and leave between steps; every
//!   step evaluates one token of each running sequence and, for a sequence
//!   still reading its prompt, one chunk of that prompt, in a single batched
//!   forward pass (each weight is read once for all of them). A sequence's
//!   logits never depend on which others share its step (see
//!   [`Model::eval_batch`](baton_model::Model::eval_batch)), so a request's
//!   greedy output is the same served alone or under load.
//! - [`http`]: the OpenAI-compatible server (`/v1/chat/completions`,
//!   `/v1/completions`, `/v1/embeddings`, `/v1/models`, `/health`,
//!   `/metrics`) on axum, which turns
//!   requests into [`engine::GenerateRequest`]s and streams the tokens back.
#![deny(missing_docs)]

pub mod engine;
pub mod http;
pub mod text;
pub mod timings;
