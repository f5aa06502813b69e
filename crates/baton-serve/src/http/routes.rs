//! The endpoints.

use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use baton_gen::Message;
use baton_model::EncodeOptions;
use serde_json::json;

use super::answer::{self, Answering, Echo, Kind, Meta};
use super::auth::{self, Caller};
use super::bias_text;
use super::body::JsonBody;
use super::chat_prompt::{ChatPrompt, Ending, PromptInput};
use super::error::ApiError;
use super::history::HistoryForm;
use super::options::ReasoningFormat;
use super::params::{check_model, Job};
use super::state::{unix_now, AppState};
use super::types::{ChatRequest, CompletionRequest, ModelEntry, Params, Prompt};
use crate::engine::EngineState;
use baton_gen::openai::reasoning::ReasoningSplit;
use serde_json::Value;

/// A conversation in chat completions' terms, as the Anthropic Messages
/// and Responses requests give it.
#[derive(Debug)]
pub(super) struct Conversation {
    /// The turns as the template takes them, earlier tool calls and their
    /// results in its form (see [`History`](super::history::History)).
    pub messages: Vec<Message>,
    /// The tools as chat completions' `tools`.
    pub tools: Option<Value>,
    /// The choice as chat completions' `tool_choice`.
    pub choice: Option<Value>,
}

impl AppState {
    /// A fresh answer id: `prefix`, the server's start and the request's
    /// number.
    pub(super) fn next_id(&self, prefix: &str) -> String {
        let n = self.requests.fetch_add(1, Ordering::Relaxed);
        format!("{prefix}_{:x}{n:06}", self.started)
    }

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

    /// The checked job of `params` for `prompt`, in the cache scope of its
    /// caller and `cache_salt`. Checking compiles `response_format`'s
    /// schema: off the HTTP threads.
    pub(super) async fn job(&self, params: &Params, prompt: Vec<u32>, caller: &Caller) -> Result<Job, ApiError> {
        check_model(params.model.as_deref(), &self.engine.info().name, &self.model_aliases, self.strict_model_name)?;
        let (mut owned, info) = (self.defaults.sampling(params), self.engine.info().clone());
        if let Some(bias) = owned.logit_bias.as_ref() {
            if let Some(ids) = bias_text::with_texts_as_ids(bias, self.engine.tokenizer())? {
                owned.logit_bias = Some(ids);
            }
        }
        let default_max = self.defaults.max_tokens(params, prompt.len(), info.context);
        let mut job = off_thread("checking the request", move || Job::new(&owned, prompt, &info)).await??;
        job.request.max_tokens = job.request.max_tokens.or(default_max);
        let salt = auth::cache_salt(params.cache_salt.as_ref())?;
        job.request.cache_scope = caller.cache_scope(&self.scope_seed, salt)?;
        Ok(job)
    }

    /// Submits the job and answers, streamed or whole.
    async fn run(&self, job: Job, kind: Kind) -> Result<Response, ApiError> {
        self.run_echoed(job, kind, None).await
    }

    /// Runs `job`, its answer opening with `echo` when given; with
    /// `max_tokens: 0` the echo alone answers.
    async fn run_echoed(&self, job: Job, kind: Kind, echo: Option<Echo>) -> Result<Response, ApiError> {
        let tokenizer = self.engine.tokenizer().clone();
        if let (Some(echo), Some(0)) = (&echo, job.request.max_tokens) {
            return Ok(answer::echo_only(echo, &tokenizer, &job, &self.meta(kind)));
        }
        let spec = job.spec(self.engine.options().spec);
        let mut generation = self.engine.submit_drafting(job.request.clone(), spec)?;
        let meta = self.meta(kind);
        if job.choices == 1 {
            let stream = job.stream;
            let answering = Answering { generation, tokenizer, job, meta, echo };
            return Ok(if stream { answer::streamed(answering) } else { answer::whole(answering).await });
        }
        // `n` choices: each its own sequence, its seed the next one's
        // (the same seed would draw the same text). The others start once
        // the first has read the prompt, and copy its positions rather
        // than read the prompt again (the prefix cache).
        generation.prompt_read().await;
        let mut generations = vec![generation];
        for i in 1..job.choices {
            let mut request = job.request.clone();
            request.sampling.seed = request.sampling.seed.wrapping_add(i as u64);
            generations.push(self.engine.submit_drafting(request, spec)?);
        }
        let answerings: Vec<Answering> = generations
            .into_iter()
            .map(|generation| Answering {
                generation,
                tokenizer: tokenizer.clone(),
                job: job.clone(),
                meta: meta.clone(),
                echo: echo.clone(),
            })
            .collect();
        Ok(match job.stream {
            true => answer::streamed_choices(answerings),
            false => answer::whole_choices(answerings).await,
        })
    }

