//! Graphs of tensor operations with named tensors.
//!
//! A [`Graph`] is built node by node; every node is a tensor with a type, a
//! layout, an optional name and flags. Nodes refer only to earlier nodes, so
//! the node order is a topological order. Leaves are bound to memory when the
//! graph is computed; every other node's memory belongs to the backend,
//! except nodes flagged [`Flags::OUTPUT`], which are bound too so that their
//! results land where the caller reads them.

pub mod arena;
mod attention;
mod builder;
mod experts;
mod op;
pub mod plan_cache;
mod recurrent;

use std::collections::HashMap;

pub use op::{Op, RopeMode, Yarn, ATTENTION_BLOCK};

use crate::shape::{Layout, ShapeError};
use crate::DType;

/// Index of a node in its graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub usize);

/// Where a recurrent op also keeps the state after chosen rows (see
/// [`Op::SsmConv`]): `kept`, a state leaf of `R` rows each of one slot's
/// state, and `keep [T] i32`, for each row the row of `kept` that receives
/// the state after it (-1: none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeptStates {
    /// The rows of kept states (a state leaf, `[R, ...]` as one slot).
    pub kept: NodeId,
    /// Per row of the op, its row of `kept`, or -1.
    pub keep: NodeId,
}

/// Where each query row's cache lies when `k` and `v` hold several (see
/// [`Op::Attention`]'s slots and blocks).
#[derive(Clone, Copy, Debug)]
pub struct SlotCaches {
    /// `[T]` i32: the sequence each query row reads.
    pub slots: NodeId,
    /// Rows of each sequence's cache.
    pub rows: usize,
    /// `[Q, rows / ATTENTION_BLOCK]` i32: each sequence's blocks of the
    /// pool, when the caches are blocks of one.
    pub table: Option<NodeId>,
}

/// What a tensor is to its graph.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Flags(u8);

impl Flags {
    /// No flag.
    pub const NONE: Flags = Flags(0);
    /// Fed by the caller for each run.
    pub const INPUT: Flags = Flags(1);
    /// Read back by the caller; bound to caller memory.
    pub const OUTPUT: Flags = Flags(2);
    /// A model weight: read-only, lives as long as the model.
    pub const WEIGHT: Flags = Flags(4);
    /// Persistent state updated in place (the KV cache).
    pub const STATE: Flags = Flags(8);

    /// Whether every flag of `other` is set.
    pub fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl std::ops::BitOr for Flags {
    type Output = Flags;
    fn bitor(self, rhs: Flags) -> Flags {
        Flags(self.0 | rhs.0)
    }
}

/// One tensor of a graph.
#[derive(Clone, Debug)]
pub struct Node {
    /// How it is computed.
    pub op: Op,
    /// Its inputs, in the order the op states.
    pub inputs: Vec<NodeId>,
    /// Element type.
    pub dtype: DType,
    /// Layout within its storage (a view's offset is relative to the storage
    /// of the node it aliases, transitively).
    pub layout: Layout,
    /// Name, unique in the graph when set.
    pub name: Option<String>,
    /// Role flags.
    pub flags: Flags,
    /// The placement group the builder put it in (for example a model's
    /// layer), which a scheduler maps to a device; `None` leaves placement
    /// to the scheduler's rules.
    pub group: Option<u32>,
}

/// Errors of graph construction.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum GraphError {
    /// A shape rule of an op is broken.
    #[error("{op}: {source}")]
    Shape {
        /// The op being added.
        op: &'static str,
        /// What is wrong.
        source: ShapeError,
    },
    /// An op does not accept a type.
    #[error("{op} does not take {dtype} as input {input}")]
    Type {
        /// The op.
        op: &'static str,
        /// The type given.
        dtype: DType,
        /// Which input.
        input: usize,
    },
    /// A node id from another graph, or a later node.
    #[error("node {0:?} does not exist in this graph")]
    UnknownNode(NodeId),
    /// Two tensors with one name.
    #[error("the name {0:?} is used twice")]
    DuplicateName(String),
    /// `CopyInto` or `ScatterRows` into something that is not a view of a leaf.
    #[error("copy_into and scatter_rows must write into a leaf or a view of one")]
    CopyTargetNotLeaf,
    /// A graph its builder cannot make from what it was asked (a batch
    /// without sequences, say); the message says what.
    #[error("{0}")]
    Invalid(String),
}

