//! Baton's Python exceptions. Every one carries the Rust error's text.
//!
//! - `BatonError`: the base of them all.
//! - `ModelError`: a model that cannot be found, fetched, loaded or run.
//! - `DeviceError`: a device that fails to open.
//! - `StreamError`: work a stream refused (a tensor of another device, a
//!   size that does not match) or that failed (a point never reached).
//!
//! A bad argument (a prompt too long for the context, a temperature below
//! zero, an unknown split mode) is a `ValueError`, as Python code expects.

use baton_load::LoadError;
use baton_serve::engine::SubmitError;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;

create_exception!(_baton, BatonError, PyException, "The base of Baton's errors.");
create_exception!(_baton, ModelError, BatonError, "A model that cannot be found, fetched, loaded or run.");
create_exception!(_baton, DeviceError, BatonError, "A device that cannot be opened.");
create_exception!(_baton, StreamError, BatonError, "Work on a stream that was refused or failed.");

/// Adds the exception types to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("BatonError", py.get_type::<BatonError>())?;
    m.add("ModelError", py.get_type::<ModelError>())?;
    m.add("DeviceError", py.get_type::<DeviceError>())?;
    m.add("StreamError", py.get_type::<StreamError>())?;
    Ok(())
}

/// The text of `error` and of every cause under it.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// A loading failure as the Python exception that fits it.
pub fn load_error(error: LoadError) -> PyErr {
    let text = chain(&error);
    match error {
        LoadError::NoDevices | LoadError::UnknownDevice(_) | LoadError::UnknownSplit(_) | LoadError::TensorSplit(_) => {
            PyValueError::new_err(text)
        }
        LoadError::Open { .. } | LoadError::Composite(_) => DeviceError::new_err(text),
        LoadError::Model { .. } | LoadError::WarmUp(_) => ModelError::new_err(text),
    }
}

/// A model-level failure (fetching, tokenizing, templates).
pub fn model_error(error: &dyn std::error::Error) -> PyErr {
    ModelError::new_err(chain(error))
}

/// A stream's refusal or failure.
pub fn stream_error(error: &dyn std::error::Error) -> PyErr {
    StreamError::new_err(chain(error))
}

/// A refused request: the caller's mistake is a `ValueError`, the
/// engine's state a `BatonError`.
pub fn submit_error(error: SubmitError) -> PyErr {
    let text = chain(&error);
    match error {
        SubmitError::QueueFull { .. } | SubmitError::ShuttingDown | SubmitError::EngineFailed(_) => {
            BatonError::new_err(text)
        }
        _ => PyValueError::new_err(text),
    }
}
