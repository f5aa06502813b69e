//! Accepting connections: at most [`ServerOptions::max_connections`] at
//! once, each one HTTP/1.1 connection of hyper with a header-read timer,
//! and a shutdown in which every wait has a bound.
//!
//! Why not `axum::serve`: it sets no timer, so a client that sends half of
//! its headers holds its connection (and a file descriptor) forever, and a
//! graceful shutdown waits for that connection forever. Here:
//!
//! - hyper's header-read timeout ([`ServerOptions::header_timeout`]) closes a
//!   connection whose request head has not fully arrived in time. hyper
//!   starts that timer whenever the connection waits for a request head, so
//!   it is the idle timeout of a kept-alive connection as well.
//! - The body has [`ServerOptions::body_timeout`] to arrive (in
//!   [`super::body`]); a slower one gets 408.
//! - A connection past [`ServerOptions::max_connections`] waits in the
//!   kernel's backlog until one closes (so the server's own descriptors are
//!   bounded), and the header timeout bounds how long any connection keeps
//!   its place.
//! - Several listeners (llama-server's `--host 127.0.0.1,::1`) are served
//!   as one: each accept takes the next connection waiting on any of them,
//!   the listener looked at first turning round so none is starved.
//! - On shutdown the listeners close, idle connections close at once and
//!   busy ones after their response; after [`ServerOptions::drain`] the
//!   engine cancels what still runs (streams end with an error event), and
//!   [`CLOSE_GRACE`] later every connection left is dropped.

use std::future::Future;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

use super::options::ServerOptions;
use super::serve_error::ServeError;
use crate::engine::{Engine, EngineState, Shutdown};

/// After the drain time, how long connections get to send the error event
/// of their cancelled generation before they are dropped.
pub const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// How long the engine's thread gets to end after the server stopped (it
/// ends within one step once cancelled).
const ENGINE_STOP_BOUND: Duration = Duration::from_secs(30);

/// How often the accept loop looks at the engine's state.
const ENGINE_POLL: Duration = Duration::from_millis(100);

/// Why the accept loop ended.
enum Ended {
    /// The shutdown signal came.
    Signal,
    /// The engine stopped for good; the text says why.
    EngineFailed(String),
}

/// Accepts connections on `listeners` and serves `app` on each until
/// `shutdown` completes or the engine fails, then shuts down within bounds
/// (module docs).
pub async fn run(
    listeners: Vec<TcpListener>,
    app: Router,
    engine: Engine,
    options: ServerOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let permits = Arc::new(Semaphore::new(options.max_connections.max(1)));
    let (stopping, stop_seen) = watch::channel(false);
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    let watch_engine = options.stop_when_the_engine_fails;
    let mut first = 0;
    let ended = loop {
        let permit = tokio::select! {
            biased;
            () = &mut shutdown => break Ended::Signal,
            why = engine_failure(&engine), if watch_engine => break Ended::EngineFailed(why),
            permit = permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break Ended::Signal,
            },
        };
        let stream = tokio::select! {
            biased;
            () = &mut shutdown => break Ended::Signal,
            why = engine_failure(&engine), if watch_engine => break Ended::EngineFailed(why),
            accepted = accept_any(&listeners, &mut first) => match accepted {
                Ok(stream) => stream,
                Err(e) => {
                    // Out of descriptors or a connection reset before it
                    // was taken: wait a moment rather than spin.
                    tracing::warn!("accepting a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // Finished connections' results are of no interest: reap them so the
        // set holds only live ones.
        while connections.try_join_next().is_some() {}
        let service = TowerToHyperService::new(app.clone());
        let mut stop_seen = stop_seen.clone();
        let header_timeout = options.header_timeout;
        connections.spawn(async move {
            let _permit = permit;
            let mut builder = hyper::server::conn::http1::Builder::new();
            // Header names go out in Title-Case, as llama-server's do: names
            // are case-insensitive, but clients that copy them into a plain
            // map (llama-server's own test helpers) look them up by case.
            builder.timer(TokioTimer::new()).header_read_timeout(header_timeout).title_case_headers(true);
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => return,
                _ = stop_seen.wait_for(|stop| *stop) => {}
            }
            // Idle: closes now; busy: after the response in progress.
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        });
    };
    drop(listeners);
    let _ = stopping.send(true);
    finish(connections, &engine, options.drain).await;
    match ended {
        Ended::Signal => Ok(()),
        Ended::EngineFailed(why) => Err(ServeError::EngineFailed(why)),
    }
}

/// The next connection waiting on any of `listeners`, looked at from
/// `*first` on, which moves past the one that gave it (so a busy listener
/// does not starve the others). Pending forever when there are none.
async fn accept_any(listeners: &[TcpListener], first: &mut usize) -> std::io::Result<TcpStream> {
    std::future::poll_fn(|cx| {
        let n = listeners.len();
        for i in 0..n {
            let at = (*first + i) % n;
            if let Poll::Ready(accepted) = listeners[at].poll_accept(cx) {
                *first = (at + 1) % n;
                return Poll::Ready(accepted.map(|(stream, _)| stream));
            }
        }
        Poll::Pending
    })
    .await
}

/// Completes when the engine has stopped for good, with its cause.
async fn engine_failure(engine: &Engine) -> String {
    loop {
        if let EngineState::Failed(why) = engine.state() {
            return why;
        }
        tokio::time::sleep(ENGINE_POLL).await;
    }
}

/// Completes when every connection has closed.
async fn all_closed(connections: &mut JoinSet<()>) {
    while connections.join_next().await.is_some() {}
}

/// The bounded end: connections may finish for `drain`; then the engine
/// cancels what still runs and connections get [`CLOSE_GRACE`] to send
/// their last event; the rest are dropped; the engine's thread gets
/// [`ENGINE_STOP_BOUND`] to end.
async fn finish(mut connections: JoinSet<()>, engine: &Engine, drain: Duration) {
    if tokio::time::timeout(drain, all_closed(&mut connections)).await.is_err() {
        tracing::info!("requests still running after the drain time: cancelling them");
        let cancel = engine.clone();
        let cancelled = tokio::task::spawn_blocking(move || cancel.shutdown(Shutdown::Cancel));
        let _ = tokio::time::timeout(ENGINE_STOP_BOUND, cancelled).await;
        if tokio::time::timeout(CLOSE_GRACE, all_closed(&mut connections)).await.is_err() {
            tracing::info!("{} connections still open: closing them", connections.len());
            connections.shutdown().await;
        }
    }
    let stop = engine.clone();
    let stopped = tokio::task::spawn_blocking(move || stop.shutdown(Shutdown::Drain));
    if tokio::time::timeout(ENGINE_STOP_BOUND, stopped).await.is_err() {
        tracing::error!("the engine's thread did not end within {ENGINE_STOP_BOUND:?}");
    }
}
