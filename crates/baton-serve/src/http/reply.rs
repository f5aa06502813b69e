//! A chat generation run to what the Anthropic Messages and OpenAI
//! Responses answers are built from: the text as it becomes safe to send,
//! the tool call read back from the end, and how the answer ended.
//!
//! As on `/v1/chat/completions` (`answer.rs`), text that is or may become
//! a tool call is held back until it is known which: then sent as text,
//! or read as the call at the end. Log-probabilities are not served here.

use std::future::Future;
use std::sync::Arc;

use baton_gen::openai::Usage;
use baton_model::Tokenizer;

use super::error::ApiError;
use super::generate::{drive_to_stop, Outcome};
use super::params::Job;
use super::tools::{may_be_call, read_call, Call, ToolMode};
use crate::engine::Generation;

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

/// Runs `generation` (of `job`) to its end: the whole text and how it
/// ended.
pub async fn whole_text(
    generation: Generation,
    tokenizer: &Arc<Tokenizer>,
    job: &Job,
) -> Result<(String, Ending), ApiError> {
    let mut text = String::new();
    let ending = run(generation, tokenizer, job, |piece| text.push_str(&piece), std::future::pending()).await?;
    Ok((text, ending))
}

/// Runs `generation` (of `job`), giving `on_text` each piece of text that
/// is safe to send, until it ends or `cancelled` completes.
pub async fn run(
    generation: Generation,
    tokenizer: &Arc<Tokenizer>,
    job: &Job,
    mut on_text: impl FnMut(String),
    cancelled: impl Future<Output = ()>,
) -> Result<Ending, Broken> {
    let prompt = job.request.prompt.len();
    let mut held: Option<String> = job.tools.map(|_| String::new());
    let (outcome, matched) = {
        let hold = |piece: String, _| {
            let piece = match held.as_mut() {
                Some(kept) => {
                    kept.push_str(&piece);
                    if job.tools != Some(ToolMode::Auto) || may_be_call(kept) {
                        return;
                    }
                    held.take().unwrap_or_default()
                }
                None => piece,
            };
            on_text(piece);
        };
        drive_to_stop(generation, tokenizer, job.applied_stops(), prompt, hold, cancelled).await
    };
    let (reason, usage) = match outcome {
        Outcome::Finished { reason, usage, .. } => (reason, usage),
        Outcome::Failed(why) => return Err(Broken::Failed(why)),
        Outcome::Cancelled => return Err(Broken::Cancelled),
    };
    let mut call = None;
    if let Some(text) = held.filter(|text| !text.is_empty()) {
        call = job.tools.and_then(|mode| read_call(&text, mode));
        if call.is_none() {
            on_text(text);
        }
    }
    let stop = match (&call, matched, reason) {
        (Some(_), _, _) => Stop::ToolCall,
        (None, Some(matched), _) => Stop::String(matched),
        (None, None, "length") => Stop::Length,
        (None, None, _) => Stop::EndOfTurn,
    };
    Ok(Ending { call, stop, usage })
}

/// A type name as an error tells it: quoted, or `(none)`.
pub fn type_name(kind: Option<&str>) -> String {
    kind.map_or_else(|| "(none)".to_string(), |k| format!("{k:?}"))
}
