//! llama-server's own `POST /completion`, in its request and answer shapes
//! (its README's "POST /completion"):
//!
//! - `prompt`: a string, token ids, ids and strings mixed in one list (the
//!   strings tokenized in place), `{"prompt_string": …}`, or a list of
//!   several of those, answered as a list of results (whole answers only).
//! - `n_predict` (`-1`: the server's `-n`, or no limit), `n_probs` (the
//!   most likely alternatives of each generated token, as
//!   `completion_probabilities`), `return_tokens`, `response_fields`
//!   (only those fields, keyed by their `a/b` paths), `json_schema`,
//!   `grammar`, and the sampling fields of `/v1/completions`.
//! - A whole answer is one object: `content`, `tokens`, `stop`,
//!   `stop_type` (`eos`, `limit` or `word`, with the `stopping_word`),
//!   `tokens_predicted`, `tokens_evaluated`, `tokens_cached`, `prompt`,
//!   `has_new_line`, `truncated` (always `false`: a prompt over the
//!   context is refused, not cut), `generation_settings` and `timings`
//!   (`prompt_n` evaluated and `cache_n` reused prompt tokens,
//!   `predicted_n`, and their milliseconds and rates).
//! - A stream (`stream: true`) is `data: {json}` events, each with the new
//!   `content`, its `tokens` and `stop: false`, then the whole answer's
//!   fields with an empty `content` and `stop: true`; there is no
//!   `[DONE]`, as llama-server sends none here.
//!
//! With `post_sampling_probs`, `completion_probabilities` holds each
//! token's `prob` and its alternatives' (`top_probs`) in the distribution
//! it was drawn from: the candidates the sampler's filters (top-k, top-p,
//! min-p) left, at the request's temperature (tokens without a chance
//! left out, so fewer than `n_probs` when fewer survived), as
//! llama-server; otherwise the model's `logprob` and `top_logprobs`.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use baton_model::{EncodeOptions, Tokenizer};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use tokio::sync::mpsc::UnboundedSender;

use super::auth::Caller;
use super::body::JsonBody;
use super::error::ApiError;
use super::events::spawn_stream;
use super::llama::sampling_settings;
use super::params::Job;
use super::state::AppState;
use super::types::{null_is_false, Params};
use crate::engine::{Event, Generation, TokenLogprobs};
use crate::text::{Outcome, Progress, TextStream};
use crate::timings::Timings;

/// `POST /completion`'s body.
#[derive(Deserialize)]
pub struct NativeRequest {
    /// The prompt or prompts (see the module's documentation).
    prompt: Value,
    /// Most tokens to generate; `-1` (or absent) leaves the server's.
    n_predict: Option<i64>,
    /// Alternatives per generated token to send log-probabilities of.
    n_probs: Option<u64>,
    /// llama-server's probabilities after sampling (the draw's
    /// distribution, not the model's).
    #[serde(default, deserialize_with = "null_is_false")]
    post_sampling_probs: bool,
    /// Send the generated token ids in `tokens`.
    #[serde(default, deserialize_with = "null_is_false")]
    return_tokens: bool,
    /// Answer only these fields (paths such as `generation_settings/seed`).
    #[serde(default)]
    response_fields: Option<Vec<String>>,
    /// The sampling and stop fields `/v1/completions` takes.
    #[serde(flatten)]
    params: Params,
}

/// What a prompt object's text is under (llama-server's multimodal prompt).
const PROMPT_STRING: &str = "prompt_string";

/// A piece of the answer as it is streamed: its text, its tokens and
/// their log-probabilities.
#[derive(Debug, Default)]
struct Piece {
    text: String,
    tokens: Vec<u32>,
    probs: Vec<TokenLogprobs>,
}

/// How a generation ended, with what its final object tells.
#[derive(Debug)]
struct Ended {
    /// `eos`, `limit` or `word`.
    stop_type: &'static str,
    stopping_word: String,
    prompt_tokens: usize,
    predicted: usize,
    /// How long reading the prompt and generating took.
    timings: Timings,
    /// Text, tokens and log-probabilities not handed out with a piece
    /// (the decoder's last bytes; a stop string's tokens).
    rest: Piece,
}

