//! `_ToolPlan`: the tools a chat may call, as `baton serve` plans them
//! (`baton_serve::http::tools`, one definition for both; the plan comes
//! with the chat's prompt, `_Model.chat`): decoding held to a call in the
//! model's own format (its chat template's: Hermes, harmony, Gemma 4's,
//! Qwen 3.5's XML), and the calls read back from the answer.

use baton_serve::engine::OutputFormat;
use baton_serve::http::tools::{self, ToolMode, ToolPlan};
use pyo3::prelude::*;

/// The tools a chat may call, and how.
#[pyclass(module = "baton._baton", name = "_ToolPlan", frozen)]
pub struct PyToolPlan {
    plan: ToolPlan,
}

impl PyToolPlan {
    /// The plan, for Python.
    pub fn new(plan: ToolPlan) -> PyToolPlan {
        PyToolPlan { plan }
    }

    /// The format decoding is held to.
    pub fn format(&self) -> OutputFormat {
        self.plan.format.clone()
    }
}

#[pymethods]
impl PyToolPlan {
    /// Whether the answer must be a call (its prompt then ends with the
    /// call's opening).
    #[getter]
    fn required(&self) -> bool {
        self.plan.mode == ToolMode::Required
    }

    /// The calls the answer's `text` holds, as (name, arguments as a JSON
    /// text); `None` when it is not calls (words, or a call cut short).
    fn read_calls(&self, text: &str) -> Option<Vec<(String, String)>> {
        let calls = tools::read_calls(text, self.plan.mode, &self.plan.callable)?;
        Some(calls.into_iter().map(|c| (c.name, c.arguments)).collect())
    }
}
