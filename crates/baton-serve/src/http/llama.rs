//! llama-server's own routes, in its request and answer shapes:
//! `POST /tokenize`, `POST /detokenize`, `POST /apply-template`,
//! `GET /props` and `GET /slots`.

use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::Json;
use baton_gen::SamplingParams;
use baton_model::EncodeOptions;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::body::JsonBody;
use super::chat_prompt::conversation;
use super::error::ApiError;
use super::routes::off_thread;
use super::state::AppState;
use super::tools;
use super::types::ChatMessage;

/// `POST /tokenize`'s body.
#[derive(Deserialize)]
pub struct TokenizeRequest {
    /// The text to tokenize.
    content: String,
    /// Add BOS (and EOS) as the model's metadata asks (default: no).
    #[serde(default)]
    add_special: bool,
    /// Match control tokens written in the text (default: yes).
    #[serde(default = "yes")]
    parse_special: bool,
    /// Answer each token as `{"id", "piece"}` rather than its id alone.
    #[serde(default)]
    with_pieces: bool,
}

fn yes() -> bool {
    true
}

/// `POST /detokenize`'s body.
#[derive(Deserialize)]
pub struct DetokenizeRequest {
    /// Token ids.
    #[serde(default)]
    tokens: Vec<u32>,
}

/// `POST /apply-template`'s body.
#[derive(Deserialize)]
pub struct ApplyTemplateRequest {
    /// The conversation, as `/v1/chat/completions` takes it.
    messages: Vec<ChatMessage>,
    /// The tools, as `/v1/chat/completions` takes them.
    #[serde(default)]
    tools: Option<Value>,
    /// How they may be called (`auto` when tools are given).
    #[serde(default)]
    tool_choice: Option<Value>,
    /// Several calls in one answer.
    #[serde(default)]
    parallel_tool_calls: Option<Value>,
    /// The template's variables, as `/v1/chat/completions` takes them.
    #[serde(default)]
    chat_template_kwargs: Option<Value>,
}

/// `POST /tokenize`: `{"tokens": [ids]}`, or with `with_pieces` each token
/// as `{"id", "piece"}`: its text, or its bytes when they are not UTF-8 on
/// their own (as llama-server).
pub async fn tokenize(
    State(state): State<AppState>,
    JsonBody(request): JsonBody<TokenizeRequest>,
) -> Result<Json<Value>, ApiError> {
    let tokenizer = state.engine.tokenizer().clone();
    let options = EncodeOptions { add_special: request.add_special, parse_special: request.parse_special };
    let with_pieces = request.with_pieces;
    // Tokenizing a long text is CPU work: off the HTTP threads.
    let tokens = tokio::task::spawn_blocking(move || -> Result<Value, ApiError> {
        let ids = tokenizer
            .encode(&request.content, options)
            .map_err(|e| ApiError::invalid_param("content", format!("tokenizing the content: {e}")))?;
        if !with_pieces {
            return Ok(json!(ids));
        }
        let pieces = ids
            .iter()
            .map(|&id| {
                let bytes = tokenizer.token_bytes(id, true).map_err(|e| ApiError::server(e.to_string()))?;
                let piece = match std::str::from_utf8(bytes) {
                    Ok(text) => json!(text),
                    Err(_) => json!(bytes),
                };
                Ok(json!({ "id": id, "piece": piece }))
            })
            .collect::<Result<Vec<_>, ApiError>>()?;
        Ok(Value::Array(pieces))
    })
    .await
    .map_err(|e| ApiError::server(format!("tokenizing the content: {e}")))??;
    Ok(Json(json!({ "tokens": tokens })))
}

/// `POST /detokenize`: `{"content": text}`, special tokens written out.
pub async fn detokenize(
    State(state): State<AppState>,
    JsonBody(request): JsonBody<DetokenizeRequest>,
) -> Result<Json<Value>, ApiError> {
    let vocab = state.engine.info().vocab;
    if let Some(bad) = request.tokens.iter().find(|&&id| id as usize >= vocab) {
        return Err(ApiError::invalid_param("tokens", format!("token id {bad} is outside the vocabulary of {vocab}")));
    }
    let content = state
        .engine
        .tokenizer()
        .decode_with(&request.tokens, true)
        .map_err(|e| ApiError::invalid_param("tokens", e.to_string()))?;
    Ok(Json(json!({ "content": content })))
}

/// `POST /apply-template`: `{"prompt": text}`, the messages (and tools)
/// rendered with the model's chat template and the generation prompt, as
/// `/v1/chat/completions` renders them (not tokenized; a required call's
/// opening is not written).
pub async fn apply_template(
    State(state): State<AppState>,
    JsonBody(request): JsonBody<ApplyTemplateRequest>,
) -> Result<Json<Value>, ApiError> {
    if request.messages.is_empty() {
        return Err(ApiError::invalid_param("messages", "messages is empty"));
    }
    let messages = conversation(&request.messages, state.history_form())?;
    let parallel = tools::parallel(request.parallel_tool_calls.as_ref())?;
    let tools = (request.tools, request.tool_choice, parallel);
    let variables = match request.chat_template_kwargs {
        None | Some(Value::Null) => serde_json::Map::new(),
        Some(Value::Object(map)) => map,
        Some(_) => {
            return Err(ApiError::invalid_param("chat_template_kwargs", "an object of the template's variables"))
        }
    };
    let input = state.prompt_input(messages, tools, None).await?;
    let prompter = state.prompter.clone();
    let prompt = off_thread("rendering the conversation", move || prompter.render(&input, &variables)).await??;
    Ok(Json(json!({ "prompt": prompt })))
}

