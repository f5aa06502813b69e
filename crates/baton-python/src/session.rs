//! `_Session`: one sequence's state for llama-cpp-python's token-level API
//! (`eval`, `generate`, `save_state`/`load_state`).
//!
//! The engine's thread owns the model that `create_completion` runs on; a
//! session runs on that same model, which the engine lends it between its
//! steps on a slot reserved for the session (`Engine::lend`, one lent slot
//! per `_Model`), so the weights are held once. It evaluates the token ids
//! it is given at the positions the caller says (llama-cpp-python's
//! `n_tokens`) and returns their logits; it remembers the tokens its slot
//! holds, so a caller that rewinds (`n_tokens` set lower, `reset()`)
//! continues from there, and a model whose sliding-window rings no longer
//! hold the window of that position evaluates the kept tokens again first.
//! One session per model at a time: a second is a `RuntimeError` while the
//! first lives.
//!
//! A saved state (`_KvState`) is the keys and values of its positions read
//! into host memory, with its tokens and the identity of the model it came
//! from: loading it into a session of another model is a `ValueError`. It
//! pickles (`__reduce__`: its tokens, identity and the keys' and values'
//! bytes, read back by `_kv_state_from_bytes`), so llama-cpp-python's
//! `LlamaState` does.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use baton_model::{Logits, Model, SavedPrefix};
use baton_serve::engine::Engine;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::{submit_error, BatonError};
use crate::model::PyModel;

/// One sequence on its model's reserved slot.
#[pyclass(module = "baton._baton", name = "_Session", frozen)]
pub struct PySession {
    engine: Engine,
    /// Set while a session of the model lives (the model's).
    open: Arc<AtomicBool>,
    /// The tokens the slot holds, from position 0.
    held: Mutex<Vec<u32>>,
    identity: String,
    context: usize,
    vocab: usize,
    batch: usize,
}

/// A session's saved state: its tokens and their keys and values (a copy
/// in host memory).
#[pyclass(module = "baton._baton", name = "_KvState", frozen)]
pub struct PyKvState {
    saved: Option<Arc<SavedPrefix>>,
    tokens: Vec<u32>,
    identity: String,
}

impl PySession {
    fn lock(&self) -> PyResult<MutexGuard<'_, Vec<u32>>> {
        self.held.lock().map_err(|_| PyRuntimeError::new_err("the session's lock was poisoned by a panic"))
    }

    /// Runs `work` with the model and the session's slot on the engine's
    /// thread and waits for it (the caller releases the GIL). A model error
    /// comes back as the `String` of `work`'s `Err`, a `ValueError`.
    fn on_engine<R, F>(&self, work: F) -> PyResult<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut Model, usize) -> Result<R, String> + Send + 'static,
    {
        let ticket = self.engine.lend(0, work).map_err(submit_error)?;
        match ticket.blocking_wait() {
            Ok(answer) => answer.map_err(PyValueError::new_err),
            Err(why) => Err(BatonError::new_err(format!("the token-level session failed: {why}"))),
        }
    }
}

impl Drop for PySession {
    fn drop(&mut self) {
        self.open.store(false, Ordering::Release);
    }
}

/// Evaluates `tokens` at positions `past..` of `slot`, a batch at a time;
/// the logits of every token (`all`) or of the last.
fn evaluate(model: &mut Model, slot: usize, tokens: &[u32], past: usize, all: bool) -> Result<Vec<f32>, String> {
    let batch = model.batch();
    let mut out = Vec::new();
    let which = if all { Logits::All } else { Logits::Last };
    for (i, chunk) in tokens.chunks(batch).enumerate() {
        let logits = model.eval_slot(slot, chunk, past + i * batch, which).map_err(|e| e.to_string())?;
        if !all {
            out.clear();
        }
        out.extend_from_slice(logits);
    }
    Ok(out)
}

fn bytes_of(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_ne_bytes()).collect()
}

