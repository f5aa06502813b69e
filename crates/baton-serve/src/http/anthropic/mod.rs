//! Anthropic's Messages API: `POST /v1/messages` and
//! `POST /v1/messages/count_tokens`, served through the chat completions'
//! path (the same template, tools and decoding), in Anthropic's request,
//! answer, event and error shapes.
//!
//! Served: `system` (a string or text blocks), `messages` whose content is
//! a string or `text`, `tool_use` and `tool_result` blocks (`thinking`
//! blocks of earlier answers are skipped), `max_tokens` (required),
//! `stop_sequences`, `temperature`, `top_p`, `top_k`, `stream`, client
//! `tools` (`input_schema`) and `tool_choice` (`auto`, `any`, `tool`,
//! `none`); `metadata` and other fields are ignored. Other block types
//! (images, documents) and server tools are refused (400).

mod answer;
mod request;

use axum::extract::{FromRequest, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::de::DeserializeOwned;
use serde_json::json;

pub use request::{MessagesError, MessagesRequest};

use super::auth::Caller;
use super::body::JsonBody;
use super::error::ApiError;
use super::state::AppState;

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
        super::reply::named_event("error", &self.body())
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

/// A JSON body whose errors are Anthropic's.
pub struct Body<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for Body<T> {
    type Rejection = AnthropicError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, AnthropicError> {
        let JsonBody(value) = JsonBody::<T>::from_request(request, state).await?;
        Ok(Body(value))
    }
}

/// `POST /v1/messages`.
pub async fn messages(
    State(state): State<AppState>,
    caller: Caller,
    Body(request): Body<MessagesRequest>,
) -> Result<Response, AnthropicError> {
    if request.max_tokens.is_none() {
        return Err(MessagesError::MissingMaxTokens.into());
    }
    let conversation = request.conversation()?;
    let prompt = state.conversation_prompt(conversation, None).await?;
    let job = state.chat_job(prompt, &request.params(), &caller).await?;
    let generation = state.engine.submit(job.request.clone())?;
    let stream = job.stream;
    let answering = answer::Answering {
        tokenizer: state.engine.tokenizer().clone(),
        job,
        id: state.next_id("msg"),
        model: state.engine.info().name.clone(),
    };
    Ok(match stream {
        true => answer::streamed(generation, answering),
        false => answer::whole(generation, answering).await,
    })
}

/// `POST /v1/messages/count_tokens`: `{"input_tokens"}`, the prompt that
/// `/v1/messages` would run (tools included).
pub async fn count_tokens(
    State(state): State<AppState>,
    Body(request): Body<MessagesRequest>,
) -> Result<Json<serde_json::Value>, AnthropicError> {
    let conversation = request.conversation()?;
    let prompt = state.conversation_prompt(conversation, None).await?;
    Ok(Json(json!({"input_tokens": prompt.tokens.len()})))
}
