//! `baton plan --split-mode tensor`: each weight's split and each gate.

use std::fmt::Write;

use baton_composite::partition::Step;
use baton_composite::{GateKind, Partition, TensorSplit};
use baton_core::graph::{Flags, Graph, NodeId, Op};

/// How a node is held, in words.
fn held(split: &TensorSplit, devices: &[String]) -> String {
    match split {
        TensorSplit::Mirror => "mirrored".into(),
        TensorSplit::Partial => "partial sums".into(),
        TensorSplit::Split { axis, parts } => {
            let shares: Vec<String> =
                devices.iter().zip(parts).map(|(name, segments)| format!("{name} {segments:?}")).collect();
            format!("split on axis {axis}: {}", shares.join(" | "))
        }
    }
}

/// A node's name, or its op and layer.
fn label(graph: &Graph, id: NodeId) -> String {
    let node = graph.node(id);
    match (&node.name, node.group) {
        (Some(name), _) => name.clone(),
        (None, Some(g)) if g > 0 => format!("{} #{} (layer {})", node.op.name(), id.0, g - 1),
        (None, _) => format!("{} #{}", node.op.name(), id.0),
    }
}

/// The plan of a partition over `devices`.
pub fn describe(graph: &Graph, partition: &Partition, devices: &[String]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "tensor parallel over {}:", devices.join(", "));
    let _ = writeln!(out, "bound tensors (weights and KV cache):");
    let mut mirrored = 0;
    for id in graph.bound_nodes() {
        let node = graph.node(id);
        if !matches!(node.op, Op::Leaf) || node.flags.contains(Flags::INPUT) {
            continue;
        }
        let split = &partition.states[id.0];
        if *split == TensorSplit::Mirror {
            mirrored += 1;
            continue;
        }
        let _ =
            writeln!(out, "  {} {:?} {}: {}", label(graph, id), node.layout.shape, node.dtype, held(split, devices));
    }
    let _ = writeln!(out, "  {mirrored} more mirrored (norms, token embedding)");
    let gates = partition.gates().count();
    let _ = writeln!(out, "per evaluation: {} segments, {gates} gates", partition.segments());
    let mut segment = 0;
    for step in &partition.steps {
        match step {
            Step::Segment(_) => segment += 1,
            Step::Gate(g) => {
                let what = match &g.spec.kind {
                    GateKind::AllReduce if g.folded => "all-reduce (each device adds the partial sums in place)".into(),
                    GateKind::AllReduce => "all-reduce".to_string(),
                    GateKind::AllGather { axis, .. } => format!("all-gather on axis {axis}"),
                };
                let bytes = g.spec.dims.iter().product::<usize>() * 4;
                let _ = writeln!(
                    out,
                    "  gate after segment {segment}: {what} of {} {:?} f32 ({bytes} bytes per device)",
                    label(graph, g.node),
                    g.spec.dims
                );
            }
        }
    }
    let scratch: Vec<String> = devices
        .iter()
        .zip(partition.scratch_bytes())
        .map(|(n, b)| format!("{n} {:.1} KiB", b as f64 / 1024.0))
        .collect();
    let _ = writeln!(out, "scratch memory: {}", scratch.join(", "));
    out
}