/// A graph of tensor operations.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    nodes: Vec<Node>,
    names: HashMap<String, NodeId>,
    group: Option<u32>,
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// All nodes in topological order.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// One node.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.0]
    }

    /// The node named `name`.
    pub fn find(&self, name: &str) -> Option<NodeId> {
        self.names.get(name).copied()
    }

    /// Names `id` (unique) and returns it.
    pub fn set_name(&mut self, id: NodeId, name: impl Into<String>) -> Result<NodeId, GraphError> {
        let name = name.into();
        self.check(id)?;
        if self.names.contains_key(&name) {
            return Err(GraphError::DuplicateName(name));
        }
        self.names.insert(name.clone(), id);
        self.nodes[id.0].name = Some(name);
        Ok(id)
    }

    /// Adds flags to a node (e.g. [`Flags::OUTPUT`]).
    pub fn mark(&mut self, id: NodeId, flags: Flags) -> Result<NodeId, GraphError> {
        self.check(id)?;
        self.nodes[id.0].flags = self.nodes[id.0].flags | flags;
        Ok(id)
    }

    /// The node whose storage `id` uses (itself unless it is a view or a copy
    /// target).
    pub fn storage_root(&self, mut id: NodeId) -> NodeId {
        while self.nodes[id.0].op.aliases_input() {
            id = self.nodes[id.0].inputs[0];
        }
        id
    }

    /// Nodes that need caller memory at compute: leaves and outputs.
    pub fn bound_nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.nodes.iter().enumerate().filter_map(|(i, n)| {
            (matches!(n.op, Op::Leaf) || (n.flags.contains(Flags::OUTPUT) && !n.op.aliases_input()))
                .then_some(NodeId(i))
        })
    }

    /// Leaves that the graph writes (the roots of `CopyInto` targets).
    pub fn written_leaves(&self) -> Vec<NodeId> {
        let mut out: Vec<NodeId> = self
            .nodes
            .iter()
            .filter(|n| matches!(n.op, Op::CopyInto | Op::ScatterRows))
            .map(|n| self.storage_root(n.inputs[0]))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// Adds a copy of `node` (from another graph) reading `inputs` of this
    /// graph, for graph transformations such as cutting a graph into
    /// per-device splits. The inputs must have the types and layouts the
    /// node was built with: checked here, so a transformation cannot build
    /// an op the builder would have refused. The copy keeps the node's flags
    /// but not its name; its group is this graph's current one.
    pub fn push_like(&mut self, node: &Node, inputs: Vec<NodeId>, originals: &[&Node]) -> Result<NodeId, GraphError> {
        if inputs.len() != node.inputs.len() || originals.len() != inputs.len() {
            return Err(GraphError::Shape {
                op: node.op.name(),
                source: crate::shape::ShapeError::Mismatch {
                    what: "inputs of a copied node",
                    left: vec![node.inputs.len()],
                    right: vec![inputs.len()],
                },
            });
        }
        for (&id, original) in inputs.iter().zip(originals) {
            let mine = self.check(id)?;
            if mine.dtype != original.dtype || mine.layout != original.layout {
                return Err(GraphError::Shape {
                    op: node.op.name(),
                    source: crate::shape::ShapeError::Mismatch {
                        what: "a copied node's input layout",
                        left: original.layout.shape.dims().to_vec(),
                        right: mine.layout.shape.dims().to_vec(),
                    },
                });
            }
        }
        let mut copy = node.clone();
        copy.inputs = inputs;
        copy.name = None;
        copy.group = None;
        Ok(self.push(copy))
    }

    fn check(&self, id: NodeId) -> Result<&Node, GraphError> {
        self.nodes.get(id.0).ok_or(GraphError::UnknownNode(id))
    }

    /// Puts the nodes added from now on in placement group `group` (see
    /// [`Node::group`]).
    pub fn set_group(&mut self, group: Option<u32>) {
        self.group = group;
    }

    /// The placement group nodes added now go to.
    pub fn group(&self) -> Option<u32> {
        self.group
    }

    fn push(&mut self, mut node: Node) -> NodeId {
        if node.group.is_none() {
            node.group = self.group;
        }
        self.nodes.push(node);
        NodeId(self.nodes.len() - 1)
    }
}
