//! `_Sampling`: how tokens are drawn, made once in Python and given to
//! both the engine's generations and the token-level sampler.

use baton_gen::{LogitBias, SamplingParams};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// How tokens are drawn: baton-gen's [`SamplingParams`], checked when
/// made (a bad value is a `ValueError` naming it).
#[pyclass(module = "baton._baton", name = "_Sampling", frozen)]
pub struct PySampling {
    params: SamplingParams,
}

impl PySampling {
    /// The parameters.
    pub fn params(&self) -> &SamplingParams {
        &self.params
    }
}

#[pymethods]
impl PySampling {
    /// The fields are [`SamplingParams`]' own; `logit_bias` as (token,
    /// bias) pairs.
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        temperature: f32,
        top_k: usize,
        top_p: f32,
        min_p: f32,
        repeat_penalty: f32,
        repeat_last_n: usize,
        presence_penalty: f32,
        frequency_penalty: f32,
        seed: u64,
        logit_bias: Vec<(u32, f32)>,
    ) -> PyResult<PySampling> {
        let params = SamplingParams {
            temperature,
            top_k,
            top_p,
            min_p,
            repeat_penalty,
            repeat_last_n,
            presence_penalty,
            frequency_penalty,
            seed,
            logit_bias: LogitBias::new(logit_bias),
        };
        params.validate().map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(PySampling { params })
    }
}
