//! The OpenAI-compatible HTTP server (axum on tokio).
//!
//! Endpoints:
//!
//! - `POST /v1/chat/completions`: `messages` rendered with the model's chat
//!   template (ChatML when the file has none) and the generation prompt,
//!   as `baton run --chat` renders them.
//! - `POST /v1/completions`: `prompt` is a string, a list of one string, or
//!   a list of token ids.
//! - `POST /v1/embeddings`: each input's hidden states pooled (mean or
//!   last token, `ServerOptions::pooling`) and normalised (`embeddings.rs`).
//! - `POST /v1/chat/completions/input_tokens` (llama-server's): the tokens
//!   of the prompt a chat request renders to, as `{"input_tokens": n}`.
//! - `GET /v1/models`: the one served model.
//! - `POST /v1/messages` and `POST /v1/messages/count_tokens`: Anthropic's
//!   Messages API over the chat path (`anthropic/`).
//! - `POST /v1/responses`: OpenAI's Responses API over the chat path
//!   (`responses/`).
//! - Three of the routes above answer without the `/v1` prefix too
//!   (`/chat/completions`, `/embeddings`, `/models`), as llama-server's
//!   do; `/completions`, as on llama-server, is its native `/completion`.
//! - llama-server's native `POST /completion` and `/completions` (`native.rs`): `prompt` as
//!   text, ids or several prompts, `n_predict`, `n_probs`,
//!   `return_tokens`, `response_fields`, `json_schema`; its answer's
//!   `content`, `stop_type`, `timings` and `completion_probabilities`.
//! - llama-server's `POST /tokenize` (`content`, `add_special`,
//!   `parse_special`, `with_pieces`), `POST /detokenize` (`tokens`),
//!   `POST /apply-template` (`messages` rendered to `prompt`) and
//!   `GET /props` and `GET /slots` (each slot's state; 501 with
//!   `--no-slots`), in its shapes (`llama.rs`).
//! - `GET /metrics`: Prometheus' text format: requests running, queued and
//!   ended (by reason), prompt and generated tokens, tokens per second
//!   over the last 10 s, time to first token and inter-token latency
//!   (histograms), KV slots and positions used, steps and host waits.
//! - `GET /health`: 200 `{"status": "ok", "running", "queued", ...}` while
//!   the engine takes requests; 503 with `"status": "shutting down"`, or
//!   `"status": "failed"` and the cause in `"error"`, when it does not.
//!
//! CORS ([`ServerOptions::cors_origins`], `cors.rs`): the answers to allowed
//! origins carry `Access-Control-Allow-Origin`; `OPTIONS` (a browser's
//! preflight) is answered before the key check.
//!
//! With [`ServerOptions::api_keys`] set, every route but `/health` needs
//! one of the keys, and each key's requests reuse only their own cached
//! prompts (`auth.rs`); `cache_salt` (a string) on both generation
//! endpoints narrows that further: different salts never share a prefix.
//!
//! Both generation endpoints take `max_tokens` (or `max_completion_tokens`;
//! absent = until the end of generation or the context is full),
//! `temperature`, `top_p`, `top_k`, `min_p`, `seed` (absent = a fresh
//! random seed per request), `stop` (a string or a list, matched on the
//! decoded text across tokens; the match and what follows are not sent),
//! `repetition_penalty` (or `repeat_penalty`) with `repeat_last_n`, `n`
//! (1 to 16 choices), llama.cpp's `ignore_eos`, `stream` with `stream_options.include_usage`. The defaults are
//! llama.cpp's ([`SamplingParams::default`](baton_gen::SamplingParams)).
//! `presence_penalty` and `frequency_penalty` (in `[-2, 2]`, over the same
//! window of `repeat_last_n` tokens, prompt included, as llama.cpp) are
//! honoured, and so is `logit_bias` (OpenAI's object of token ids to
//! biases in `[-100, 100]`, or llama-server's `[id, bias]` pairs, `false`
//! banning a token; a text in place of an id biases each of its tokens,
//! as llama-server's, `bias_text.rs`), added to the logits before every sampler, greedy and
//! JSON-held decoding included. `logprobs` (chat: `true` with `top_logprobs` 0 to 20;
//! completions: the number of alternatives) sends each generated token's
//! log-probability under the model's log-softmax over the whole vocabulary
//! (before penalties and filters) and its most likely alternatives, in
//! OpenAI's shapes, whole and streamed (`logprobs.rs`); `echo` (completions)
//! sends the prompt first, with its tokens' log-probabilities when asked
//! (one pass over the prompt; `max_tokens: 0` generates nothing).
//! `response_format: {"type": "json_object"}` holds the answer to one JSON
//! object ([`baton_gen::constraint`]); llama-server's forms of a schema
//! (`json_object` with a `schema`, a `json_schema` field) hold it as
//! `{"type": "json_schema"}` does. Any `model` name is served (as
//! llama-server serves its one model); with
//! [`ServerOptions::strict_model_name`] it must be absent or the served
//! model's name (else 404). The body is read as JSON whatever its
//! `Content-Type`; unknown fields are ignored; a known field of the wrong
//! type is a 400.
//!
//! `--parallel` requests run at once; more wait in a queue of at most
//! `--queue` entries, and a request beyond that gets 429. A request body
//! over [`ServerOptions::body_limit`] gets 413, one slower than
//! [`ServerOptions::body_timeout`] 408; connections are bounded in number
//! and in how long they may take to send a request head ([`listen`]). A client that disconnects
//! (mid-stream, or while it waits for a whole answer) frees its sequence
//! before the engine's next step.