/// `POST /completion`.
pub async fn completion(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(mut request): JsonBody<NativeRequest>,
) -> Result<Response, ApiError> {
    let prompts = prompts(&request.prompt, state.engine.tokenizer())?;
    let params = native_params(&mut request, state.defaults.max_tokens);
    if request.params.stream && prompts.len() > 1 {
        return Err(ApiError::invalid_param("prompt", "several prompts are served whole, not streamed"));
    }
    let mut jobs = Vec::with_capacity(prompts.len());
    for prompt in prompts {
        let mut job = state.job(&params, prompt, &caller).await?;
        job.request.post_sampling = request.post_sampling_probs;
        jobs.push(job);
    }
    let answer = Answer { fields: request.response_fields.take(), return_tokens: request.return_tokens };
    if request.params.stream {
        let job = jobs.pop().ok_or_else(|| ApiError::invalid_param("prompt", "the prompt is empty"))?;
        let generation = state.engine.submit_drafting(job.request.clone(), job.spec(state.engine.options().spec))?;
        return Ok(streamed(state, job, generation, answer));
    }
    let runs = jobs.into_iter().enumerate().map(|(index, job)| {
        let (state, answer) = (state.clone(), &answer);
        async move {
            let spec = job.spec(state.engine.options().spec);
            let generation = state.engine.submit_drafting(job.request.clone(), spec)?;
            let mut whole = Piece::default();
            let on_piece = |piece| whole.push(piece);
            let ended = run(generation, state.engine.tokenizer(), &job, (on_piece, |_| {}), pending()).await?;
            Ok::<_, ApiError>(answer.last(&state, &job, index, whole, ended))
        }
    });
    let mut results = futures_util::future::try_join_all(runs).await?;
    Ok(match results.len() {
        1 => Json(results.remove(0)).into_response(),
        _ => Json(Value::Array(results)).into_response(),
    })
}

fn pending() -> std::future::Pending<()> {
    std::future::pending()
}

impl Piece {
    fn push(&mut self, piece: Piece) {
        self.text.push_str(&piece.text);
        self.tokens.extend(piece.tokens);
        self.probs.extend(piece.probs);
    }
}

/// The request's fields in `/v1/completions`' terms: `n_predict` as
/// `max_tokens` (at most the server's `-n`, as llama-server), `n_probs` as
/// `logprobs`.
fn native_params(request: &mut NativeRequest, server_max: Option<usize>) -> Params {
    let mut params = std::mem::take(&mut request.params);
    let asked = match request.n_predict {
        None => None,
        Some(n) if n < 0 => None,
        Some(n) => Some(n as u64),
    };
    params.max_tokens = match (asked.or(params.max_tokens), server_max) {
        (Some(asked), Some(server)) => Some(asked.min(server as u64)),
        (asked, _) => asked,
    };
    if let Some(n) = request.n_probs.filter(|&n| n > 0) {
        params.logprobs = Some(json!(n));
    }
    request.params.stream = params.stream;
    params
}

/// The prompts of `value`, tokenized as llama-server does: BOS added when
/// the model adds one (to the first string of a mixed list), special
/// tokens parsed.
fn prompts(value: &Value, tokenizer: &Tokenizer) -> Result<Vec<Vec<u32>>, ApiError> {
    let several = match value {
        Value::Array(items) => {
            items.iter().any(|item| matches!(item, Value::Array(_) | Value::Object(_)))
                || items.iter().all(Value::is_string) && items.len() > 1
        }
        _ => false,
    };
    let prompts = match (several, value) {
        (true, Value::Array(items)) => items.iter().map(|item| prompt(item, tokenizer)).collect::<Result<_, _>>()?,
        _ => vec![prompt(value, tokenizer)?],
    };
    if prompts.is_empty() {
        return Err(ApiError::invalid_param("prompt", "no prompt given"));
    }
    Ok(prompts)
}

/// One prompt: a string, `{"prompt_string": …}`, or a list of token ids
/// and strings.
fn prompt(value: &Value, tokenizer: &Tokenizer) -> Result<Vec<u32>, ApiError> {
    let encode = |text: &str, add_special: bool| {
        tokenizer
            .encode(text, EncodeOptions { add_special, parse_special: true })
            .map_err(|e| ApiError::invalid_param("prompt", format!("tokenizing the prompt: {e}")))
    };
    match value {
        Value::String(text) => encode(text, true),
        Value::Object(object) => {
            if object.keys().any(|key| key != PROMPT_STRING) {
                return Err(ApiError::invalid_param(
                    "prompt",
                    "a prompt object is served with its prompt_string only (this model reads no images or audio)",
                ));
            }
            match object.get(PROMPT_STRING) {
                Some(Value::String(text)) => encode(text, true),
                _ => Err(ApiError::invalid_param("prompt", "a prompt object needs its prompt_string (a string)")),
            }
        }
        Value::Array(items) => {
            let mut tokens = Vec::new();
            for (i, item) in items.iter().enumerate() {
                match item {
                    Value::String(text) => tokens.extend(encode(text, i == 0)?),
                    Value::Number(n) => match n.as_u64().and_then(|id| u32::try_from(id).ok()) {
                        Some(id) => tokens.push(id),
                        None => return Err(ApiError::invalid_param("prompt", format!("{n} is not a token id"))),
                    },
                    other => {
                        return Err(ApiError::invalid_param(
                            "prompt",
                            format!("{other}: a prompt list holds token ids and strings"),
                        ))
                    }
                }
            }
            Ok(tokens)
        }
        other => Err(ApiError::invalid_param("prompt", format!("{other}: a string, token ids, or a list of prompts"))),
    }
}

