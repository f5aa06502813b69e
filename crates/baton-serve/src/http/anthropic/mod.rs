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
//! (images, documents) and server tools are refused (400). A reasoning
//! model's thinking (split as `reasoning_content` is on chat, by
//! `--reasoning-format`) comes back as a `thinking` block before the text.

mod answer;
pub(super) mod error;
mod request;

use axum::extract::{FromRequest, Request, State};
use axum::response::Response;
use axum::Json;
use serde::de::DeserializeOwned;
use serde_json::json;

pub use error::AnthropicError;
pub use request::{MessagesError, MessagesRequest};

use super::auth::Caller;
use super::body::JsonBody;
use super::state::AppState;

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
    let conversation = request.conversation(state.history_form())?;
    let prompt = state.conversation_prompt(conversation, None).await?;
    let mut job = state.chat_job(prompt, &request.params(), &caller).await?;
    job.reasoning = state.reasoning_of(&job);
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
    let conversation = request.conversation(state.history_form())?;
    let prompt = state.conversation_prompt(conversation, None).await?;
    Ok(Json(json!({"input_tokens": prompt.tokens.len()})))
}
