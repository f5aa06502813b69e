//! `_Generation`: one request's text as a Python iterator.

use std::sync::Arc;
use std::time::Duration;

use baton_model::Tokenizer;
use baton_serve::engine::{Generation, TokenLogprobs};
use baton_serve::text::{Outcome, TextStream};
use pyo3::prelude::*;

use crate::errors::{model_error, BatonError};

/// How long `__next__` waits with the GIL released before it lets Python
/// run its signal handlers (Ctrl-C) and waits again.
pub const SIGNAL_TICK: Duration = Duration::from_millis(50);

/// A token's log-probability for Python: `(token, logprob, [(token,
/// logprob), ...])`, the alternatives most likely first.
pub type LogprobTuple = (u32, f32, Vec<(u32, f32)>);

struct Running {
    generation: Generation,
    stream: TextStream,
    /// Drives the timed wait for the next event (no threads of its own).
    runtime: tokio::runtime::Runtime,
}

/// How the generation ended, once it has.
#[derive(Default)]
struct Ended {
    reason: Option<&'static str>,
    prompt_tokens: usize,
    completion_tokens: usize,
    cached_tokens: usize,
}

/// A running generation: iterating it gives `(text, logprobs)` pieces
/// (text never empty, logprobs those of the tokens behind it when asked
/// for); its end is read from `finish_reason` and the token counts.
/// Dropping it, or `cancel()`, frees its sequence.
#[pyclass(module = "baton._baton", name = "_Generation")]
pub struct PyGeneration {
    running: Option<Running>,
    ended: Ended,
    /// Log-probabilities that came after the last text (the stream's end).
    trailing: Vec<TokenLogprobs>,
}

fn tuples(entries: Vec<TokenLogprobs>) -> Vec<LogprobTuple> {
    entries.into_iter().map(|e| (e.token, e.logprob, e.top)).collect()
}

impl PyGeneration {
    /// Wraps a submitted generation.
    pub fn new(
        generation: Generation,
        tokenizer: &Arc<Tokenizer>,
        stops: Vec<String>,
        prompt_tokens: usize,
    ) -> PyResult<PyGeneration> {
        let runtime =
            tokio::runtime::Builder::new_current_thread().enable_time().build().map_err(|e| model_error(&e))?;
        let stream = TextStream::new(tokenizer, stops, prompt_tokens);
        Ok(PyGeneration {
            running: Some(Running { generation, stream, runtime }),
            ended: Ended { prompt_tokens, ..Ended::default() },
            trailing: Vec::new(),
        })
    }
}

#[pymethods]
impl PyGeneration {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next piece of text; `None` (StopIteration) at the end. A failed
    /// generation raises `BatonError`; Ctrl-C raises `KeyboardInterrupt`
    /// (the caller then drops or cancels the generation).
    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<(String, Vec<LogprobTuple>)>> {
        loop {
            let Some(running) = self.running.as_mut() else { return Ok(None) };
            let waited = py.detach(|| {
                let Running { generation, runtime, .. } = running;
                runtime.block_on(async { tokio::time::timeout(SIGNAL_TICK, generation.next()).await })
            });
            let Ok(event) = waited else {
                py.check_signals()?;
                continue;
            };
            let pushed = running.stream.push(event);
            if let Some(end) = pushed.end {
                self.running = None;
                match end {
                    Outcome::Finished { reason, usage, logprobs, .. } => {
                        self.ended = Ended {
                            reason: Some(reason),
                            prompt_tokens: usage.prompt_tokens,
                            completion_tokens: usage.completion_tokens,
                            cached_tokens: usage.prompt_tokens_details.cached_tokens,
                        };
                        self.trailing = logprobs;
                    }
                    Outcome::Failed(why) => return Err(BatonError::new_err(format!("the generation failed: {why}"))),
                    Outcome::Cancelled => {}
                }
            }
            if let Some((text, logprobs)) = pushed.text {
                return Ok(Some((text, tuples(logprobs))));
            }
        }
    }

    /// Stops the generation (its sequence is freed before the engine's
    /// next step); iterating it afterwards gives nothing.
    fn cancel(&mut self) {
        if self.running.take().is_some() {
            self.ended.reason = Some("cancelled");
        }
    }

    /// `stop`, `length` or `cancelled` once the generation has ended, else
    /// `None`.
    #[getter]
    fn finish_reason(&self) -> Option<&'static str> {
        self.ended.reason
    }

    /// Tokens of the prompt.
    #[getter]
    fn prompt_tokens(&self) -> usize {
        self.ended.prompt_tokens
    }

    /// Tokens generated (known at the end).
    #[getter]
    fn completion_tokens(&self) -> usize {
        self.ended.completion_tokens
    }

    /// Prompt tokens whose keys and values came from the prefix cache.
    #[getter]
    fn cached_tokens(&self) -> usize {
        self.ended.cached_tokens
    }

    /// Log-probabilities of tokens generated after the last text (at the
    /// end: an end-of-generation token is not sent as text).
    fn trailing_logprobs(&mut self) -> Vec<LogprobTuple> {
        tuples(std::mem::take(&mut self.trailing))
    }
}
