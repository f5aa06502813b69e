//! Cutting a placed graph into splits: runs of consecutive nodes on one
//! device, each with its own subgraph.
//!
//! A split's subgraph has a leaf for every tensor it reads: the original
//! leaves bound on its device (weights, caches, inputs), recreated with
//! their views, and one leaf per *crossing*: a tensor computed by another
//! split, or a leaf bound on another device, which the runner copies into
//! the split's device before the split runs. Tensors that later splits read
//! become outputs of the split that computes them.

use std::collections::HashMap;
use std::sync::Arc;

use baton_core::graph::{Flags, Graph, NodeId, Op};

use crate::error::SchedError;

/// Where a leaf of a split's subgraph gets its memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeafSource {
    /// The caller's binding of this original leaf (on the split's device).
    Bound(NodeId),
    /// A copy of an original tensor made on the split's device: computed by
    /// split `from`, or a leaf bound on another device (`from` is `None`).
    Crossing {
        /// The original tensor.
        original: NodeId,
        /// The split that computes it.
        from: Option<usize>,
    },
}

/// A leaf of a split's subgraph.
#[derive(Clone, Debug)]
pub struct SplitLeaf {
    /// The leaf in the subgraph.
    pub sub: NodeId,
    /// Where its memory comes from.
    pub source: LeafSource,
    /// Its size in bytes.
    pub bytes: usize,
}

/// One split: a subgraph that runs on one device.
#[derive(Clone, Debug)]
pub struct Split {
    /// Index in the plan.
    pub index: usize,
    /// Device index.
    pub device: usize,
    /// The subgraph.
    pub graph: Arc<Graph>,
    /// Its leaves.
    pub leaves: Vec<SplitLeaf>,
    /// Original tensors it computes that later splits read: (original, in
    /// the subgraph), bound to scheduler memory.
    pub crossings_out: Vec<(NodeId, NodeId)>,
    /// Original outputs it computes: (original, in the subgraph), bound to
    /// the caller's memory.
    pub outputs: Vec<(NodeId, NodeId)>,
    /// How many original compute nodes it runs.
    pub nodes: usize,
}

fn label(graph: &Graph, id: NodeId) -> String {
    graph.node(id).name.clone().unwrap_or_else(|| format!("node {} ({})", id.0, graph.node(id).op.name()))
}

/// Cuts `graph` by `placement` (a device per node).
pub fn cut(graph: &Graph, placement: &[usize]) -> Result<Vec<Split>, SchedError> {
    let nodes = graph.nodes();
    let is_compute = |i: usize| !matches!(nodes[i].op, Op::Leaf | Op::View);
    // 1. Split of every compute node: a new split whenever the device changes.
    let mut split_of: Vec<Option<usize>> = vec![None; nodes.len()];
    let mut split_devices: Vec<usize> = Vec::new();
    for i in (0..nodes.len()).filter(|&i| is_compute(i)) {
        if split_devices.last() != Some(&placement[i]) {
            split_devices.push(placement[i]);
        }
        split_of[i] = Some(split_devices.len() - 1);
    }
    // A view takes the split of the storage it aliases when that is computed.
    let home = |id: NodeId| split_of[graph.storage_root(id).0];
    // 2. Crossings: computed tensors read by a later split.
    let mut crossing = vec![false; nodes.len()];
    for (j, node) in nodes.iter().enumerate().filter(|&(j, _)| is_compute(j)) {
        for &input in &node.inputs {
            let root = graph.storage_root(input);
            if let Some(src) = home(input) {
                if Some(src) != split_of[j] {
                    if root != input && !nodes[input.0].layout.is_contiguous(nodes[input.0].dtype) {
                        return Err(SchedError::StridedCrossing {
                            node: label(graph, input),
                            from: format!("split {src}"),
                            to: format!("split {}", split_of[j].unwrap_or(0)),
                        });
                    }
                    if root != input {
                        return Err(SchedError::StridedCrossing {
                            node: label(graph, input),
                            from: format!("split {src}"),
                            to: "another split (views cannot cross yet)".into(),
                        });
                    }
                    crossing[input.0] = true;
                }
            }
        }
    }
    // 3. Subgraphs.
    let mut splits = Vec::with_capacity(split_devices.len());
    for (s, &device) in split_devices.iter().enumerate() {
        let mut b = SubgraphBuilder {
            graph,
            placement,
            split_of: &split_of,
            s,
            device,
            g: Graph::new(),
            map: HashMap::new(),
            leaves: Vec::new(),
        };
        let mut crossings_out = Vec::new();
        let mut outputs = Vec::new();
        let mut count = 0;
        for i in (0..nodes.len()).filter(|&i| split_of[i] == Some(s)) {
            let node = &nodes[i];
            let inputs = node.inputs.iter().map(|&input| b.import(input)).collect::<Result<Vec<_>, _>>()?;
            let originals: Vec<&baton_core::graph::Node> = node.inputs.iter().map(|&input| graph.node(input)).collect();
            let sub = b.g.push_like(node, inputs, &originals)?;
            b.map.insert(NodeId(i), sub);
            count += 1;
            if let Some(name) = &node.name {
                b.g.set_name(sub, name.clone())?;
            }
            if node.flags.contains(Flags::OUTPUT) && !node.op.aliases_input() {
                outputs.push((NodeId(i), sub));
            } else if crossing[i] {
                b.g.mark(sub, Flags::OUTPUT)?;
                if node.name.is_none() {
                    b.g.set_name(sub, format!("crossing.{i}"))?;
                }
                crossings_out.push((NodeId(i), sub));
            }
            if crossing[i] && node.flags.contains(Flags::OUTPUT) {
                crossings_out.push((NodeId(i), sub));
            }
        }
        splits.push(Split {
            index: s,
            device,
            graph: Arc::new(b.g),
            leaves: b.leaves,
            crossings_out,
            outputs,
            nodes: count,
        });
    }
    Ok(splits)
}

