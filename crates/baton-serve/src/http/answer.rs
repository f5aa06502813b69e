//! Answers of both endpoints, whole or as server-sent events.
//!
//! A stream is `data: {chunk}\n\n` events, then `data: [DONE]\n\n`, as the
//! `openai` client reads them. A chat stream opens with a chunk whose
//! delta has the role; the last choice chunk has an empty delta (chat) or
//! text (completion) and the `finish_reason`; with
//! `stream_options.include_usage` a chunk with no choices and the `usage`
//! follows. A failure after the stream began is sent as a `data:` event
//! holding an `error` object, and the stream ends without `[DONE]`.
//!
//! llama-server's additions, when the request asks ([`Extras`]): with
//! `timings_per_token` every chunk after the first carries the `timings`
//! so far (the last ones and the usage chunk the final ones); with
//! `return_progress` a chunk with an empty delta and `prompt_progress`
//! (`total`, `cache`, `processed` prompt tokens, `time_ms` since reading
//! began) comes as the slot takes
//! the request and after each chunk of the prompt read; with `verbose` a
//! whole answer carries `__verbose` (the prompt as text, and the answer's).

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use axum::response::{IntoResponse, Response};
use axum::Json;
use baton_gen::openai::logprobs::LogprobsWriter;
use baton_gen::openai::reasoning::{ReasoningSplit, Split};
use baton_gen::openai::{Answer, Delta, Usage};
use baton_model::Tokenizer;
use futures_util::stream;
use tokio::sync::mpsc::UnboundedSender;

use super::error::ApiError;
use super::events::{event_stream, spawn_stream};
use super::generate::{drive, drive_reporting, Outcome};
use super::params::{Extras, Job};
use super::tools::{answer_calls, may_be_call, Call, ToolMode};
use crate::engine::{Generation, TokenLogprobs};
use crate::text::Progress;
use crate::timings::Timings;

// The endpoint and what every answer and chunk of one request repeats:
// baton-gen's, whose shapes the Python package builds too.
pub use baton_gen::openai::{Answers as Meta, Kind};

/// The chat stream's first chunk: the assistant's role, with `content`
/// `null` as llama-server sends it (OpenAI sends `""`; clients take both).
fn opening(meta: &Meta) -> Answer {
    meta.opening(Some(None))
}

/// A whole answer as a JSON response.
fn respond(answer: &Answer) -> Response {
    Json(answer).into_response()
}

/// The id of the answer's `index`th tool call.
fn call_id(meta: &Meta, index: usize) -> String {
    let id = format!("call_{}", meta.id.rsplit('-').take(2).collect::<Vec<_>>().join(""));
    match index {
        0 => id,
        n => format!("{id}_{n}"),
    }
}

/// The `tool_calls` entries of `calls` (each with its `index` when
/// streamed).
fn call_entries(meta: &Meta, calls: &[Call], streamed: bool) -> Vec<serde_json::Value> {
    calls.iter().enumerate().map(|(i, call)| call.to_json(&call_id(meta, i), streamed.then_some(i))).collect()
}

/// The chunk of streamed tool calls (the whole calls in one delta).
fn call_chunk(meta: &Meta, calls: &[Call], logprobs: Option<serde_json::Value>) -> Answer {
    let delta = Delta { tool_calls: Some(call_entries(meta, calls, true)), ..Delta::default() };
    meta.chat_chunk(delta, logprobs, None)
}

/// A whole chat answer's message: the `text` as content (when it is not
/// `calls`), the thinking split out when the job asks (`reasoning`).
fn whole_message(meta: &Meta, text: String, reasoning: Option<bool>, calls: Option<&[Call]>) -> Delta {
    let Split { reasoning, content } = match reasoning {
        Some(opened) => ReasoningSplit::whole(&text, opened),
        None => Split { reasoning: String::new(), content: text },
    };
    Delta {
        role: Some("assistant"),
        content: calls.is_none().then_some(Some(content)),
        reasoning_content: (!reasoning.is_empty()).then_some(reasoning),
        tool_calls: calls.map(|calls| call_entries(meta, calls, false)),
    }
}

