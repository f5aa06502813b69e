//! Memory for the leaves and outputs of a graph computation.

use std::sync::Arc;

use crate::backend::buffer::{BufferRange, TensorRef};
use crate::backend::StreamError;
use crate::graph::{Flags, Graph, NodeId, Op};

/// The tensors bound to a graph's leaves and outputs, checked node by node.
/// The bindings hold their graph, so they cannot be used with another.
#[derive(Clone, Debug)]
pub struct Bindings {
    graph: Arc<Graph>,
    tensors: Vec<Option<TensorRef>>,
}

/// A graph the bindings can hold: a `Graph` (moved into an `Arc`), an
/// `Arc<Graph>`, or a borrowed `&Arc<Graph>` (cloned: the caller keeps its
/// handle to bind the same graph again).
pub trait SharedGraph {
    /// The graph behind one shared handle.
    fn into_shared(self) -> Arc<Graph>;
}

impl SharedGraph for Graph {
    fn into_shared(self) -> Arc<Graph> {
        Arc::new(self)
    }
}

impl SharedGraph for Arc<Graph> {
    fn into_shared(self) -> Arc<Graph> {
        self
    }
}

impl SharedGraph for &Arc<Graph> {
    fn into_shared(self) -> Arc<Graph> {
        self.clone()
    }
}

impl Bindings {
    /// Empty bindings for `graph`: a `Graph`, an `Arc<Graph>` or an
    /// `&Arc<Graph>` (see [`SharedGraph`]).
    pub fn new(graph: impl SharedGraph) -> Self {
        let graph = graph.into_shared();
        let nodes = graph.nodes().len();
        Bindings { graph, tensors: vec![None; nodes] }
    }

    /// The graph these bindings are for.
    pub fn graph(&self) -> &Arc<Graph> {
        &self.graph
    }

    fn node_label(&self, node: NodeId) -> String {
        match self.graph.nodes().get(node.0).and_then(|n| n.name.clone()) {
            Some(name) => name,
            None => format!("node {}", node.0),
        }
    }

    /// Binds `tensor` to `node`, which must be a leaf or an output, with the
    /// same type and shape.
    pub fn bind(&mut self, node: NodeId, tensor: TensorRef) -> Result<&mut Self, StreamError> {
        let label = self.node_label(node);
        let fail = |reason: String| StreamError::Binding { node: label.clone(), reason };
        let n = self.graph.nodes().get(node.0).ok_or_else(|| fail("no such node".into()))?;
        let bindable = matches!(n.op, Op::Leaf) || (n.flags.contains(Flags::OUTPUT) && !n.op.aliases_input());
        if !bindable {
            return Err(fail("only leaves and outputs are bound".into()));
        }
        if n.dtype != tensor.dtype() || n.layout.shape != tensor.shape() {
            return Err(fail(format!(
                "the graph wants {} {:?}, the tensor is {} {:?}",
                n.dtype,
                n.layout.shape,
                tensor.dtype(),
                tensor.shape()
            )));
        }
        self.tensors[node.0] = Some(tensor);
        Ok(self)
    }

    /// Binds by the node's name.
    pub fn bind_name(&mut self, name: &str, tensor: TensorRef) -> Result<&mut Self, StreamError> {
        let node = self.graph.find(name).ok_or_else(|| StreamError::Binding {
            node: name.into(),
            reason: "the graph has no tensor of this name".into(),
        })?;
        self.bind(node, tensor)
    }

    /// The tensor bound to `node`.
    pub fn get(&self, node: NodeId) -> Option<&TensorRef> {
        self.tensors.get(node.0).and_then(|t| t.as_ref())
    }

    /// Checks that every leaf and output of the graph is bound, and that no
    /// written tensor shares a byte with another binding.
    pub fn check_complete(&self) -> Result<(), StreamError> {
        for node in self.graph.bound_nodes() {
            if self.tensors[node.0].is_none() {
                return Err(StreamError::Binding { node: self.node_label(node), reason: "not bound".into() });
            }
        }
        // A written tensor may share no byte with any other binding: the
        // computation reads and writes them at once.
        let (reads, writes) = self.split_accesses();
        for (i, w) in writes.iter().enumerate() {
            let others = reads.iter().chain(writes.iter().enumerate().filter(|&(j, _)| j != i).map(|(_, r)| r));
            for other in others {
                if w.overlaps(other) {
                    return Err(StreamError::Binding {
                        node: "graph".into(),
                        reason: format!(
                            "a written tensor (bytes {:?}) overlaps another binding (bytes {:?}) of the same buffer",
                            w.range(),
                            other.range()
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    /// The byte ranges a computation reads and writes: leaves are read,
    /// written leaves (copy targets) and outputs are written. Ranges of one
    /// buffer that touch are merged (a model's weights in one buffer become
    /// one range), so tracking costs per buffer, not per tensor.
    pub fn accesses(&self) -> (Vec<BufferRange>, Vec<BufferRange>) {
        let (reads, writes) = self.split_accesses();
        (coalesce(reads), coalesce(writes))
    }

    /// Reads and writes, one range per bound tensor.
    fn split_accesses(&self) -> (Vec<BufferRange>, Vec<BufferRange>) {
        let written = self.graph.written_leaves();
        let mut reads = Vec::new();
        let mut writes = Vec::new();
        for (i, t) in self.tensors.iter().enumerate() {
            let Some(t) = t else { continue };
            let node = &self.graph.nodes()[i];
            if written.contains(&NodeId(i)) || !matches!(node.op, Op::Leaf) {
                writes.push(t.byte_range());
            } else {
                reads.push(t.byte_range());
            }
        }
        (reads, writes)
    }
}

/// A graph with complete bindings, checked once and computed any number of
/// times ([`Stream::compute_bound`](crate::backend::Stream::compute_bound)):
/// what a decode loop runs every step without cloning or checking its
/// bindings again, and without collecting their byte ranges again.
#[derive(Clone, Debug)]
pub struct BoundGraph {
    pub(crate) bindings: Arc<Bindings>,
    pub(crate) reads: Vec<BufferRange>,
    pub(crate) writes: Vec<BufferRange>,
}

impl BoundGraph {
    /// Checks that `bindings` binds every leaf and output of its graph.
    pub fn new(bindings: Bindings) -> Result<BoundGraph, StreamError> {
        bindings.check_complete()?;
        let (reads, writes) = bindings.accesses();
        Ok(BoundGraph { bindings: Arc::new(bindings), reads, writes })
    }

    /// The graph.
    pub fn graph(&self) -> &Arc<Graph> {
        &self.bindings.graph
    }

    /// Its bindings.
    pub fn bindings(&self) -> &Bindings {
        &self.bindings
    }
}

/// Merges ranges of the same buffer that overlap or touch.
fn coalesce(mut ranges: Vec<BufferRange>) -> Vec<BufferRange> {
    ranges.sort_by_key(|r| (r.buffer().id(), r.start()));
    let mut out: Vec<BufferRange> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match out.last_mut() {
            Some(last) if last.buffer().same_as(r.buffer()) && r.start() <= last.end() => {
                *last = last.spanning(last.end().max(r.end()));
            }
            _ => out.push(r),
        }
    }
    out
}
