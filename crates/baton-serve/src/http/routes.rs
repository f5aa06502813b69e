//! The endpoints.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::Json;
use baton_llama::{ChatTemplate, EncodeOptions, Message};
use serde_json::json;

use super::answer::{self, Kind, Meta};
use super::body::JsonBody;
use super::error::ApiError;
use super::params::Job;
use super::types::{ChatMessage, ChatRequest, CompletionRequest, Content, ModelEntry, Prompt};
use crate::engine::Engine;

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    pub(super) engine: Engine,
    pub(super) template: Arc<ChatTemplate>,
    /// Unix seconds when the server started.
    pub(super) started: u64,
    pub(super) requests: Arc<AtomicU64>,
}

/// Unix seconds now.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl AppState {
    fn meta(&self, kind: Kind) -> Meta {
        let n = self.requests.fetch_add(1, Ordering::Relaxed);
        let prefix = match kind {
            Kind::Chat => "chatcmpl",
            Kind::Completion => "cmpl",
        };
        Meta {
            kind,
            id: format!("{prefix}-{:x}-{n}", self.started),
            created: unix_now(),
            model: self.engine.info().name.clone(),
        }
    }

    /// Submits the job and answers, streamed or whole.
    async fn run(&self, job: Job, kind: Kind) -> Result<Response, ApiError> {
        let generation = self.engine.submit(job.request.clone())?;
        let tokenizer = self.engine.tokenizer().clone();
        let meta = self.meta(kind);
        Ok(if job.stream {
            answer::streamed(generation, tokenizer, job, meta)
        } else {
            answer::whole(generation, tokenizer, job, meta).await
        })
    }
}

/// `GET /health`.
pub async fn health(State(state): State<AppState>) -> Json<serde_json::Value> {
    let stats = state.engine.stats();
    Json(json!({ "status": "ok", "running": stats.running, "queued": stats.queued }))
}

/// `GET /v1/models`.
pub async fn models(State(state): State<AppState>) -> Json<serde_json::Value> {
    let entry =
        ModelEntry { id: state.engine.info().name.clone(), object: "model", created: state.started, owned_by: "baton" };
    Json(json!({ "object": "list", "data": [entry] }))
}

/// Any other path.
pub async fn not_found() -> ApiError {
    ApiError::with_status(StatusCode::NOT_FOUND, "no such endpoint")
}

/// `POST /v1/chat/completions`: the messages rendered with the model's chat
/// template and the generation prompt, tokenized as `baton run --chat` does.
pub async fn chat(
    State(state): State<AppState>,
    JsonBody(request): JsonBody<ChatRequest>,
) -> Result<Response, ApiError> {
    if request.messages.is_empty() {
        return Err(ApiError::invalid_param("messages", "messages is empty"));
    }
    let messages = request.messages.iter().map(message).collect::<Result<Vec<_>, _>>()?;
    let text =
        state.template.render(&messages, true).map_err(|e| ApiError::invalid_param("messages", e.to_string()))?;
    let tokenizer = state.engine.tokenizer();
    // As baton_llama::Conversation::tokens: the rendered text with its
    // special tokens parsed, and BOS in front when the model adds one and
    // the template did not write it.
    let mut prompt = tokenizer
        .encode(&text, EncodeOptions { add_special: false, parse_special: true })
        .map_err(|e| ApiError::invalid_param("messages", format!("tokenizing the conversation: {e}")))?;
    if let Some(bos) = tokenizer.bos_id().filter(|_| tokenizer.adds_bos()) {
        if prompt.first() != Some(&bos) {
            prompt.insert(0, bos);
        }
    }
    let job = Job::new(&request.params, prompt, state.engine.info())?;
    state.run(job, Kind::Chat).await
}

fn message(m: &ChatMessage) -> Result<Message, ApiError> {
    let content = match &m.content {
        None => String::new(),
        Some(Content::Text(text)) => text.clone(),
        Some(Content::Parts(parts)) => {
            let mut text = String::new();
            for part in parts {
                match (part.kind.as_str(), &part.text) {
                    ("text", Some(t)) => text.push_str(t),
                    (kind, _) => {
                        return Err(ApiError::invalid_param(
                            "messages",
                            format!("content parts of type `{kind}` are not served (only `text` with its text)"),
                        ))
                    }
                }
            }
            text
        }
    };
    Ok(Message::new(m.role.clone(), content))
}

/// `POST /v1/completions`: the prompt tokenized as `baton run -p` does
/// (BOS added when the model adds one, special tokens parsed).
pub async fn completion(
    State(state): State<AppState>,
    JsonBody(request): JsonBody<CompletionRequest>,
) -> Result<Response, ApiError> {
    if request.echo {
        return Err(ApiError::invalid_param("echo", "echo is not served"));
    }
    let tokenizer = state.engine.tokenizer();
    let encode = |text: &str| {
        tokenizer
            .encode(text, EncodeOptions { add_special: true, parse_special: true })
            .map_err(|e| ApiError::invalid_param("prompt", format!("tokenizing the prompt: {e}")))
    };
    let prompt = match &request.prompt {
        Prompt::Text(text) => encode(text)?,
        Prompt::Texts(texts) if texts.len() == 1 => encode(&texts[0])?,
        Prompt::Texts(texts) => {
            return Err(ApiError::invalid_param(
                "prompt",
                format!("{} prompts given: one prompt per request is served", texts.len()),
            ))
        }
        Prompt::Tokens(ids) => ids.clone(),
    };
    let job = Job::new(&request.params, prompt, state.engine.info())?;
    state.run(job, Kind::Completion).await
}