/// `usage` with the tokens of `text`'s thinking counted, when the job
/// splits it out (`reasoning`, as [`Job::reasoning`]).
pub(super) fn with_thinking(usage: Usage, text: &str, reasoning: Option<bool>, token_ends: &[usize]) -> Usage {
    match reasoning {
        Some(opened) => usage.with_reasoning(ReasoningSplit::thinking_tokens(text, opened, token_ends)),
        None => usage,
    }
}

fn event(data: &str) -> String {
    format!("data: {data}\n\n")
}

/// A completion's prompt sent back before its text (`echo`): the prompt's
/// text and, when log-probabilities are asked, its tokens' (the first one
/// has none).
#[derive(Debug, Clone)]
pub struct Echo {
    /// The prompt as text.
    pub text: String,
    /// The prompt's first token.
    pub first: u32,
    /// Each later prompt token's log-probability, when asked.
    pub entries: Option<Vec<TokenLogprobs>>,
}

impl Echo {
    /// The echo's text and `logprobs` object, through `writer`.
    fn render(&self, writer: &mut LogprobsWriter, tokenizer: &Tokenizer) -> (String, Option<serde_json::Value>) {
        let logprobs = self.entries.as_ref().map(|entries| {
            writer.unscored(self.first);
            writer.render(entries, tokenizer)
        });
        (self.text.clone(), logprobs)
    }
}

/// Answers with the echo alone (`max_tokens: 0`): nothing is generated;
/// each of the `n` choices is the echo.
pub fn echo_only(echo: &Echo, tokenizer: &Tokenizer, job: &Job, meta: &Meta) -> Response {
    let (text, logprobs) = echo.render(&mut LogprobsWriter::new(false), tokenizer);
    let usage = Usage::new(job.request.prompt.len(), 0, 0);
    if !job.stream {
        let choices = (0..job.choices).map(|_| meta.whole(text.clone(), logprobs.clone(), "length", usage)).collect();
        return match Answer::of_choices(choices) {
            Some(answer) => respond(&answer),
            None => ApiError::server("no choices to answer").into_response(),
        };
    }
    let mut events: Vec<String> = (0..job.choices)
        .map(|i| event(&meta.chunk(Some(text.clone()), logprobs.clone(), Some("length")).indexed(i as u32).to_json()))
        .collect();
    if job.include_usage {
        events.push(event(&meta.usage_chunk(usage).to_json()));
    }
    events.push(event("[DONE]"));
    event_stream(stream::iter(events.into_iter().map(Ok::<_, Infallible>)))
}

/// A generation on its way to its answer: what [`whole`] and [`streamed`]
/// take.
pub struct Answering {
    /// The engine's generation.
    pub generation: Generation,
    /// The model's tokenizer.
    pub tokenizer: Arc<Tokenizer>,
    /// The checked request.
    pub job: Job,
    /// What every chunk repeats.
    pub meta: Meta,
    /// The prompt sent first (`echo`).
    pub echo: Option<Echo>,
}

/// Runs the generation and answers with the whole text (after the echo of
/// the prompt, when there is one).
pub async fn whole(answering: Answering) -> Response {
    whole_choices(vec![answering]).await
}

/// Runs the generations of a request's choices (`n`) together and
/// answers with all of them, the counts summed as OpenAI sums them.
pub async fn whole_choices(answerings: Vec<Answering>) -> Response {
    let answers = futures_util::future::try_join_all(answerings.into_iter().map(whole_answer)).await;
    match answers.map(Answer::of_choices) {
        Ok(Some(answer)) => respond(&answer),
        Ok(None) => ApiError::server("no choices to answer").into_response(),
        Err(e) => e.into_response(),
    }
}

