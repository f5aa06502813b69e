//! Errors of devices and streams.

use crate::graph::GraphError;
use crate::shape::ShapeError;
use crate::sync::{Failure, WaitError};
use crate::DType;

/// An error of submitting to, or waiting on, a stream.
#[derive(Clone, Debug, thiserror::Error)]
pub enum StreamError {
    /// The stream failed earlier (sticky, contract rule `E-STICKY`); `cause`
    /// is the first failure, which may come from another stream it waited on.
    #[error("stream {stream} has failed: {cause}")]
    Failed {
        /// The stream's label.
        stream: String,
        /// The first cause.
        cause: Failure,
    },
    /// A host wait ended without the point (failure or timeout).
    #[error(transparent)]
    Wait(#[from] WaitError),
    /// The stream cannot wait on this kind of point without help
    /// (contract rule `W-FOREIGN`); bridge it with a relay.
    #[error(
        "stream {stream} cannot wait natively on {point} (its timeline lives in {domain}); bridge it with a relay"
    )]
    ForeignPoint {
        /// The stream's label.
        stream: String,
        /// The point.
        point: String,
        /// Where the point's counter lives.
        domain: String,
    },
    /// The stream's device cannot address this buffer.
    #[error("stream {stream} cannot access a buffer of device {device}")]
    InaccessibleBuffer {
        /// The stream's label.
        stream: String,
        /// The buffer's device.
        device: String,
    },
    /// A write into weights that a computation has read
    /// ([`Buffer::declare_weights`](crate::backend::Buffer::declare_weights)).
    #[error("buffer {buffer} on {device} holds weights that a computation has read: they are read-only")]
    SealedWeights {
        /// The buffer's id.
        buffer: u64,
        /// The buffer's device.
        device: String,
    },
    /// A byte range lies outside its buffer.
    #[error("bytes {offset}..{end} lie outside a buffer of {len} bytes")]
    OutOfBounds {
        /// Start of the range.
        offset: usize,
        /// End of the range.
        end: usize,
        /// Size of the buffer.
        len: usize,
    },
    /// Host memory and tensor sizes differ.
    #[error("the host buffer has {host} bytes but the tensor has {tensor}")]
    SizeMismatch {
        /// Host buffer bytes.
        host: usize,
        /// Tensor bytes.
        tensor: usize,
    },
    /// Bindings that do not fit the graph.
    #[error("binding of {node}: {reason}")]
    Binding {
        /// The node's name or index.
        node: String,
        /// What is wrong.
        reason: String,
    },
    /// The graph is invalid.
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// The backend cannot run this op with these types.
    #[error("{device} does not support {op} on {dtype}")]
    Unsupported {
        /// The device.
        device: String,
        /// The op's name ([`Op::name`](crate::graph::Op::name)).
        op: &'static str,
        /// The type of its first input.
        dtype: DType,
    },
    /// A tensor's shape or layout is invalid.
    #[error("tensor: {0}")]
    Shape(#[from] ShapeError),
    /// A kernel reported an error while running.
    #[error("{op} failed on {device}: {message}")]
    Kernel {
        /// The device.
        device: String,
        /// The op.
        op: String,
        /// The kernel's message.
        message: String,
    },
    /// The stream's worker is gone (device shut down).
    #[error("stream {0} is closed")]
    Closed(String),
}

/// An error of opening or using a device.
#[derive(Clone, Debug, thiserror::Error)]
pub enum DeviceError {
    /// A device list names no such device.
    #[error("unknown device {name:?}; available: {available}")]
    Unknown {
        /// The name given.
        name: String,
        /// What exists on this machine.
        available: String,
    },
    /// A malformed device list.
    #[error("bad device list {spec:?}: {reason}")]
    BadSpec {
        /// The list given.
        spec: String,
        /// What is wrong.
        reason: String,
    },
    /// Allocation failed.
    #[error("{device} could not allocate {bytes} bytes")]
    OutOfMemory {
        /// The device.
        device: String,
        /// The request.
        bytes: usize,
    },
    /// What the device asked of the OS or its driver failed (a thread that
    /// would not start, a driver call); the backend's own error is the
    /// source.
    #[error("{device}: {action}: {source}")]
    Backend {
        /// The device.
        device: String,
        /// What it was doing.
        action: &'static str,
        /// The backend's error.
        #[source]
        source: std::sync::Arc<dyn std::error::Error + Send + Sync>,
    },
    /// A tensor to allocate has no valid shape.
    #[error("tensor to allocate: {0}")]
    Shape(#[from] ShapeError),
}

impl DeviceError {
    /// [`DeviceError::Backend`]: `device` failed at `action`, with the
    /// backend's own error as the source.
    pub fn backend(
        device: impl Into<String>,
        action: &'static str,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> DeviceError {
        DeviceError::Backend { device: device.into(), action, source: std::sync::Arc::new(source) }
    }
}
