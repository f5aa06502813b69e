//! The OpenAI-compatible HTTP server (axum on tokio).
//!
//! Endpoints:
//!
//! - `POST /v1/chat/completions`: `messages` rendered with the model's chat
//!   template (ChatML when the file has none) and the generation prompt,
//!   as `baton run --chat` renders them.
//! - `POST /v1/completions`: `prompt` is a string, a list of one string, or
//!   a list of token ids.
//! - `GET /v1/models`: the one served model.
//! - `GET /health`: `{"status": "ok", "running", "queued"}`.
//!
//! Both generation endpoints take `max_tokens` (or `max_completion_tokens`;
//! absent = until the end of generation or the context is full),
//! `temperature`, `top_p`, `top_k`, `min_p`, `seed` (absent = a fresh
//! random seed per request), `stop` (a string or a list, matched on the
//! decoded text across tokens; the match and what follows are not sent),
//! `repetition_penalty` (or `repeat_penalty`) with `repeat_last_n`, `n`
//! (only 1), llama.cpp's `ignore_eos`, `stream` with `stream_options.include_usage`. The defaults are
//! llama.cpp's ([`SamplingParams::default`](baton_llama::SamplingParams)).
//! `presence_penalty` and `frequency_penalty` other than 0 are refused
//! (400), as are `logprobs` and `echo`. `model` must be absent or the
//! served model's name (else 404). The body is read as JSON whatever its
//! `Content-Type`; unknown fields are ignored; a known field of the wrong
//! type is a 400.
//!
//! `--parallel` requests run at once; more wait in a queue of at most
//! `--queue` entries, and a request beyond that gets 429. A request body
//! over [`ServerOptions::body_limit`] gets 413. A client that disconnects
//! mid-stream frees its sequence at once.

mod answer;
mod body;
mod error;
mod generate;
mod params;
mod routes;
mod stop;
pub mod types;

use std::future::{Future, IntoFuture};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;
use baton_llama::{ChatError, ChatTemplate};
use tokio::net::TcpListener;

pub use error::{ApiError, ErrorBody};
pub use stop::{Released, StopMatcher};

use crate::engine::{Engine, Shutdown};

/// How the server behaves.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// Largest request body in bytes; a larger one gets 413.
    pub body_limit: usize,
    /// After the shutdown signal, how long requests in flight may run on
    /// before they are cancelled.
    pub drain: Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions { body_limit: 1 << 20, drain: Duration::from_secs(10) }
    }
}

/// Why the server could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The model's chat template does not compile.
    #[error("the model's chat template: {0}")]
    Template(#[from] ChatError),
    /// The listener failed.
    #[error("serving: {0}")]
    Io(#[from] std::io::Error),
}

/// The server's routes over `engine`.
pub fn router(engine: Engine, options: &ServerOptions) -> Result<Router, ServeError> {
    let template = ChatTemplate::for_tokenizer(engine.info().chat_template.as_deref(), engine.tokenizer())?;
    let state = routes::AppState {
        engine,
        template: Arc::new(template),
        started: routes::unix_now(),
        requests: Arc::new(AtomicU64::new(0)),
    };
    Ok(Router::new()
        .route("/health", get(routes::health))
        .route("/v1/models", get(routes::models))
        .route("/v1/chat/completions", post(routes::chat))
        .route("/v1/completions", post(routes::completion))
        .fallback(routes::not_found)
        .layer(DefaultBodyLimit::max(options.body_limit))
        .with_state(state))
}

/// Serves `engine` on `listener` until `shutdown` completes; then stops
/// accepting connections, lets the requests in flight finish for at most
/// [`ServerOptions::drain`], cancels those still running (their streams end
/// with an error event), stops the engine and returns.
pub async fn serve(
    listener: TcpListener,
    engine: Engine,
    options: ServerOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let app = router(engine.clone(), &options)?;
    let (began, begin) = tokio::sync::oneshot::channel::<()>();
    let graceful = async move {
        shutdown.await;
        let _ = began.send(());
    };
    let server = axum::serve(listener, app).with_graceful_shutdown(graceful).into_future();
    let mut server = tokio::spawn(server);
    let joined = |r: Result<std::io::Result<()>, tokio::task::JoinError>| match r {
        Ok(r) => r.map_err(ServeError::from),
        Err(e) => Err(ServeError::Io(std::io::Error::other(e))),
    };
    tokio::select! {
        biased;
        r = &mut server => return joined(r),
        _ = begin => {}
    }
    let result = match tokio::time::timeout(options.drain, &mut server).await {
        Ok(r) => joined(r),
        Err(_) => {
            tracing::info!("requests still running after the drain time: cancelling them");
            let cancel = engine.clone();
            let _ = tokio::task::spawn_blocking(move || cancel.shutdown(Shutdown::Cancel)).await;
            joined(server.await)
        }
    };
    let _ = tokio::task::spawn_blocking(move || engine.shutdown(Shutdown::Drain)).await;
    result
}
