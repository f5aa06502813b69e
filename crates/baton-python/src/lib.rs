//! The native half of Baton's Python package (`baton._baton`).
//!
//! The Python half (`python/baton/`) gives llama-cpp-python's `Llama`
//! shapes (keyword arguments, OpenAI-shaped dicts, iterators for streams);
//! this half loads the model and runs it on `baton-serve`'s engine, which
//! owns the model on its own thread. A generation is a Python iterator
//! whose `__next__` waits for the engine's next event with the GIL
//! released, waking every [`generation::SIGNAL_TICK`] to let Python raise
//! `KeyboardInterrupt`; dropping or cancelling it frees its sequence before
//! the engine's next step, so an interrupted generation leaves the model
//! usable. The runtime's devices, streams and points are there too
//! (`runtime.rs`).
#![deny(missing_docs)]

mod answers;
mod errors;
mod generation;
mod model;
mod runtime;
mod sampler;
mod sampling;
mod session;
mod tools;

use pyo3::prelude::*;

/// The module `baton._baton`.
#[pymodule]
fn _baton(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<model::PyModel>()?;
    m.add_class::<generation::PyGeneration>()?;
    m.add_class::<answers::PyAnswers>()?;
    m.add_class::<session::PySession>()?;
    m.add_class::<session::PyKvState>()?;
    m.add_function(wrap_pyfunction!(session::kv_state_from_bytes, m)?)?;
    m.add_class::<sampling::PySampling>()?;
    m.add_class::<sampler::PySampler>()?;
    m.add_class::<sampler::PySchema>()?;
    m.add_class::<tools::PyToolPlan>()?;
    m.add_function(wrap_pyfunction!(sampler::is_eog, m)?)?;
    m.add_class::<runtime::PyDevice>()?;
    m.add_class::<runtime::PyTensor>()?;
    m.add_class::<runtime::PyStream>()?;
    m.add_class::<runtime::PyPoint>()?;
    m.add_class::<runtime::PyRead>()?;
    m.add_function(wrap_pyfunction!(runtime::devices, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::device_list, m)?)?;
    errors::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