/// One choice's whole answer.
async fn whole_answer(answering: Answering) -> Result<Answer, ApiError> {
    let Answering { generation, tokenizer, job, meta, echo } = answering;
    let prompt = job.request.prompt.len();
    let mut text = echo.as_ref().map_or_else(String::new, |e| e.text.clone());
    let reasoning = job.reasoning.filter(|_| meta.kind == Kind::Chat);
    let mut writer = LogprobsWriter::new(meta.kind == Kind::Chat);
    let mut entries = Vec::new();
    if let Some(Echo { first, entries: Some(scored), .. }) = &echo {
        writer.unscored(*first);
        entries.extend(scored.iter().cloned());
    }
    let on_text = |piece: String, logprobs: Vec<_>| {
        text.push_str(&piece);
        entries.extend(logprobs);
    };
    let outcome = drive(generation, &tokenizer, job.applied_stops(), prompt, on_text, std::future::pending()).await;
    match outcome {
        Outcome::Finished { reason, usage, logprobs, token_ends, .. } => {
            entries.extend(logprobs);
            let logprobs = job.request.logprobs.map(|_| writer.render(&entries, &tokenizer));
            let verbose = job.extras.verbose.then(|| {
                let prompt = tokenizer.decode_with(&job.request.prompt, true).unwrap_or_default();
                serde_json::json!({ "prompt": prompt, "content": text })
            });
            if meta.kind == Kind::Completion {
                return Ok(Answer { verbose, ..meta.whole(text, logprobs, reason, usage) });
            }
            let usage = with_thinking(usage, &text, reasoning, &token_ends);
            // The thinking first: the calls are read from the answer after it.
            let answered = match reasoning {
                Some(opened) => ReasoningSplit::whole(&text, opened).content,
                None => text.clone(),
            };
            let (calls, finish) =
                match job.tools.and_then(|mode| answer_calls(&answered, mode, reason, &job.tool_schemas)) {
                    Some((calls, finish)) => (Some(calls), finish),
                    None => (None, reason),
                };
            let message = whole_message(&meta, text, reasoning, calls.as_deref());
            Ok(Answer { verbose, ..meta.whole_message(message, logprobs, finish, usage) })
        }
        Outcome::Failed(why) => Err(ApiError::server(why)),
        Outcome::Cancelled => Err(ApiError::server("the request was cancelled")),
    }
}

/// Answers at once with an event stream that a task fills as tokens come;
/// when the client goes away, the stream's receiver is dropped, the task
/// sees its channel closed and drops the generation. An echo of the
/// prompt is the first chunk.
pub fn streamed(answering: Answering) -> Response {
    streamed_choices(vec![answering])
}

/// [`streamed`] for a request's choices (`n`): their chunks as they come,
/// each tagged with its choice's `index`, then (when asked) one usage
/// chunk that counts them all. A failure of one ends the stream (the
/// others' generations are dropped).
pub fn streamed_choices(answerings: Vec<Answering>) -> Response {
    spawn_stream(move |tx| async move {
        let last = answerings.first().map(|a| (a.job.include_usage, a.job.extras, a.meta.clone()));
        let choices = answerings.into_iter().enumerate().map(|(i, a)| stream_choice(a, i as u32, &tx));
        let Ok(ended) = futures_util::future::try_join_all(choices).await else { return };
        if let Some((true, extras, meta)) = last {
            let usages: Vec<Usage> = ended.iter().map(|(usage, _)| *usage).collect();
            let timings = ended.first().filter(|_| extras.timings_per_token).map(|(_, t)| t.to_json());
            let chunk = Answer { timings, ..meta.usage_chunk(Usage::of_choices(&usages)) };
            let _ = tx.send(event(&chunk.to_json()));
        }
        let _ = tx.send(event("[DONE]"));
    })
}

