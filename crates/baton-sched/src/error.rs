//! Errors of planning and running.

use baton_core::backend::{DeviceError, StreamError};
use baton_core::graph::GraphError;

/// What went wrong in the scheduler.
#[derive(Debug, thiserror::Error)]
pub enum SchedError {
    /// A node could not be placed on any device.
    #[error("node {node} ({op}) has no device: {reason}")]
    Placement {
        /// The node's index or name.
        node: String,
        /// Its op.
        op: &'static str,
        /// Why.
        reason: String,
    },
    /// A tensor that must cross devices is not contiguous.
    #[error("{node} crosses from {from} to {to} but is a strided view; make it contiguous() first")]
    StridedCrossing {
        /// The node.
        node: String,
        /// Producing device.
        from: String,
        /// Consuming device.
        to: String,
    },
    /// A binding is missing or on a device the plan did not expect.
    #[error("binding of {node}: {reason}")]
    Binding {
        /// The node.
        node: String,
        /// What is wrong.
        reason: String,
    },
    /// The graph could not be cut.
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// A device failed.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// A stream failed.
    #[error(transparent)]
    Stream(#[from] StreamError),
    /// An output could not be shared with the other processes.
    #[error("sharing the output of device {owner} with the other processes: {cause}")]
    Shared {
        /// The device that computed it.
        owner: usize,
        /// Why.
        cause: String,
    },
    /// A send or receive to another process could not be queued.
    #[error("edge from device {from} to device {to}: {cause}")]
    Remote {
        /// Producing device index.
        from: usize,
        /// Consuming device index.
        to: usize,
        /// Why.
        cause: String,
    },
}
