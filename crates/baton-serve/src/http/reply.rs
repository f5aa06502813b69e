//! A chat generation run to what the Anthropic Messages and OpenAI
//! Responses answers are built from: the thinking and the text as they
//! become safe to send, the tool call read back from the end, and how the
//! answer ended.
//!
//! As on `/v1/chat/completions` (`answer.rs`), a reasoning model's
//! thinking is split from the answer when the job asks ([`Job::reasoning`],
//! `--reasoning-format`), and text that is or may become a tool call is
//! held back until it is known which: then sent as text, or read as the
//! call at the end. Log-probabilities are not served here; llama-server's
//! `timings_per_token` and `return_progress` are ([`run_reporting`]).

use std::future::Future;
use std::sync::Arc;

use baton_gen::openai::reasoning::{ReasoningSplit, Split};
use baton_gen::openai::Usage;
use baton_model::Tokenizer;

use super::error::ApiError;
use super::generate::{drive_reporting, Outcome};
use super::params::Job;
use super::tools::{may_be_call, read_call, Call, ToolMode};
use crate::engine::Generation;
use crate::text::Progress;
use crate::timings::Timings;

/// Why an answer ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// The model ended its turn (an end-of-generation token, or a format
    /// closed).
    EndOfTurn,
    /// `max_tokens` was reached, or the context is full.
    Length,
    /// This stop string matched (it and what follows are not sent).
    String(String),
    /// The answer is a tool call.
    ToolCall,
}

/// How an answer ended: its call, if it is one, why, and its counts.
#[derive(Debug)]
pub struct Ending {
    /// The tool called.
    pub call: Option<Call>,
    /// Why it ended.
    pub stop: Stop,
    /// Token counts.
    pub usage: Usage,
    /// How long reading the prompt and generating took.
    pub timings: Timings,
}

/// How a generation ended, when it did not finish.
#[derive(Debug)]
pub enum Broken {
    /// The engine failed; why.
    Failed(String),
    /// The client went away.
    Cancelled,
}

impl From<Broken> for ApiError {
    fn from(why: Broken) -> ApiError {
        match why {
            Broken::Failed(why) => ApiError::server(why),
            Broken::Cancelled => ApiError::server("the request was cancelled"),
        }
    }
}

/// A piece of the answer, safe to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Of the thinking (only when the job splits it out).
    Thinking(String),
    /// Of the answer's text.
    Text(String),
}

/// A whole answer: its thinking (empty when there is none, or it is not
/// split out), its text, and how it ended.
#[derive(Debug)]
pub struct Whole {
    /// The thinking.
    pub thinking: String,
    /// The text (without the call, when it is one).
    pub text: String,
    /// How it ended.
    pub ending: Ending,
}

/// Runs `generation` (of `job`) to its end: the whole answer.
pub async fn whole_text(generation: Generation, tokenizer: &Arc<Tokenizer>, job: &Job) -> Result<Whole, ApiError> {
    let (mut thinking, mut text) = (String::new(), String::new());
    let on_piece = |piece| match piece {
        Piece::Thinking(piece) => thinking.push_str(&piece),
        Piece::Text(piece) => text.push_str(&piece),
    };
    let ending = run(generation, tokenizer, job, on_piece, std::future::pending()).await?;
    Ok(Whole { thinking, text, ending })
}

/// Where the pieces of a running answer go: its thinking split out (when
/// asked), its text held back while it may be a call.
struct Pieces<F> {
    on_piece: F,
    /// The timings as of the last generated text.
    timings: Timings,
    split: Option<ReasoningSplit>,
    /// The text held back (`None`: no tools, nothing is held).
    held: Option<String>,
    tools: Option<ToolMode>,
    /// The text as generated, when the thinking is split out (its tokens
    /// are counted at the end).
    generated: String,
}