/// Streams one choice (`index`) into `tx`: its chunks to the last, which
/// has its `finish_reason`; its counts and timings, or `Err` when it
/// failed (the error event sent) or the client went away.
async fn stream_choice(answering: Answering, index: u32, tx: &UnboundedSender<String>) -> Result<(Usage, Timings), ()> {
    let Answering { generation, tokenizer, job, meta, echo } = answering;
    let Extras { timings_per_token, return_progress, .. } = job.extras;
    // The timings as of the last text, for `timings_per_token`.
    // (A lock: the stream's future is sent between threads.)
    let so_far: Mutex<Option<Timings>> = Mutex::new(None);
    let set = |timings| *so_far.lock().unwrap_or_else(|e| e.into_inner()) = Some(timings);
    let send = |mut answer: Answer| {
        if timings_per_token {
            answer.timings = so_far.lock().unwrap_or_else(|e| e.into_inner()).map(|t| t.to_json());
        }
        let _ = tx.send(event(&answer.indexed(index).to_json()));
    };
    let on_progress = |progress: Progress| {
        if return_progress {
            // The timings so far are the prompt's read so far.
            set(progress.timings());
            send(Answer { prompt_progress: Some(progress.to_json()), ..meta.chunk(None, None, None) });
        }
    };
    let prompt = job.request.prompt.len();
    if meta.kind == Kind::Chat {
        send(opening(&meta));
    }
    let asked = job.request.logprobs.is_some();
    let mut writer = LogprobsWriter::new(meta.kind == Kind::Chat);
    if let Some(echo) = &echo {
        let (text, logprobs) = echo.render(&mut writer, &tokenizer);
        send(meta.chunk(Some(text), logprobs, None));
    }
    // A text that is or may become a tool call is held back until it
    // is known which (then sent as words, or as the call at the end).
    let mut held: Option<(String, Vec<TokenLogprobs>)> = job.tools.map(|_| Default::default());
    // The thinking, when split out, goes as `reasoning_content` deltas;
    // the log-probabilities of text the split holds back go with the
    // next chunk sent.
    let reasoning = job.reasoning.filter(|_| meta.kind == Kind::Chat);
    let mut split = reasoning.map(ReasoningSplit::new);
    let mut carried: Vec<TokenLogprobs> = Vec::new();
    // The text as generated, to count its thinking's tokens at the end.
    let mut generated = String::new();
    let outcome = {
        let mut on_text = |text: String, mut entries: Vec<_>, end: bool| {
            let text = match split.as_mut() {
                None if end => return,
                None => text,
                Some(split) => {
                    generated.push_str(&text);
                    let Split { reasoning, content } = if end { split.finish() } else { split.push(&text) };
                    entries = std::mem::take(&mut carried).into_iter().chain(entries).collect();
                    if !reasoning.is_empty() {
                        let logprobs = (asked && content.is_empty())
                            .then(|| writer.render(&std::mem::take(&mut entries), &tokenizer));
                        let delta = Delta { reasoning_content: Some(reasoning), ..Delta::default() };
                        send(meta.chat_chunk(delta, logprobs, None));
                    }
                    if content.is_empty() {
                        carried = entries;
                        return;
                    }
                    content
                }
            };
            let (text, entries) = match held.as_mut() {
                Some((kept, kept_entries)) => {
                    kept.push_str(&text);
                    kept_entries.extend(entries);
                    if job.tools != Some(ToolMode::Auto) || may_be_call(kept) {
                        return;
                    }
                    held.take().unwrap_or_default()
                }
                None => (text, entries),
            };
            let logprobs = asked.then(|| writer.render(&entries, &tokenizer));
            send(meta.chunk(Some(text), logprobs, None));
        };
        let on_piece = |t, e, timings| {
            set(timings);
            on_text(t, e, false)
        };
        let stops = job.applied_stops();
        let (outcome, _) =
            drive_reporting(generation, &tokenizer, stops, prompt, (on_piece, on_progress), tx.closed()).await;
        if matches!(outcome, Outcome::Finished { .. }) {
            on_text(String::new(), Vec::new(), true);
        }
        outcome
    };
    match outcome {
        Outcome::Finished { mut reason, usage, mut logprobs, token_ends, timings } => {
            set(timings);
            let usage = with_thinking(usage, &generated, reasoning, &token_ends);
            logprobs.splice(0..0, carried);
            if let Some((text, mut entries)) = held.filter(|(text, _)| !text.is_empty()) {
                entries.append(&mut logprobs);
                let rendered = asked.then(|| writer.render(&entries, &tokenizer));
                match job.tools.and_then(|mode| answer_calls(&text, mode, reason, &job.tool_schemas)) {
                    Some((calls, finish)) => {
                        reason = finish;
                        send(call_chunk(&meta, &calls, rendered));
                    }
                    None => send(meta.chunk(Some(text), rendered, None)),
                }
            }
            let rest = (asked && !logprobs.is_empty()).then(|| writer.render(&logprobs, &tokenizer));
            send(match meta.kind {
                Kind::Chat => meta.chunk(None, rest, Some(reason)),
                Kind::Completion => meta.chunk(Some(String::new()), rest, Some(reason)),
            });
            Ok((usage, timings))
        }
        Outcome::Failed(why) => {
            let _ = tx.send(event(&ApiError::server(why).json()));
            Err(())
        }
        Outcome::Cancelled => Err(()),
    }
}