/// `GET /slots`: each sequence slot, in llama-server's shape as far as
/// Baton knows it: `id`, `n_ctx`, `is_processing`, the positions its cache
/// holds (`n_tokens`), and for a running generation its prompt's tokens
/// and `next_token` (a list of one: `n_decoded`, `n_remain`; an idle
/// slot's 0 and -1). Prompt texts are not told
/// (llama-server's `prompt`): a slot may hold another client's. With
/// `?fail_on_no_slot=1` (llama-server's), 503 when every slot is busy.
pub async fn slots(State(state): State<AppState>, uri: Uri) -> Result<Json<Value>, ApiError> {
    let n_ctx = state.engine.info().context;
    let slots = state.engine.slots();
    let fail = uri.query().unwrap_or("").split('&').any(|pair| match pair.split_once('=') {
        Some(("fail_on_no_slot", value)) => !matches!(value, "" | "0" | "false"),
        _ => pair == "fail_on_no_slot",
    });
    if fail && slots.iter().all(|s| s.is_processing) {
        return Err(ApiError::with_status(StatusCode::SERVICE_UNAVAILABLE, "no slot available"));
    }
    let slots = slots
        .iter()
        .map(|s| {
            json!({
                "id": s.id,
                "n_ctx": n_ctx,
                "is_processing": s.is_processing,
                "n_tokens": s.n_tokens,
                "n_prompt_tokens": s.n_prompt_tokens,
                // A list of one, as llama-server writes it; an idle slot
                // has no budget (-1) and has decoded nothing for a task.
                "next_token": [{
                    "has_next_token": s.is_processing && s.n_remain > 0,
                    "n_decoded": if s.is_processing { s.n_decoded } else { 0 },
                    "n_remain": if s.is_processing { s.n_remain as i64 } else { -1 },
                }],
            })
        })
        .collect();
    Ok(Json(Value::Array(slots)))
}

/// The sampling settings of `s` under llama-server's names (what
/// `/props`' `params` and `/completion`'s `generation_settings` hold),
/// the logit bias as `{"token", "bias"}` entries.
pub fn sampling_settings(s: &SamplingParams) -> Map<String, Value> {
    let settings = json!({
        "temperature": s.temperature,
        "top_k": s.top_k,
        "top_p": s.top_p,
        "min_p": s.min_p,
        "repeat_penalty": s.repeat_penalty,
        "repeat_last_n": s.repeat_last_n,
        "presence_penalty": s.presence_penalty,
        "frequency_penalty": s.frequency_penalty,
        // A ban (-inf) is `null` in JSON, as llama-server writes it.
        "logit_bias": s.logit_bias.entries().iter().map(|&(token, bias)| {
            json!({ "token": token, "bias": bias.is_finite().then_some(bias) })
        }).collect::<Vec<_>>(),
    });
    match settings {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// `GET /slots` with [`ServerOptions::slots_endpoint`](super::ServerOptions)
/// off (`--no-slots`): 501, as llama-server answers then.
pub async fn slots_off() -> ApiError {
    ApiError::with_status(StatusCode::NOT_IMPLEMENTED, "the /slots endpoint is off on this server (--no-slots)")
}

/// `GET /props`: the server's defaults and the model, in llama-server's
/// shape.
pub async fn props(State(state): State<AppState>) -> Json<Value> {
    let info = state.engine.info();
    let tokenizer = state.engine.tokenizer();
    let token = |id: Option<u32>| id.and_then(|id| tokenizer.token_text(id).ok()).unwrap_or_default().to_string();
    let mut s = SamplingParams::default();
    let d = state.defaults;
    s.temperature = d.temperature.unwrap_or(s.temperature);
    let mut params = sampling_settings(&s);
    params.insert("n_predict".into(), d.max_tokens.map_or(json!(-1), |n| json!(n)));
    params.insert("seed".into(), d.seed.map_or(json!(-1), |seed| json!(seed)));
    params.insert("ignore_eos".into(), json!(false));
    params.insert("stream".into(), json!(false));
    Json(json!({
        "default_generation_settings": {
            "id": 0,
            "n_ctx": info.context,
            "model": info.name,
            "is_processing": false,
            "params": params,
        },
        "total_slots": state.engine.options().parallel,
        "model_alias": info.name,
        "model_path": state.model_path,
        "chat_template": state.prompter.template().source(),
        "bos_token": token(tokenizer.bos_id()),
        "eos_token": token(tokenizer.eos_id()),
        "modalities": { "vision": false, "audio": false },
        "build_info": concat!("baton ", env!("CARGO_PKG_VERSION")),
    }))
}