impl<F: FnMut(Piece, Timings)> Pieces<F> {
    /// A piece of the generated text.
    fn push(&mut self, piece: String) {
        match self.split.as_mut() {
            Some(split) => {
                self.generated.push_str(&piece);
                let split = split.push(&piece);
                self.send(split);
            }
            None => self.text(piece),
        }
    }

    /// The end of the generated text: what the split held back.
    fn finish(&mut self) {
        if let Some(split) = self.split.as_mut() {
            let split = split.finish();
            self.send(split);
        }
    }

    fn send(&mut self, Split { reasoning, content }: Split) {
        if !reasoning.is_empty() {
            (self.on_piece)(Piece::Thinking(reasoning), self.timings);
        }
        if !content.is_empty() {
            self.text(content);
        }
    }

    fn text(&mut self, piece: String) {
        let piece = match self.held.as_mut() {
            Some(kept) => {
                kept.push_str(&piece);
                if self.tools != Some(ToolMode::Auto) || may_be_call(kept) {
                    return;
                }
                self.held.take().unwrap_or_default()
            }
            None => piece,
        };
        (self.on_piece)(Piece::Text(piece), self.timings);
    }
}

/// Runs `generation` (of `job`), giving `on_piece` each piece of thinking
/// or text that is safe to send, until it ends or `cancelled` completes.
pub async fn run(
    generation: Generation,
    tokenizer: &Arc<Tokenizer>,
    job: &Job,
    mut on_piece: impl FnMut(Piece),
    cancelled: impl Future<Output = ()>,
) -> Result<Ending, Broken> {
    run_reporting(generation, tokenizer, job, (move |piece, _| on_piece(piece), |_| {}), cancelled).await
}

/// As [`run`], giving the first of `on` each piece with the timings as of
/// its text (llama-server's `timings_per_token`), and the second each
/// report of the prompt's progress, before the first token
/// (`return_progress`).
pub async fn run_reporting(
    generation: Generation,
    tokenizer: &Arc<Tokenizer>,
    job: &Job,
    (on_piece, on_progress): (impl FnMut(Piece, Timings), impl FnMut(Progress)),
    cancelled: impl Future<Output = ()>,
) -> Result<Ending, Broken> {
    let prompt = job.request.prompt.len();
    let mut pieces = Pieces {
        on_piece,
        timings: Timings::default(),
        split: job.reasoning.map(ReasoningSplit::new),
        held: job.tools.map(|_| String::new()),
        tools: job.tools,
        generated: String::new(),
    };
    let on_text = |piece, _, timings| {
        pieces.timings = timings;
        pieces.push(piece);
    };
    let (outcome, matched) =
        drive_reporting(generation, tokenizer, job.applied_stops(), prompt, (on_text, on_progress), cancelled).await;
    let (reason, usage) = match outcome {
        Outcome::Finished { reason, usage, token_ends, timings, .. } => {
            pieces.timings = timings;
            (reason, super::answer::with_thinking(usage, &pieces.generated, job.reasoning, &token_ends))
        }
        Outcome::Failed(why) => return Err(Broken::Failed(why)),
        Outcome::Cancelled => return Err(Broken::Cancelled),
    };
    pieces.finish();
    let mut call = None;
    if let Some(text) = pieces.held.take().filter(|text| !text.is_empty()) {
        call = job.tools.and_then(|mode| read_call(&text, mode, &job.tool_schemas));
        if call.is_none() {
            (pieces.on_piece)(Piece::Text(text), pieces.timings);
        }
    }
    let stop = match (&call, matched, reason) {
        (Some(_), _, _) => Stop::ToolCall,
        (None, Some(matched), _) => Stop::String(matched),
        (None, None, "length") => Stop::Length,
        (None, None, _) => Stop::EndOfTurn,
    };
    Ok(Ending { call, stop, usage, timings: pieces.timings })
}

/// A type name as an error tells it: quoted, or `(none)`.
pub fn type_name(kind: Option<&str>) -> String {
    kind.map_or_else(|| "(none)".to_string(), |k| format!("{k:?}"))
}
