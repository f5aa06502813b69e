//! Errors as the OpenAI API writes them:
//! `{"error": {"message", "type", "param", "code"}}` with a 4xx or 5xx status.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;

use crate::engine::SubmitError;

/// An error answer: its status and the JSON error object.
#[derive(Debug)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The body's `error` object.
    pub body: ErrorBody,
}

/// The `error` object.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorBody {
    /// What went wrong, for a person.
    pub message: String,
    /// `invalid_request_error`, `server_error`…
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The request field at fault, if one is.
    pub param: Option<&'static str>,
    /// A machine-readable code, if one applies.
    pub code: Option<&'static str>,
    /// Of a prompt that does not fit the context: its tokens
    /// (llama-server's `n_prompt_tokens`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n_prompt_tokens: Option<usize>,
    /// And the context of a sequence (llama-server's `n_ctx`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n_ctx: Option<usize>,
}

/// The whole error document.
#[derive(Serialize)]
struct Envelope<'a> {
    error: &'a ErrorBody,
}

impl ApiError {
    fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            body: ErrorBody {
                message: message.into(),
                kind,
                param: None,
                code: None,
                n_prompt_tokens: None,
                n_ctx: None,
            },
        }
    }

    /// An error of the request with `status` (4xx) or of the server (5xx).
    pub fn with_status(status: StatusCode, message: impl Into<String>) -> ApiError {
        let kind = if status.is_server_error() { "server_error" } else { "invalid_request_error" };
        Self::new(status, kind, message)
    }

    /// 400: the request is wrong.
    pub fn invalid(message: impl Into<String>) -> ApiError {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request_error", message)
    }

    /// 400 about the field `param`.
    pub fn invalid_param(param: &'static str, message: impl Into<String>) -> ApiError {
        Self::invalid(message).with_param(param)
    }

    /// 404: no such model.
    pub fn model_not_found(asked: &str, served: &str) -> ApiError {
        let message = format!("the model `{asked}` does not exist; this server serves `{served}`");
        let mut e = Self::new(StatusCode::NOT_FOUND, "invalid_request_error", message).with_param("model");
        e.body.code = Some("model_not_found");
        e
    }

    /// 401: the request presents no API key, or a wrong one (answered
    /// with `WWW-Authenticate: Bearer`). Its type is
    /// `authentication_error`, as llama-server's (and Anthropic's); OpenAI
    /// writes `invalid_request_error`, and its clients tell a 401 by the
    /// status and the `invalid_api_key` code, both kept.
    pub fn unauthorized(message: impl Into<String>) -> ApiError {
        let mut e = Self::new(StatusCode::UNAUTHORIZED, "authentication_error", message);
        e.body.code = Some("invalid_api_key");
        e
    }

    /// 500: the server failed.
    pub fn server(message: impl Into<String>) -> ApiError {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", message)
    }

    fn with_param(mut self, param: &'static str) -> ApiError {
        self.body.param = Some(param);
        self
    }

    /// The JSON text of the error document (an SSE event's data).
    pub fn json(&self) -> String {
        serde_json::to_string(&Envelope { error: &self.body }).unwrap_or_else(|_| "{}".into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(Envelope { error: &self.body })).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            // RFC 9110: a 401 names the scheme that would be accepted.
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

impl From<SubmitError> for ApiError {
    fn from(e: SubmitError) -> ApiError {
        let message = e.to_string();
        match e {
            SubmitError::QueueFull { .. } => {
                let mut e = Self::new(StatusCode::TOO_MANY_REQUESTS, "rate_limit_error", message);
                e.body.code = Some("queue_full");
                e
            }
            SubmitError::ShuttingDown | SubmitError::EngineFailed(_) | SubmitError::NoLentSlot { .. } => {
                Self::new(StatusCode::SERVICE_UNAVAILABLE, "server_error", message)
            }
            SubmitError::PromptTooLong { prompt, context }
            | SubmitError::ExceedsContext { prompt, context, .. }
            | SubmitError::TextTooLong { tokens: prompt, context } => {
                // llama-server's type and counts; OpenAI's code.
                let mut e = Self::new(StatusCode::BAD_REQUEST, "exceed_context_size_error", message);
                e.body.code = Some("context_length_exceeded");
                (e.body.n_prompt_tokens, e.body.n_ctx) = (Some(prompt), Some(context));
                e
            }
            SubmitError::ZeroMaxTokens => Self::invalid_param("max_tokens", message),
            SubmitError::TooManyLogprobs { .. } => Self::invalid_param("top_logprobs", message),
            SubmitError::EmptyPrompt | SubmitError::BadToken { .. } => Self::invalid_param("prompt", message),
            SubmitError::Sampling(_) => Self::invalid(message),
            SubmitError::Grammar(_) => Self::invalid_param("response_format", message),
            SubmitError::NoMtpHead => Self::invalid_param("speculative.type", message),
        }
    }
}
