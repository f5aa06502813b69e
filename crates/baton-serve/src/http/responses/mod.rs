//! OpenAI's Responses API: `POST /v1/responses` (and `/responses`, as
//! llama-server serves it), served through the chat
//! completions' path (the same template, tools, formats and decoding), in
//! the Responses request, answer, event and error shapes.
//!
//! Served: `input` as a string or a list of items (messages with string
//! or `input_text` content, `function_call` and `function_call_output`
//! items; `reasoning` items are skipped), `instructions`,
//! `max_output_tokens`, `temperature`, `top_p`, function `tools` and
//! `tool_choice`, `text.format` (`text`, `json_object`, `json_schema`),
//! `stream`, and llama-server's `timings_per_token` and `return_progress`
//! on a stream (see `answer.rs`). A reasoning model's thinking (split as `reasoning_content`
//! is on chat, by `--reasoning-format`) comes back as a `reasoning` output
//! item before the message. Nothing is stored: `previous_response_id` and `store: true`
//! are refused (400), and there is no `GET /v1/responses/{id}`.

mod answer;
mod request;

use axum::extract::State;
use axum::response::Response;
use serde_json::Value;

pub use request::{ResponsesError, ResponsesRequest};

use super::auth::Caller;
use super::body::JsonBody;
use super::error::ApiError;
use super::state::{unix_now, AppState};

/// `POST /v1/responses`, and `/responses`.
pub async fn responses(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(request): JsonBody<ResponsesRequest>,
) -> Result<Response, ApiError> {
    let (conversation, params) = request.conversation(state.history_form())?;
    let prompt = state.conversation_prompt(conversation, params.response_format.as_ref()).await.map_err(|e| {
        match e.body.param {
            // The field is `text.format` here.
            Some("response_format") => ApiError::invalid_param(
                "text",
                "a text.format besides text cannot hold an answer that may call a tool (tool_choice: \"none\" leaves the tools out)",
            ),
            _ => e,
        }
    })?;
    let mut job = state.chat_job(prompt, &params, &caller).await.map_err(|mut e| {
        // A schema that cannot be held is `text.format`'s here.
        if e.body.param == Some("response_format") {
            e.body.param = Some("text");
        }
        e
    })?;
    job.reasoning = state.reasoning_of(&job);
    let generation = state.engine.submit(job.request.clone())?;
    let stream = job.stream;
    let mut echoed = serde_json::Map::new();
    echoed.insert("instructions".into(), request.instructions.clone().map_or(Value::Null, Value::from));
    echoed.insert("max_output_tokens".into(), request.max_output_tokens.map_or(Value::Null, Value::from));
    echoed.insert("temperature".into(), request.common.temperature.map_or(Value::Null, Value::from));
    echoed.insert("top_p".into(), request.common.top_p.map_or(Value::Null, Value::from));
    echoed.insert("tools".into(), request.tools.clone().unwrap_or(Value::Null));
    echoed.insert("tool_choice".into(), request.tool_choice.clone().unwrap_or(Value::Null));
    echoed.insert("text".into(), request.text.clone().unwrap_or(Value::Null));
    let answering = answer::Answering {
        tokenizer: state.engine.tokenizer().clone(),
        job,
        id: state.next_id("resp"),
        created_at: unix_now(),
        model: state.engine.info().name.clone(),
        echoed,
    };
    Ok(match stream {
        true => answer::streamed(generation, answering),
        false => answer::whole(generation, answering).await,
    })
}
