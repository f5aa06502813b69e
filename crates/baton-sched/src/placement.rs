//! Placement: which device runs each node.
//!
//! In order of precedence:
//! 1. a node whose builder put it in a group (a model's layer) runs where
//!    the caller maps the group;
//! 2. a leaf lives where its memory is bound;
//! 3. a view or copy target lives with the storage it aliases;
//! 4. any other node runs with its weight or state (a leaf input), else with
//!    its latest computed input, else with its first input.

use baton_core::graph::{Graph, NodeId, Op};

use crate::error::SchedError;

/// Computes the device index of every node.
pub fn place(
    graph: &Graph,
    group_device: &dyn Fn(u32) -> Option<usize>,
    leaf_device: &dyn Fn(NodeId) -> Option<usize>,
) -> Result<Vec<usize>, SchedError> {
    let nodes = graph.nodes();
    let mut devices: Vec<Option<usize>> = vec![None; nodes.len()];
    for (i, node) in nodes.iter().enumerate() {
        let id = NodeId(i);
        let by_group = node.group.and_then(group_device);
        let device = match &node.op {
            Op::Leaf => leaf_device(id).or(by_group),
            _ if node.op.aliases_input() => devices[graph.storage_root(id).0],
            _ => by_group.or_else(|| {
                let leaf_input = node.inputs.iter().find(|&&input| {
                    let root = graph.storage_root(input);
                    matches!(nodes[root.0].op, Op::Leaf) && !nodes[root.0].flags.contains(baton_core::Flags::INPUT)
                });
                let computed = node.inputs.iter().filter(|&&input| !matches!(nodes[input.0].op, Op::Leaf)).max();
                leaf_input.or(computed).or(node.inputs.first()).and_then(|&input| devices[input.0])
            }),
        };
        devices[i] = device;
    }
    devices
        .into_iter()
        .enumerate()
        .map(|(i, d)| {
            d.ok_or_else(|| SchedError::Placement {
                node: nodes[i].name.clone().unwrap_or_else(|| format!("node {i}")),
                op: nodes[i].op.name(),
                reason: "it has no group, no bound memory and no placed input".into(),
            })
        })
        .collect()
}
