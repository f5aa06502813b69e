//! Rebuilding one node of the original graph in a device's subgraph, from
//! that device's inputs (the builder checks every shape again).

use baton_core::graph::{Graph, GraphError, KeptStates, Node, NodeId, Op, SlotCaches};
use baton_core::shape::{Layout, ShapeError};

/// Adds `node`'s op to `g` over the local `inputs`; a view takes `layout`
/// (absolute over its storage).
pub(crate) fn apply(g: &mut Graph, node: &Node, inputs: &[NodeId], layout: &Layout) -> Result<NodeId, GraphError> {
    let i = inputs;
    match node.op {
        Op::GetRows => g.get_rows(i[0], i[1]),
        Op::MatMul => g.matmul(i[0], i[1]),
        Op::Add => g.add(i[0], i[1]),
        Op::Mul => g.mul(i[0], i[1]),
        Op::Scale(factor) => g.scale(i[0], factor),
        Op::RmsNorm { eps } => g.rms_norm(i[0], eps),
        Op::Rope { mode, dims, freq_base, freq_scale, yarn, rotated_pairs } => {
            g.rope_pairs((i[0], i[1]), (mode, dims, rotated_pairs), (freq_base, freq_scale), yarn)
        }
        Op::Softmax { scale, causal, window } => match i {
            [x, positions] => g.softmax_window(*x, scale, *positions, window),
            _ => g.softmax(i[0], scale, causal),
        },
        Op::Attention { scale, window, slot_rows, sinks, paged } => {
            let table = paged.then(|| i[5]);
            let slots = slot_rows.map(|rows| SlotCaches { slots: i[4], rows, table });
            let sinks = sinks.then(|| i[i.len() - 1]);
            g.attention_node(i[0], (i[1], i[2]), i[3], slots, sinks, scale, window)
        }
        Op::Silu => g.silu(i[0]),
        Op::Gelu => g.gelu(i[0]),
        Op::SwiGluClamped { alpha, limit } => g.swiglu_clamped(i[0], i[1], alpha, limit),
        Op::ScatterRows => g.scatter_rows(i[0], i[1], i[2]),
        Op::CopyInto => g.copy_into(i[0], i[1]),
        Op::Contiguous => g.contiguous(i[0]),
        Op::TopK { k } => g.top_k(i[0], k),
        Op::TakeColumns => g.take_columns(i[0], i[1]),
        Op::MatMulId => g.matmul_id(i[0], i[1], i[2]),
        Op::MatMulIdShare { first } => g.matmul_id_share(i[0], i[1], i[2], first),
        Op::SumRows => g.sum_rows(i[0]),
        Op::Sigmoid => g.sigmoid(i[0]),
        Op::Softplus => g.softplus(i[0]),
        Op::L2Norm { eps } => g.l2_norm(i[0], eps),
        Op::SsmConv => g.ssm_conv_keeping(i[0], i[1], i[2], (i[3], i[4]), kept_states(i, 5)),
        Op::GatedDeltaNet { scale, chunk } => {
            let rows = (i[6], i[7]);
            g.gated_delta_net_keeping(i[0], (i[1], i[2], i[3]), (i[4], i[5]), rows, (scale, chunk), kept_states(i, 8))
        }
        Op::View => {
            let base = g.node(i[0]).layout.offset;
            let offset = layout.offset.checked_sub(base).ok_or(GraphError::Shape {
                op: "view",
                source: ShapeError::Mismatch {
                    what: "a view before its input's offset",
                    left: vec![layout.offset],
                    right: vec![base],
                },
            })?;
            g.view(i[0], layout.shape.dims(), layout.strides(), offset)
        }
        Op::Leaf => Err(GraphError::UnknownNode(NodeId(usize::MAX))),
    }
}

/// A recurrent op's kept states, inputs `first` and `first + 1` when it has
/// them.
fn kept_states(inputs: &[NodeId], first: usize) -> Option<KeptStates> {
    match inputs.get(first..first + 2) {
        Some(&[kept, keep]) => Some(KeptStates { kept, keep }),
        _ => None,
    }
}
