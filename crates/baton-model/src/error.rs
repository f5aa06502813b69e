//! Errors of loading and running a model.

use baton_composite::CompositeError;
use baton_core::backend::{DeviceError, StreamError};
use baton_core::graph::GraphError;
use baton_sched::SchedError;

/// What went wrong with a model.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The GGUF file could not be read.
    #[error(transparent)]
    Read(#[from] baton_gguf::ReadError),
    /// A metadata key is missing or has the wrong type.
    #[error(transparent)]
    Metadata(#[from] baton_gguf::MetadataError),
    /// The tokenizer metadata is invalid.
    #[error(transparent)]
    Tokenizer(#[from] baton_tokenizer::TokenizerError),
    /// The architecture is not one Baton runs.
    #[error("architecture {0:?} is not supported (supported: llama, qwen2, qwen3, gemma3)")]
    Architecture(String),
    /// A hyper-parameter is inconsistent.
    #[error("bad hyper-parameters: {0}")]
    Config(String),
    /// A tensor the architecture needs is absent.
    #[error("the model has no tensor {0:?}")]
    MissingTensor(String),
    /// A tensor has the wrong shape.
    #[error("tensor {name:?} has shape {found:?}, expected {expected:?}")]
    TensorShape {
        /// The tensor.
        name: String,
        /// Its shape (outermost first).
        found: Vec<usize>,
        /// What the hyper-parameters imply.
        expected: Vec<usize>,
    },
    /// A tensor's type is not supported yet.
    #[error(
        "tensor {name:?} has type {type_name}, which Baton does not support yet (supported: {supported})",
        supported = weight_type_names()
    )]
    UnsupportedType {
        /// The tensor.
        name: String,
        /// The GGUF type's name.
        type_name: String,
    },
    /// A paged cache has no free block for a step (nothing of the step was
    /// queued; a sequence that gives back its blocks makes room).
    #[error(transparent)]
    PoolFull(#[from] PoolFull),
    /// The request does not fit the context.
    #[error("{needed} positions do not fit the context of {context}")]
    ContextFull {
        /// Positions the request needs.
        needed: usize,
        /// The context size.
        context: usize,
    },
    /// An evaluation from `past` after a longer one in the same slot went
    /// more than `reach` positions beyond it: the sliding-window layers'
    /// rings no longer hold the window before `past`.
    #[error(
        "slot {slot}: the sliding-window layers' cache no longer holds the positions before {past} \
         (a later run overwrote them; evaluate from position 0, or go back at most {reach} positions)"
    )]
    RingRewound {
        /// The slot.
        slot: usize,
        /// Where the evaluation started.
        past: usize,
        /// How far back from the furthest position written an evaluation
        /// may start.
        reach: usize,
    },
    /// An evaluation from `past` in a slot whose recurrent state (a hybrid
    /// model's) holds `at` positions: it can go on from there or start
    /// again from 0, not resume anywhere else.
    #[error(
        "slot {slot}: the recurrent layers' state holds {at} positions, so an evaluation goes on from {at} \
         or starts from 0, not from {past}"
    )]
    StateRewound {
        /// The slot.
        slot: usize,
        /// Where the evaluation started.
        past: usize,
        /// The positions its state holds.
        at: usize,
    },
    /// A cut back of a hybrid model's slot to `len` positions that its
    /// last step kept no recurrent state for (only the positions of that
    /// step's rows, while no later step overwrote them: `kept`).
    #[error(
        "slot {slot}: the recurrent layers' state holds {at} positions and its last step kept the states of \
         positions {kept:?}, so it cannot be cut back to {len}"
    )]
    NotKept {
        /// The slot.
        slot: usize,
        /// The positions asked for.
        len: usize,
        /// The positions its state holds.
        at: usize,
        /// The positions it can be cut back to.
        kept: std::ops::Range<usize>,
    },
    /// A bad argument (empty prompt, token id out of range…).
    #[error("{0}")]
    Input(String),
    /// The device failed.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// A stream failed.
    #[error(transparent)]
    Stream(#[from] StreamError),
    /// The graph could not be built.
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// The scheduler could not plan or run the graph (its stream, device
    /// and graph errors become [`Stream`](Self::Stream),
    /// [`Device`](Self::Device) and [`Graph`](Self::Graph)).
    #[error("scheduling: {0}")]
    Schedule(#[source] SchedError),
    /// The weights could not be split over the devices of a tensor-parallel
    /// model.
    #[error("tensor parallel: {0}")]
    TensorParallel(#[from] CompositeError),
}

impl From<SchedError> for ModelError {
    fn from(e: SchedError) -> ModelError {
        match e {
            SchedError::Stream(s) => ModelError::Stream(s),
            SchedError::Device(d) => ModelError::Device(d),
            SchedError::Graph(g) => ModelError::Graph(g),
            other => ModelError::Schedule(other),
        }
    }
}

impl<B> From<baton_core::backend::PendingError<B>> for ModelError {
    /// A refused or failed host transfer: its stream error (the loader and
    /// the evaluator own the buffers they lend, so nothing of the caller's
    /// is dropped here).
    fn from(e: baton_core::backend::PendingError<B>) -> ModelError {
        ModelError::Stream(e.error)
    }
}

/// The names of the weight types the loader accepts ([`baton_kernels::WEIGHT_TYPES`]),
/// comma-separated, for messages.
fn weight_type_names() -> String {
    baton_kernels::WEIGHT_TYPES.iter().map(|t| t.name()).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsupported_type_message_names_every_weight_type() {
        let message = ModelError::UnsupportedType { name: "w".into(), type_name: "q2_k".into() }.to_string();
        for dtype in baton_kernels::WEIGHT_TYPES {
            assert!(message.contains(dtype.name()), "{} missing from {message:?}", dtype.name());
        }
    }
}

/// The pool ran out: a step needs `needed` blocks more than are free.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the KV pool of {blocks} blocks of 64 positions has {free} free; this step needs {needed}")]
pub struct PoolFull {
    /// Blocks of the pool.
    pub blocks: usize,
    /// Free now.
    pub free: usize,
    /// Needed by the step.
    pub needed: usize,
}