    /// The echo of a completion's prompt: its text (`text`, or the tokens
    /// decoded) and, when log-probabilities are asked, its tokens' (one
    /// pass over the prompt on a free slot before the generation).
    async fn echo(&self, job: &Job, text: Option<String>) -> Result<Echo, ApiError> {
        let prompt = &job.request.prompt;
        let text = match text {
            Some(text) => text,
            None => self
                .engine
                .tokenizer()
                .decode_with(prompt, true)
                .map_err(|e| ApiError::invalid_param("prompt", e.to_string()))?,
        };
        let entries = match job.request.logprobs {
            Some(top) => Some(self.engine.score(prompt.clone(), top)?.wait().await.map_err(ApiError::server)?),
            None => None,
        };
        Ok(Echo { text, first: prompt.first().copied().unwrap_or(0), entries })
    }

    /// How earlier calls and their results reach the chat template.
    pub(super) fn history_form(&self) -> HistoryForm {
        self.prompter.history_form()
    }

    /// [`Prompter::input`] off the HTTP threads (the tools' grammar
    /// compiles there).
    pub(super) async fn prompt_input(
        &self,
        messages: Vec<Message>,
        tools: (Option<Value>, Option<Value>, bool),
        response_format: Option<Value>,
    ) -> Result<PromptInput, ApiError> {
        let prompter = self.prompter.clone();
        off_thread("reading the tools", move || prompter.input(messages, tools, response_format.as_ref())).await?
    }

    /// [`Prompter::prompt`] off the HTTP threads: rendering and tokenizing
    /// a long conversation is CPU work, so `/health` and other requests do
    /// not wait on it.
    pub(super) async fn chat_prompt(
        &self,
        messages: Vec<Message>,
        tools: (Option<Value>, Option<Value>, bool),
        response_format: Option<Value>,
        ending: Ending,
        variables: serde_json::Map<String, Value>,
    ) -> Result<ChatPrompt, ApiError> {
        let prompter = self.prompter.clone();
        off_thread("rendering the conversation", move || {
            prompter.prompt(messages, tools, response_format.as_ref(), ending, &variables)
        })
        .await?
    }

    /// [`Prompter::of_request`] off the HTTP threads.
    async fn request_prompt(&self, request: &ChatRequest) -> Result<ChatPrompt, ApiError> {
        let (prompter, request) = (self.prompter.clone(), request.clone());
        off_thread("rendering the conversation", move || prompter.of_request(&request)).await?
    }

    /// [`chat_prompt`](Self::chat_prompt) of a `conversation`, one call
    /// per answer (the Messages and Responses answers carry one).
    pub(super) async fn conversation_prompt(
        &self,
        conversation: Conversation,
        response_format: Option<&Value>,
    ) -> Result<ChatPrompt, ApiError> {
        let Conversation { messages, tools, choice } = conversation;
        let ending = Ending::GenerationPrompt;
        self.chat_prompt(messages, (tools, choice, false), response_format.cloned(), ending, serde_json::Map::new())
            .await
    }

    /// Whether a chat answer of `job` has its thinking split out
    /// (`Some(opened)`, `opened` when the prompt ends inside the
    /// thinking): with `--reasoning-format deepseek`, on an answer not
    /// held whole to a format.
    pub(super) fn reasoning_of(&self, job: &Job) -> Option<bool> {
        if self.reasoning_format == ReasoningFormat::None {
            return None;
        }
        if job.request.format.holds_whole_text() {
            return None;
        }
        let prompt = &job.request.prompt;
        let tail = &prompt[prompt.len().saturating_sub(8)..];
        let text = self.engine.tokenizer().decode_with(tail, true).unwrap_or_default();
        Some(ReasoningSplit::prompt_opens(&text))
    }

    /// The checked job of a conversation's `prompt`, held to its tools'
    /// format when some may be called.
    pub(super) async fn chat_job(&self, prompt: ChatPrompt, params: &Params, caller: &Caller) -> Result<Job, ApiError> {
        let mut job = self.job(params, prompt.tokens, caller).await?;
        if let Some(plan) = prompt.plan {
            if params.grammar.is_some() {
                let why =
                    "a grammar cannot hold an answer that may call a tool (tool_choice: \"none\" leaves the tools out)";
                return Err(ApiError::invalid_param("grammar", why));
            }
            job.request.format = plan.format;
            job.tools = Some(plan.mode);
            job.tool_schemas = std::sync::Arc::new(plan.callable);
        }
        Ok(job)
    }
}

