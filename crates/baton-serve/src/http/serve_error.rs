//! Why the server could not run.

use baton_gen::ChatError;

/// Why the server could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The model's chat template does not compile.
    #[error("the model's chat template: {0}")]
    Template(#[from] ChatError),
    /// The listener failed.
    #[error("serving: {0}")]
    Io(#[from] std::io::Error),
    /// The engine stopped for good after a failure (see
    /// [`EngineState::Failed`](crate::engine::EngineState::Failed)); the
    /// server stopped with it.
    #[error("the engine failed, so the server stopped: {0}")]
    EngineFailed(String),
}
