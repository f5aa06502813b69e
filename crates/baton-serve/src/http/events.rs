//! Answers of server-sent events: a response whose body is a stream of
//! events, filled by a task of its own, and the named events of the
//! Anthropic and Responses APIs.

use std::convert::Infallible;
use std::future::Future;

use axum::body::Body;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use tokio::sync::mpsc;

/// A response of server-sent events from `events`.
pub fn event_stream(events: impl futures_util::Stream<Item = Result<String, Infallible>> + Send + 'static) -> Response {
    ([(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")], Body::from_stream(events))
        .into_response()
}

/// An event stream that `fill` writes into (each string one whole event)
/// from a task of its own; when the client goes away, the future `fill`
/// is given (the channel's closing) completes.
pub fn spawn_stream<F>(fill: impl FnOnce(mpsc::UnboundedSender<String>) -> F) -> Response
where
    F: Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = mpsc::unbounded_channel::<String>();
    tokio::spawn(fill(tx));
    event_stream(stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|e| (Ok::<_, Infallible>(e), rx)) }))
}

/// One named server-sent event: `event: NAME` and its JSON data.
pub fn named_event(name: &str, data: &serde_json::Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}