/// `GET /health`: 200 while the engine takes requests, else 503 with why.
pub async fn health(State(state): State<AppState>) -> Response {
    let stats = state.engine.stats();
    let counts =
        json!({ "running": stats.running, "queued": stats.queued, "steps": stats.steps, "panics": stats.panics });
    let (status, mut body) = match state.engine.state() {
        EngineState::Running => (StatusCode::OK, json!({ "status": "ok" })),
        EngineState::ShuttingDown => (StatusCode::SERVICE_UNAVAILABLE, json!({ "status": "shutting down" })),
        EngineState::Failed(why) => (StatusCode::SERVICE_UNAVAILABLE, json!({ "status": "failed", "error": why })),
    };
    if let (Some(body), Some(counts)) = (body.as_object_mut(), counts.as_object()) {
        body.extend(counts.clone());
    }
    (status, Json(body)).into_response()
}

/// `GET /v1/models`.
pub async fn models(State(state): State<AppState>) -> Json<serde_json::Value> {
    let entry = ModelEntry {
        id: state.engine.info().name.clone(),
        aliases: state.model_aliases.to_vec(),
        tags: state.model_tags.to_vec(),
        object: "model",
        created: state.started,
        owned_by: "baton",
    };
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
    caller: Caller,
    JsonBody(request): JsonBody<ChatRequest>,
) -> Result<Response, ApiError> {
    let prompt = state.request_prompt(&request).await?;
    let mut job = state.chat_job(prompt, &request.params, &caller).await?;
    job.reasoning = state.reasoning_of(&job);
    state.run(job, Kind::Chat).await
}

/// llama-server's `POST /chat/completions/input_tokens`: `{"input_tokens":
/// n}`, the tokens of the prompt a chat request's messages (and tools)
/// render to, nothing generated.
pub async fn chat_input_tokens(
    State(state): State<AppState>,
    JsonBody(request): JsonBody<ChatRequest>,
) -> Result<Json<Value>, ApiError> {
    let prompt = state.request_prompt(&request).await?;
    Ok(Json(json!({ "input_tokens": prompt.tokens.len() })))
}

/// `POST /v1/completions`: the prompt tokenized as `baton run -p` does
/// (BOS added when the model adds one, special tokens parsed).
pub async fn completion(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(request): JsonBody<CompletionRequest>,
) -> Result<Response, ApiError> {
    let text = match request.prompt {
        Prompt::Text(text) => text,
        Prompt::Texts(mut texts) if texts.len() == 1 => texts.remove(0),
        Prompt::Texts(texts) => {
            return Err(ApiError::invalid_param(
                "prompt",
                format!("{} prompts given: one prompt per request is served", texts.len()),
            ))
        }
        Prompt::Tokens(ids) => {
            let job = state.job(&request.params, ids, &caller).await?;
            let echo = match request.echo {
                true => Some(state.echo(&job, None).await?),
                false => None,
            };
            return state.run_echoed(job, Kind::Completion, echo).await;
        }
    };
    // Tokenizing a long prompt is CPU work: off the HTTP threads.
    let tokenizer = state.engine.tokenizer().clone();
    let source = text.clone();
    let prompt = tokio::task::spawn_blocking(move || {
        tokenizer.encode(&source, EncodeOptions { add_special: true, parse_special: true })
    })
    .await
    .map_err(|e| ApiError::server(format!("tokenizing the prompt: {e}")))?
    .map_err(|e| ApiError::invalid_param("prompt", format!("tokenizing the prompt: {e}")))?;
    let job = state.job(&request.params, prompt, &caller).await?;
    let echo = match request.echo {
        true => Some(state.echo(&job, Some(text)).await?),
        false => None,
    };
    state.run_echoed(job, Kind::Completion, echo).await
}

/// Runs `work` on the blocking threads: CPU work whose cost the client
/// sets (a schema to compile), so that `/health` and other requests never
/// wait on it. The runtime's bounded shutdown does not wait on it either.
pub(super) async fn off_thread<T: Send + 'static>(
    what: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work).await.map_err(|e| ApiError::server(format!("{what}: {e}")))
}