mod answer;
pub mod anthropic;
pub mod auth;
mod bias_text;
mod body;
pub mod chat_prompt;
pub mod cors;
mod defaults;
pub mod embeddings;
mod error;
mod events;
mod gemma4_calls;
mod generate;
mod harmony_calls;
mod history;
pub mod listen;
mod llama;
mod metrics;
mod native;
mod options;
mod params;
mod reply;
pub mod responses;
mod routes;
mod serve_error;
mod state;
pub mod tools;
pub mod types;
mod xml_calls;

use std::future::Future;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::middleware;
use axum::routing::{get, post};
use axum::Router;
use baton_gen::ChatTemplate;
use tokio::net::TcpListener;

pub use auth::{ApiKeyError, ApiKeys};
pub use cors::{CorsError, CorsOrigins};
pub use defaults::RequestDefaults;
pub use error::{ApiError, ErrorBody};
pub use options::{ReasoningFormat, ServerOptions};
pub use serve_error::ServeError;

use crate::engine::Engine;

/// The server's routes over `engine`.
pub fn router(engine: Engine, options: &ServerOptions) -> Result<Router, ServeError> {
    let source = options.chat_template.as_deref().or(engine.info().chat_template.as_deref());
    let template =
        ChatTemplate::for_tokenizer(source, engine.tokenizer())?.with_variables(&options.chat_template_kwargs);
    let dim = engine.info().dim;
    let prompter = chat_prompt::Prompter::new(Arc::new(template), &engine);
    let state = state::AppState {
        engine,
        prompter,
        started: state::unix_now(),
        requests: Arc::new(AtomicU64::new(0)),
        body_timeout: options.body_timeout,
        pooling: options.pooling,
        embedding_dim: dim,
        scope_seed: Arc::new(std::collections::hash_map::RandomState::new()),
        strict_model_name: options.strict_model_name,
        model_aliases: options.model_aliases.clone().into(),
        model_tags: options.model_tags.clone().into(),
        model_path: options.model_path.clone(),
        reasoning_format: options.reasoning_format,
        defaults: options.defaults,
    };
    let keys = Arc::new(options.api_keys.clone());
    Ok(Router::new()
        .route("/health", get(routes::health))
        .route("/metrics", get(metrics::metrics))
        .route("/v1/models", get(routes::models))
        .route("/v1/chat/completions", post(routes::chat))
        .route("/v1/completions", post(routes::completion))
        .route("/v1/embeddings", post(embeddings::embeddings))
        .route("/v1/chat/completions/input_tokens", post(routes::chat_input_tokens))
        .route("/v1/messages", post(anthropic::messages))
        .route("/v1/messages/count_tokens", post(anthropic::count_tokens))
        .route("/v1/responses", post(responses::responses))
        // The same routes without `/v1`, as llama-server serves them.
        .route("/models", get(routes::models))
        .route("/chat/completions", post(routes::chat))
        .route("/chat/completions/input_tokens", post(routes::chat_input_tokens))
        .route("/embeddings", post(embeddings::embeddings))
        .route("/responses", post(responses::responses))
        // llama-server's own.
        // `/completions` without `/v1` is llama-server's native route too,
        // as llama-server serves it.
        .route("/completion", post(native::completion))
        .route("/completions", post(native::completion))
        .route("/tokenize", post(llama::tokenize))
        .route("/detokenize", post(llama::detokenize))
        .route("/apply-template", post(llama::apply_template))
        .route("/props", get(llama::props))
        .route("/slots", if options.slots_endpoint { get(llama::slots) } else { get(llama::slots_off) })
        .fallback(routes::not_found)
        .layer(DefaultBodyLimit::max(options.body_limit))
        // Outermost: a request without a key is answered before its body
        // is read.
        .layer(middleware::from_fn_with_state(keys, auth::require_key))
        // Outside the key check: a preflight needs no key, and a 401 gets
        // the CORS headers a page needs to read it.
        .layer(middleware::from_fn_with_state(Arc::new(options.cors_origins.clone()), cors::cors))
        .with_state(state))
}

/// Serves `engine` on `listeners` (one or several: each connection
/// waiting on any of them is taken) until `shutdown` completes (or the engine
/// fails for good: [`ServeError::EngineFailed`]); then stops accepting
/// connections, lets the requests in flight finish for at most
/// [`ServerOptions::drain`], cancels those still running (their streams end
/// with an error event), stops the engine and returns. Every wait of that
/// shutdown has a bound (see [`listen`]).
pub async fn serve(
    listeners: impl IntoIterator<Item = TcpListener>,
    engine: Engine,
    options: ServerOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let app = router(engine.clone(), &options)?;
    let listeners: Vec<TcpListener> = listeners.into_iter().collect();
    if listeners.is_empty() {
        return Err(ServeError::Io(std::io::Error::new(std::io::ErrorKind::InvalidInput, "no address to listen on")));
    }
    listen::run(listeners, app, engine, options, shutdown).await
}