#[pymethods]
impl PySession {
    /// A session on `model`'s reserved slot; a `RuntimeError` while
    /// another session of `model` lives.
    #[staticmethod]
    fn open(model: &PyModel) -> PyResult<PySession> {
        let open = model.session_flag();
        if open.swap(true, Ordering::AcqRel) {
            return Err(PyRuntimeError::new_err(
                "this model already has a token-level session: one Llama's token API at a time (close the other)",
            ));
        }
        let (identity, batch) = model.session_facts();
        let info = model.engine().info();
        let (context, vocab) = (info.context, info.vocab);
        let engine = model.engine().clone();
        Ok(PySession { engine, open, held: Mutex::new(Vec::new()), identity, context, vocab, batch })
    }

    /// Positions of the sequence.
    #[getter]
    fn n_ctx(&self) -> usize {
        self.context
    }

    /// Most tokens one evaluation reads.
    #[getter]
    fn n_batch(&self) -> usize {
        self.batch
    }

    /// What model it runs (its file, size and cache's shape).
    #[getter]
    fn identity(&self) -> String {
        self.identity.clone()
    }

    /// Evaluates `tokens` at positions `past..past + len`, after the first
    /// `past` tokens it holds (those after are forgotten); returns their
    /// logits as float32 bytes, a row of the vocabulary for every token
    /// (`all`) or for the last. A `past` beyond the tokens it holds, a
    /// sequence past its context or an id outside the vocabulary is a
    /// `ValueError`; nothing is evaluated then.
    fn eval<'py>(&self, py: Python<'py>, past: usize, tokens: Vec<u32>, all: bool) -> PyResult<Bound<'py, PyBytes>> {
        if tokens.is_empty() {
            return Err(PyValueError::new_err("no tokens to evaluate"));
        }
        if let Some(&id) = tokens.iter().find(|&&id| id as usize >= self.vocab) {
            return Err(PyValueError::new_err(format!("token id {id} is outside the vocabulary of {}", self.vocab)));
        }
        if past.checked_add(tokens.len()).is_none_or(|end| end > self.context) {
            return Err(PyValueError::new_err(format!(
                "evaluating {} tokens after {past} runs past the context of {} (n_ctx)",
                tokens.len(),
                self.context
            )));
        }
        let batch = self.batch;
        py.detach(|| -> PyResult<()> {
            let mut held = self.lock()?;
            if past > held.len() {
                return Err(PyValueError::new_err(format!(
                    "n_tokens is {past} but the session holds {} evaluated tokens",
                    held.len()
                )));
            }
            held.truncate(past);
            if past > 0 {
                // A sliding-window ring that went further: the kept tokens again.
                let kept = held.clone();
                self.on_engine(move |model, slot| match model.resumable(slot, past) {
                    true => Ok(()),
                    false => evaluate(model, slot, &kept, 0, false).map(drop),
                })?;
            }
            Ok(())
        })?;
        // A batch at a time, Ctrl-C seen between batches: an interrupted
        // eval leaves the session holding what it evaluated, which the
        // caller's `past` (not advanced) cuts back at its next call.
        let mut logits = Vec::new();
        let chunks = tokens.len().div_ceil(batch);
        for (i, chunk) in tokens.chunks(batch).enumerate() {
            let start = past + i * batch;
            let rows = py.detach(|| -> PyResult<Vec<f32>> {
                let mut held = self.lock()?;
                if held.len() != start {
                    return Err(PyRuntimeError::new_err("another thread changed the session during this eval"));
                }
                let owned = chunk.to_vec();
                let rows = self.on_engine(move |model, slot| evaluate(model, slot, &owned, start, all))?;
                held.extend_from_slice(chunk);
                Ok(rows)
            })?;
            if !all {
                logits.clear();
            }
            logits.extend(rows);
            if i + 1 < chunks {
                py.check_signals()?;
            }
        }
        Ok(PyBytes::new(py, &bytes_of(&logits)))
    }

    /// The first `n` tokens it holds, with their keys and values read into
    /// host memory (a copy).
    fn save(&self, py: Python<'_>, n: usize) -> PyResult<PyKvState> {
        py.detach(|| {
            let held = self.lock()?;
            if n > held.len() {
                return Err(PyValueError::new_err(format!("a state of {n} tokens asked of a session holding {}", held.len())));
            }
            let saved = match n {
                0 => None,
                _ => match self.on_engine(move |model, slot| model.save_prefix(slot, n).map_err(|e| e.to_string()))? {
                    Some(saved) => Some(Arc::new(saved)),
                    None => {
                        return Err(PyValueError::new_err(
                            "saving a state is not served for this model's placement (tensor parallel or several processes)",
                        ))
                    }
                },
            };
            Ok(PyKvState { saved, tokens: held[..n].to_vec(), identity: self.identity.clone() })
        })
    }

    /// Writes `state` (saved from a session of the same model) into the
    /// slot: the session then holds its tokens.
    fn restore(&self, py: Python<'_>, state: &PyKvState) -> PyResult<()> {
        if state.identity != self.identity {
            return Err(PyValueError::new_err(format!(
                "a state saved from another model cannot be loaded: it is of {}, this model is {}",
                state.identity, self.identity
            )));
        }
        if state.tokens.len() > self.context {
            return Err(PyValueError::new_err(format!(
                "a state of {} tokens does not fit the context of {}",
                state.tokens.len(),
                self.context
            )));
        }
        py.detach(|| {
            let mut held = self.lock()?;
            held.clear();
            if let Some(saved) = state.saved.clone() {
                let written =
                    self.on_engine(move |model, slot| model.restore_prefix(slot, &saved).map_err(|e| e.to_string()))?;
                if !written {
                    return Err(PyValueError::new_err("loading a state is not served for this model's placement"));
                }
            }
            *held = state.tokens.clone();
            Ok(())
        })
    }
}