/// Runs `generation` to its end, giving `on_piece` each piece of text safe
/// to send with the tokens since the last one, and `on_progress` how far
/// the prompt is read, as the slot takes it and after each chunk.
async fn run(
    mut generation: Generation,
    tokenizer: &std::sync::Arc<Tokenizer>,
    job: &Job,
    (mut on_piece, mut on_progress): (impl FnMut(Piece), impl FnMut(Progress)),
    cancelled: impl std::future::Future<Output = ()>,
) -> Result<Ended, ApiError> {
    let mut stream = TextStream::new(tokenizer, job.applied_stops(), job.request.prompt.len());
    let mut tokens = Vec::new();
    tokio::pin!(cancelled);
    loop {
        let event = tokio::select! {
            biased;
            () = &mut cancelled => return Err(ApiError::server("the request was cancelled")),
            event = generation.next() => event,
        };
        if let Some(Event::Token(token)) = event {
            tokens.push(token);
        }
        let pushed = stream.push(event);
        if let Some(progress) = pushed.progress {
            on_progress(progress);
        }
        // The text the end releases without a token of its own (the
        // decoder's last bytes) goes with the final object.
        let mut tail = String::new();
        match pushed.text {
            Some((text, _)) if tokens.is_empty() && pushed.end.is_some() => tail = text,
            Some((text, probs)) => on_piece(Piece { text, tokens: std::mem::take(&mut tokens), probs }),
            None => {}
        }
        let Some(end) = pushed.end else { continue };
        let (reason, usage, probs, timings) = match end {
            Outcome::Finished { reason, usage, logprobs, timings, .. } => (reason, usage, logprobs, timings),
            Outcome::Failed(why) => return Err(ApiError::server(why)),
            Outcome::Cancelled => return Err(ApiError::server("the request was cancelled")),
        };
        let stopping_word = stream.matched_stop().unwrap_or_default().to_string();
        let stop_type = match (reason, stopping_word.is_empty()) {
            ("length", _) => "limit",
            (_, false) => "word",
            _ => "eos",
        };
        return Ok(Ended {
            stop_type,
            stopping_word,
            prompt_tokens: usage.prompt_tokens,
            predicted: usage.completion_tokens,
            timings,
            rest: Piece { text: tail, tokens, probs },
        });
    }
}

/// Streams one generation: its pieces, then the final object.
fn streamed(state: AppState, job: Job, generation: Generation, answer: Answer) -> Response {
    spawn_stream(move |tx: UnboundedSender<String>| async move {
        let tokenizer = state.engine.tokenizer().clone();
        let n_probs = job.request.logprobs.filter(|&n| n > 0);
        let prompt = job.request.prompt.len();
        let (mut predicted, model) = (0, state.engine.info().name.clone());
        let on_piece = |piece: Piece| {
            predicted += piece.tokens.len();
            let mut chunk = json!({
                "index": 0,
                "content": piece.text,
                "tokens": piece.tokens,
                "stop": false,
                "model": model,
                "tokens_predicted": predicted,
                "tokens_evaluated": prompt,
            });
            if n_probs.is_some() {
                chunk["completion_probabilities"] = probabilities(&piece.probs, &tokenizer, job.request.post_sampling);
            }
            let _ = tx.send(format!("data: {chunk}\n\n"));
        };
        // llama-server's `return_progress`: a chunk with no text and the
        // `prompt_progress` (with `timings_per_token`, the prompt's timings
        // so far).
        let on_progress = |progress: Progress| {
            if job.extras.return_progress {
                let mut chunk = json!({
                    "index": 0,
                    "content": "",
                    "tokens": [],
                    "stop": false,
                    "model": model,
                    "tokens_predicted": 0,
                    "tokens_evaluated": prompt,
                    "prompt_progress": progress.to_json(),
                });
                if job.extras.timings_per_token {
                    chunk["timings"] = progress.timings().to_json();
                }
                let _ = tx.send(format!("data: {chunk}\n\n"));
            }
        };
        let sent = match run(generation, &tokenizer, &job, (on_piece, on_progress), tx.closed()).await {
            Ok(ended) => answer.last(&state, &job, 0, Piece::default(), ended),
            Err(e) => e.json().parse().unwrap_or(Value::Null),
        };
        let _ = tx.send(format!("data: {sent}\n\n"));
    })
}

