//! The error of one node of a graph, named as the user wrote it.

use baton_core::backend::StreamError;
use baton_core::graph::{Graph, NodeId};

/// An error of one node.
pub(crate) fn node_error(graph: &Graph, device: &str, id: NodeId, message: impl Into<String>) -> StreamError {
    let node = graph.node(id);
    StreamError::Kernel {
        device: device.into(),
        op: match &node.name {
            Some(name) => format!("{} ({name})", node.op.name()),
            None => format!("{} (node {})", node.op.name(), id.0),
        },
        message: message.into(),
    }
}
