//! `_ToolPlan`: `tools` and `tool_choice` of `create_chat_completion`, as
//! `baton serve` reads them (`baton_serve::http::tools`, one definition for
//! both): checked, described to the model in its system message, decoding
//! held to a call's schema, and the calls read back from the answer.

use baton_gen::Message;
use baton_serve::engine::OutputFormat;
use baton_serve::http::tools::{self, ToolMode, ToolPlan};
use baton_serve::http::ApiError;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// The tools a chat may call, and how.
#[pyclass(module = "baton._baton", name = "_ToolPlan", frozen)]
pub struct PyToolPlan {
    plan: ToolPlan,
}

fn refused(error: ApiError) -> PyErr {
    PyValueError::new_err(error.body.message)
}

fn json_of(name: &str, text: Option<String>) -> PyResult<Option<serde_json::Value>> {
    text.map(|t| serde_json::from_str(&t).map_err(|e| PyValueError::new_err(format!("{name} is not JSON: {e}"))))
        .transpose()
}

impl PyToolPlan {
    /// The format decoding is held to.
    pub fn format(&self) -> OutputFormat {
        self.plan.format.clone()
    }
}

#[pymethods]
impl PyToolPlan {
    /// The plan of `tools` and `tool_choice` (JSON texts, OpenAI's
    /// shapes), several calls in one answer when `parallel`; `None` when
    /// no tool may be called. Bad tools are a `ValueError`.
    #[staticmethod]
    fn read(tools: Option<String>, tool_choice: Option<String>, parallel: bool) -> PyResult<Option<PyToolPlan>> {
        let (tools, choice) = (json_of("tools", tools)?, json_of("tool_choice", tool_choice)?);
        // The Python package writes calls in the Hermes form whatever the
        // template (harmony's is served by `baton serve`).
        let plan =
            tools::plan(tools.as_ref(), choice.as_ref(), parallel, tools::CallFormat::Hermes).map_err(refused)?;
        Ok(plan.map(|plan| PyToolPlan { plan }))
    }

    /// Whether the answer must be a call (its prompt then ends with the
    /// call's opening tag, `opening`).
    #[getter]
    fn required(&self) -> bool {
        self.plan.mode == ToolMode::Required
    }

    /// The text a required call's answer opens with.
    #[staticmethod]
    fn opening() -> String {
        format!("{}\n", baton_gen::constraint::TOOL_CALL_OPEN)
    }

    /// The system message's description of the tools.
    #[getter]
    fn preamble(&self) -> String {
        self.plan.preamble.clone()
    }

    /// `messages` (role, content) with the tools described in their system
    /// message (one added in front when they have none).
    fn with_tools(&self, messages: Vec<(String, String)>) -> Vec<(String, String)> {
        let messages = messages.into_iter().map(|(role, content)| Message::new(role, content)).collect();
        tools::with_tools(messages, &self.plan).into_iter().map(|m| (m.role, m.content)).collect()
    }

    /// The calls the answer's `text` holds, as (name, arguments as a JSON
    /// text); `None` when it is not calls (words, or a call cut short).
    fn read_calls(&self, text: &str) -> Option<Vec<(String, String)>> {
        let calls = tools::read_calls(text, self.plan.mode, &self.plan.callable)?;
        Some(calls.into_iter().map(|c| (c.name, c.arguments)).collect())
    }

    /// An assistant message's earlier `tool_calls` (a JSON text), written
    /// as the model writes a call.
    #[staticmethod]
    fn written_calls(calls: &str) -> PyResult<String> {
        let value = json_of("tool_calls", Some(calls.to_string()))?.unwrap_or_default();
        tools::written_calls(&value).map_err(refused)
    }

    /// A tool's result, written as the user turn that carries it.
    #[staticmethod]
    fn written_result(content: &str) -> String {
        tools::written_result(content)
    }
}
