//! Errors in Anthropic's shape, and which routes answer with them.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use crate::http::error::ApiError;
use crate::http::events::named_event;

/// Whether `path` is one of this API's routes (whose errors, the key
/// check's included, are written in its shape).
pub fn is_anthropic_path(path: &str) -> bool {
    path == "/v1/messages" || path.starts_with("/v1/messages/")
}

/// An error in Anthropic's shape: `{"type": "error", "error": {"type",
/// "message"}}`, with the status of the error it wraps.
#[derive(Debug)]
pub struct AnthropicError(pub ApiError);

impl AnthropicError {
    /// Anthropic's name of the error's kind, by its status.
    fn kind(&self) -> &'static str {
        match self.0.status {
            StatusCode::UNAUTHORIZED => "authentication_error",
            StatusCode::FORBIDDEN => "permission_error",
            StatusCode::NOT_FOUND => "not_found_error",
            StatusCode::PAYLOAD_TOO_LARGE => "request_too_large",
            StatusCode::TOO_MANY_REQUESTS => "rate_limit_error",
            StatusCode::SERVICE_UNAVAILABLE => "overloaded_error",
            status if status.is_server_error() => "api_error",
            _ => "invalid_request_error",
        }
    }

    fn body(&self) -> serde_json::Value {
        json!({"type": "error", "error": {"type": self.kind(), "message": self.0.body.message}})
    }

    /// The error as a stream's `error` event.
    pub fn event(&self) -> String {
        named_event("error", &self.body())
    }
}

impl<E: Into<ApiError>> From<E> for AnthropicError {
    fn from(e: E) -> AnthropicError {
        AnthropicError(e.into())
    }
}

impl IntoResponse for AnthropicError {
    fn into_response(self) -> Response {
        let body = Json(self.body()).into_response().into_body();
        let mut response = self.0.into_response();
        *response.body_mut() = body;
        response
    }
}