struct SubgraphBuilder<'a> {
    graph: &'a Graph,
    placement: &'a [usize],
    split_of: &'a [Option<usize>],
    s: usize,
    device: usize,
    g: Graph,
    map: HashMap<NodeId, NodeId>,
    leaves: Vec<SplitLeaf>,
}

impl SubgraphBuilder<'_> {
    /// The subgraph node standing for original `id`, creating it (and the
    /// leaves and views it needs) on first use.
    fn import(&mut self, id: NodeId) -> Result<NodeId, SchedError> {
        if let Some(&sub) = self.map.get(&id) {
            return Ok(sub);
        }
        let node = self.graph.node(id).clone();
        let bytes = node.layout.end_byte(node.dtype) - node.layout.offset;
        let sub = match (&node.op, self.split_of[self.graph.storage_root(id).0]) {
            (Op::Leaf, _) => {
                let local = self.placement[id.0] == self.device;
                let name = match (&node.name, local) {
                    (Some(n), true) => n.clone(),
                    _ => format!("crossing.{}", id.0),
                };
                let flags = if local { node.flags } else { Flags::INPUT };
                let sub = self.g.leaf(&name, node.dtype, node.layout.shape.dims(), flags)?;
                let source =
                    if local { LeafSource::Bound(id) } else { LeafSource::Crossing { original: id, from: None } };
                self.leaves.push(SplitLeaf { sub, source, bytes });
                sub
            }
            (Op::View, home) if home.is_none() || home == Some(self.s) => {
                let input = self.import(node.inputs[0])?;
                let original = self.graph.node(node.inputs[0]);
                self.g.push_like(&node, vec![input], &[original])?
            }
            (_, Some(from)) if from != self.s => {
                let name = format!("crossing.{}", id.0);
                let sub = self.g.leaf(&name, node.dtype, node.layout.shape.dims(), Flags::INPUT)?;
                self.leaves.push(SplitLeaf {
                    sub,
                    source: LeafSource::Crossing { original: id, from: Some(from) },
                    bytes,
                });
                sub
            }
            _ => {
                return Err(SchedError::Placement {
                    node: label(self.graph, id),
                    op: node.op.name(),
                    reason: format!("split {} reads it before it is computed", self.s),
                })
            }
        };
        self.map.insert(id, sub);
        Ok(sub)
    }
}