#[pymethods]
impl PyKvState {
    /// The tokens it holds.
    #[getter]
    fn tokens(&self) -> Vec<u32> {
        self.tokens.clone()
    }

    /// Host bytes its keys and values take.
    #[getter]
    fn nbytes(&self) -> usize {
        self.saved.as_ref().map_or(0, |s| s.bytes())
    }

    /// The model it was saved from.
    #[getter]
    fn identity(&self) -> String {
        self.identity.clone()
    }

    fn __repr__(&self) -> String {
        format!("KvState({} tokens, {} bytes, of {})", self.tokens.len(), self.nbytes(), self.identity)
    }

    /// How pickle rebuilds it: `_kv_state_from_bytes(tokens, identity,
    /// bytes or None)`.
    #[allow(clippy::type_complexity)]
    fn __reduce__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyAny>, (Vec<u32>, String, Option<Bound<'py, PyBytes>>))> {
        let rebuild = py.import("baton._baton")?.getattr("_kv_state_from_bytes")?;
        let bytes = self.saved.as_ref().map(|saved| PyBytes::new(py, &saved.to_bytes()));
        Ok((rebuild, (self.tokens.clone(), self.identity.clone(), bytes)))
    }
}

/// A saved state from what `_KvState.__reduce__` gave (unpickling); bytes
/// that do not read as a saved state, or a state without keys and values
/// that holds tokens, are a `ValueError`.
#[pyfunction(name = "_kv_state_from_bytes")]
pub fn kv_state_from_bytes(tokens: Vec<u32>, identity: String, bytes: Option<&[u8]>) -> PyResult<PyKvState> {
    let saved = bytes.map(SavedPrefix::from_bytes).transpose().map_err(|e| PyValueError::new_err(e.to_string()))?;
    if saved.as_ref().map_or(0, |s| s.len()) != tokens.len() {
        return Err(PyValueError::new_err(format!(
            "a saved state of {} tokens holds keys and values of {} positions",
            tokens.len(),
            saved.as_ref().map_or(0, |s| s.len())
        )));
    }
    Ok(PyKvState { saved: saved.map(Arc::new), tokens, identity })
}