/// How the final object is written: its fields (all when `None`) and
/// whether it carries the tokens.
struct Answer {
    fields: Option<Vec<String>>,
    return_tokens: bool,
}

impl Answer {
    /// The final object of the `index`th prompt's answer: `whole` is the
    /// text and tokens sent in it (empty when they were streamed), then
    /// what `ended` holds back.
    fn last(&self, state: &AppState, job: &Job, index: usize, whole: Piece, ended: Ended) -> Value {
        let tokenizer = state.engine.tokenizer();
        let prompt = tokenizer.decode_with(&job.request.prompt, true).unwrap_or_default();
        let s = &job.request.sampling;
        let mut settings = sampling_settings(s);
        settings.insert("n_predict".into(), job.request.max_tokens.map_or(json!(-1), |n| json!(n)));
        settings.insert("seed".into(), json!(s.seed));
        settings.insert("ignore_eos".into(), json!(!job.request.stop_at_eog));
        settings.insert("stream".into(), json!(job.stream));
        settings.insert("stop".into(), json!(job.stops));
        settings.insert("n_probs".into(), json!(job.request.logprobs.unwrap_or(0)));
        let tokens = match self.return_tokens {
            true => whole.tokens.iter().chain(&ended.rest.tokens).copied().collect(),
            false => Vec::new(),
        };
        let content = whole.text + &ended.rest.text;
        let mut last = json!({
            "index": index,
            "content": content,
            "tokens": tokens,
            "stop": true,
            "model": state.engine.info().name,
            "tokens_predicted": ended.predicted,
            "tokens_evaluated": ended.prompt_tokens,
            "generation_settings": settings,
            "prompt": prompt,
            "has_new_line": content.contains('\n'),
            "truncated": false,
            "stop_type": ended.stop_type,
            "stopping_word": ended.stopping_word,
            "tokens_cached": ended.prompt_tokens + ended.predicted,
            "timings": ended.timings.to_json(),
        });
        if job.request.logprobs.is_some_and(|n| n > 0) && !job.stream {
            let probs: Vec<_> = whole.probs.into_iter().chain(ended.rest.probs).collect();
            last["completion_probabilities"] = probabilities(&probs, tokenizer, job.request.post_sampling);
        }
        match &self.fields {
            Some(fields) if !fields.is_empty() => only(&last, fields),
            _ => last,
        }
    }
}

/// `fields` of `value` (paths through objects, `/` between the keys),
/// keyed by their paths; those it lacks are left out (llama-server's
/// `response_fields`).
fn only(value: &Value, fields: &[String]) -> Value {
    let mut out = Map::new();
    for field in fields {
        let found = field.split('/').try_fold(value, |at, key| at.get(key));
        if let Some(found) = found {
            out.insert(field.clone(), found.clone());
        }
    }
    Value::Object(out)
}

/// llama-server's `completion_probabilities`: each token's id, text, bytes
/// and log-probability, with its most likely alternatives'; `post`
/// (`post_sampling_probs`): their probabilities (`prob`, `top_probs`).
fn probabilities(entries: &[TokenLogprobs], tokenizer: &Tokenizer, post: bool) -> Value {
    let token = |id: u32, logprob: f32| {
        let bytes = tokenizer.token_bytes(id, true).map(<[u8]>::to_vec).unwrap_or_default();
        let mut out = json!({ "id": id, "token": String::from_utf8_lossy(&bytes), "bytes": bytes });
        match post {
            true => out["prob"] = json!(logprob.exp()),
            false => out["logprob"] = json!(logprob),
        }
        out
    };
    let top = if post { "top_probs" } else { "top_logprobs" };
    let entries = entries.iter().map(|entry| {
        let mut out = token(entry.token, entry.logprob);
        out[top] = entry.top.iter().map(|&(id, logprob)| token(id, logprob)).collect();
        out
    });
    Value::Array(entries.collect())
}
