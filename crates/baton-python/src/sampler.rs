//! `_Sampler` and `_Schema`: choosing tokens from rows of logits that
//! Python holds (llama-cpp-python's `sample` and `generate`, where a
//! `logits_processor` may change the row first), with baton-gen's
//! [`Sampler`] and, for a `LlamaGrammar` (a JSON schema or GBNF), the
//! grammar engine's [`Constraint`] (llguidance, as the server's).

use std::sync::Arc;

use baton_gen::constraint::{gbnf_to_lark, Constraint, GrammarSource};
use baton_gen::Sampler;
use baton_model::baton_tokenizer::TokenType;
use baton_model::Tokenizer;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::model::PyModel;
use crate::sampling::PySampling;

/// What a generation's text is held to: a JSON schema or a GBNF grammar,
/// checked now and compiled for a model's vocabulary when a sampler takes
/// it.
#[pyclass(module = "baton._baton", name = "_Schema", frozen)]
pub struct PySchema {
    source: Arc<GrammarSource>,
}

#[pymethods]
impl PySchema {
    /// A JSON schema (a JSON text); text that is not JSON is a
    /// `ValueError`.
    #[new]
    fn new(schema: &str) -> PyResult<PySchema> {
        let value: serde_json::Value =
            serde_json::from_str(schema).map_err(|e| PyValueError::new_err(format!("the schema is not JSON: {e}")))?;
        if !(value.is_object() || value.is_boolean()) {
            return Err(PyValueError::new_err(format!("the schema is an object, not {value}")));
        }
        Ok(PySchema { source: Arc::new(GrammarSource::JsonSchema(value)) })
    }

    /// A GBNF grammar (llama.cpp's format); one that does not read is a
    /// `ValueError` naming the line and the problem.
    #[staticmethod]
    fn gbnf(grammar: &str) -> PyResult<PySchema> {
        gbnf_to_lark(grammar).map_err(|e| PyValueError::new_err(format!("the grammar: {e}")))?;
        Ok(PySchema { source: Arc::new(GrammarSource::Gbnf(grammar.to_string())) })
    }
}

impl PySchema {
    /// The source, for the engine's requests.
    pub fn source(&self) -> &Arc<GrammarSource> {
        &self.source
    }
}

/// Draws tokens with one set of sampling parameters, the history of the
/// tokens accepted for its penalties, and a schema's constraint if given.
#[pyclass(module = "baton._baton", name = "_Sampler")]
pub struct PySampler {
    sampler: Sampler,
    constraint: Option<Constraint>,
    tokenizer: Arc<Tokenizer>,
}

/// A row of float32 logits from its bytes.
fn row_of(bytes: &[u8], vocab: usize) -> PyResult<Vec<f32>> {
    if bytes.len() != vocab * 4 {
        return Err(PyValueError::new_err(format!(
            "a row of logits has {} values (the vocabulary), not {}",
            vocab,
            bytes.len() / 4
        )));
    }
    Ok(bytes.chunks_exact(4).map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]])).collect())
}

#[pymethods]
impl PySampler {
    /// A sampler for `model`'s vocabulary drawing as `sampling` says;
    /// `schema` holds the text to it.
    /// A grammar that does not compile for the vocabulary is a
    /// `ValueError` naming why.
    #[new]
    #[pyo3(signature = (model, sampling, schema))]
    fn new(model: &PyModel, sampling: &PySampling, schema: Option<&PySchema>) -> PyResult<PySampler> {
        let constraint = match schema {
            Some(schema) => {
                let vocabulary = model
                    .grammars()
                    .vocabulary()
                    .map_err(|e| PyValueError::new_err(format!("the grammar engine's vocabulary: {e}")))?;
                let grammar = vocabulary
                    .compile(schema.source())
                    .map_err(|e| PyValueError::new_err(format!("the {}: {e}", schema.source().kind())))?;
                Some(Constraint::grammar(&grammar))
            }
            None => None,
        };
        Ok(PySampler {
            sampler: Sampler::new(sampling.params().clone()),
            constraint,
            tokenizer: model.tokenizer().clone(),
        })
    }

    /// Draws a token from `row` (float32 bytes, one value per vocabulary
    /// token). Under a schema, a token drawn that cannot continue the text
    /// is drawn again among those that can, as the engine does. Does not
    /// accept it: call `accept`.
    fn sample(&mut self, row: &[u8]) -> PyResult<u32> {
        let logits = row_of(row, self.tokenizer.vocab_size())?;
        let failed = |e: baton_gen::SamplingError| PyValueError::new_err(format!("sampling failed: {e}"));
        let token = self.sampler.sample(&logits).map_err(failed)?;
        let tokenizer = &self.tokenizer;
        let Some(constraint) = self.constraint.as_mut().filter(|c| !c.is_free()) else { return Ok(token) };
        if constraint.allows(token, tokenizer) {
            return Ok(token);
        }
        // The logit bias first, so the tokens it bans are not the ones the
        // mask keeps; the sampler adds it again to the logits kept.
        let mut biased = logits.clone();
        for &(id, bias) in self.sampler.params().logit_bias.entries() {
            if let Some(logit) = biased.get_mut(id as usize) {
                *logit += bias;
            }
        }
        if constraint.mask(&mut biased, tokenizer) == 0 {
            let why = constraint.error().unwrap_or_else(|| "no token can continue the text the grammar holds".into());
            return Err(PyValueError::new_err(why));
        }
        let allowed: Vec<f32> =
            logits.iter().zip(&biased).map(|(&l, &b)| if b == f32::NEG_INFINITY { b } else { l }).collect();
        self.sampler.sample(&allowed).map_err(failed)
    }

    /// Takes `token` into the sequence: the penalties' history, and the
    /// schema's reader (a token it cannot take is a `ValueError`).
    fn accept(&mut self, token: u32) -> PyResult<()> {
        if let Some(constraint) = &mut self.constraint {
            if !constraint.is_free() && !constraint.accept(token, &self.tokenizer) {
                return Err(PyValueError::new_err(format!(
                    "token {token} does not continue the text the grammar holds"
                )));
            }
        }
        self.sampler.accept(token);
        Ok(())
    }

    /// Whether the schema's text is whole (the generation ends here).
    #[getter]
    fn complete(&self) -> bool {
        self.constraint.as_ref().is_some_and(Constraint::is_complete)
    }
}

/// Whether `token` ends a generation: the end of text, or a control token
/// (an end of turn), as the engine stops.
pub fn is_end_of_generation(tokenizer: &Tokenizer, token: u32) -> bool {
    Some(token) == tokenizer.eos_id() || tokenizer.token_type(token).is_ok_and(|t| t == TokenType::Control)
}

/// `is_end_of_generation` for Python, on `model`'s vocabulary.
#[pyfunction]
pub fn is_eog(model: &PyModel, token: i64) -> PyResult<bool> {
    let token = u32::try_from(token).map_err(|_| PyTypeError::new_err(format!("{token} is not a token id")))?;
    Ok(is_end_of_generation(model.tokenizer(), token))
}
