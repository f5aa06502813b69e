//! `_Answers`: the dicts of one request, in OpenAI's shapes as
//! `baton serve` sends them (baton-gen's `openai`, one definition for
//! both), with the log-probabilities of its tokens.

use std::sync::Arc;

use baton_gen::openai::logprobs::LogprobsWriter;
use baton_gen::openai::{Answer, Answers, Kind, Usage};
use baton_gen::TokenLogprobs;
use baton_model::Tokenizer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::generation::LogprobTuple;
use crate::model::PyModel;

/// The answers and chunks of one request: each method gives a dict,
/// built in Rust and read by Python's `json` module, so that it is the
/// server's JSON for the same fields. Log-probabilities go through one
/// writer, so a completion's `text_offset` runs on from chunk to chunk.
#[pyclass(module = "baton._baton", name = "_Answers")]
pub struct PyAnswers {
    answers: Answers,
    writer: LogprobsWriter,
    tokenizer: Arc<Tokenizer>,
}

/// A finish reason by name, as the shapes keep it.
fn finish_reason(name: &str) -> PyResult<&'static str> {
    ["stop", "length", "tool_calls", "cancelled"]
        .into_iter()
        .find(|known| *known == name)
        .ok_or_else(|| PyValueError::new_err(format!("unknown finish reason {name:?}")))
}

/// An answer as a Python dict.
fn to_dict<'py>(py: Python<'py>, answer: &Answer) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?.call_method1("loads", (answer.to_json(),))
}

impl PyAnswers {
    /// The `logprobs` object of `entries`, or null without them.
    fn logprobs(&mut self, entries: Option<Vec<LogprobTuple>>) -> Option<serde_json::Value> {
        let entries: Vec<TokenLogprobs> =
            entries?.into_iter().map(|(token, logprob, top)| TokenLogprobs { token, logprob, top }).collect();
        Some(self.writer.render(&entries, &self.tokenizer))
    }
}

#[pymethods]
impl PyAnswers {
    /// The answers of a chat (`chat`) or completion request `id`, made at
    /// `created` (Unix seconds) by the model named `name`.
    #[new]
    fn new(model: &PyModel, chat: bool, id: String, created: u64, name: String) -> PyAnswers {
        let kind = if chat { Kind::Chat } else { Kind::Completion };
        PyAnswers {
            answers: Answers { kind, id, created, model: name },
            writer: LogprobsWriter::new(chat),
            tokenizer: model.tokenizer().clone(),
        }
    }

    /// Renders `token` first in the next completion `logprobs`, with no
    /// log-probability (a prompt's first token under `echo`).
    fn unscored(&mut self, token: u32) {
        self.writer.unscored(token);
    }

    /// A chat stream's first chunk: the assistant's role (llama-cpp-python
    /// sends no content with it).
    fn opening<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_dict(py, &self.answers.opening(None))
    }

    /// A chunk with `text` (chat: none gives an empty delta), the
    /// `logprobs` of `entries` when given, and `finish` on the last.
    #[pyo3(signature = (text, entries, finish))]
    fn chunk<'py>(
        &mut self,
        py: Python<'py>,
        text: Option<String>,
        entries: Option<Vec<LogprobTuple>>,
        finish: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let finish = finish.as_deref().map(finish_reason).transpose()?;
        let logprobs = self.logprobs(entries);
        to_dict(py, &self.answers.chunk(text, logprobs, finish))
    }

    /// The whole answer: `text`, the `logprobs` of `entries` when given,
    /// how it ended and its token counts.
    #[pyo3(signature = (text, entries, finish, prompt_tokens, completion_tokens, cached_tokens))]
    #[allow(clippy::too_many_arguments)]
    fn whole<'py>(
        &mut self,
        py: Python<'py>,
        text: String,
        entries: Option<Vec<LogprobTuple>>,
        finish: String,
        prompt_tokens: usize,
        completion_tokens: usize,
        cached_tokens: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let finish = finish_reason(&finish)?;
        let logprobs = self.logprobs(entries);
        let usage = Usage::new(prompt_tokens, completion_tokens, cached_tokens);
        to_dict(py, &self.answers.whole(text, logprobs, finish, usage))
    }
}
