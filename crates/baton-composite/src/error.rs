//! Errors of the composite backend.

use baton_core::backend::{DeviceError, StreamError};
use baton_core::graph::GraphError;

/// What went wrong in the composite backend.
#[derive(Debug, thiserror::Error)]
pub enum CompositeError {
    /// A split descriptor does not fit its tensor.
    #[error("bad split of a {dims:?} tensor: {reason}")]
    BadSplit {
        /// The tensor's dimensions.
        dims: Vec<usize>,
        /// What is wrong.
        reason: String,
    },
    /// The graph uses a tensor in a way the partitioner cannot split.
    #[error("cannot partition node {node} ({op}): {reason}")]
    Partition {
        /// The node's index (or name).
        node: String,
        /// Its op.
        op: &'static str,
        /// Why.
        reason: String,
    },
    /// An operation of the composite stream is not supported for these buffers.
    #[error("{op}: {reason}")]
    Unsupported {
        /// The stream op.
        op: &'static str,
        /// Why.
        reason: String,
    },
    /// An inner device failed to allocate or start.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// An inner stream refused work.
    #[error(transparent)]
    Stream(#[from] StreamError),
    /// A per-device subgraph could not be built.
    #[error(transparent)]
    Graph(#[from] GraphError),
}

impl CompositeError {
    /// As the error of the composite stream `stream`.
    pub fn into_stream_error(self, stream: &str) -> StreamError {
        match self {
            CompositeError::Stream(s) => s,
            CompositeError::Graph(g) => StreamError::Graph(g),
            other => {
                StreamError::Kernel { device: stream.to_string(), op: "composite".into(), message: other.to_string() }
            }
        }
    }
}
