//! Grouped-query products whose devices' query heads do not start or end
//! on a group boundary (SmolLM2's 9 heads and 3 key heads over 2 devices:
//! heads 0..5 and 5..9). Each device holds the key heads of its heads'
//! groups (a group on two devices has its key head on both), and computes
//! each group's heads against their key head, into one tensor of its heads.

use baton_core::graph::{Flags, NodeId, Op};

use super::rules::{GroupedHeads, Rule};
use super::{local, Builder, Source};
use crate::error::CompositeError;
use crate::split::TensorSplit;

impl Builder<'_> {
    /// Device `d`'s share of the grouped-query product `id`: the op itself
    /// when its query heads start and end on group boundaries; else each
    /// group's heads against their key head, copied into one tensor of the
    /// device's heads (scratch memory) that a copy then reads, after the
    /// copies by node order.
    pub(super) fn grouped_product(
        &mut self,
        id: NodeId,
        d: usize,
        ins: &[NodeId],
        rule: &Rule,
        grouped: GroupedHeads,
    ) -> Result<NodeId, CompositeError> {
        let graph = self.graph;
        let node = graph.node(id);
        let (x, w) = match &rule.inputs[..] {
            [TensorSplit::Split { parts: xp, .. }, TensorSplit::Split { parts: wp, .. }, ..] if ins.len() >= 2 => {
                (xp[d][0].clone(), wp[d][0].clone())
            }
            _ => return Err(self.fail(id, "a grouped product needs split query and key heads")),
        };
        let GroupedHeads { axis, kv_axis, group } = grouped;
        if x.start.is_multiple_of(group) && x.end.is_multiple_of(group) {
            return Ok(local::apply(&mut self.cur.graphs[d], node, ins, &node.layout)?);
        }
        let dims = rule.output.local_dims(&self.dims(id), d);
        let k = self.new_scratch(d, node.dtype, dims.clone());
        self.leaves += 1;
        let g = &mut self.cur.graphs[d];
        let whole = g.leaf(&format!("grouped.{}.{}", id.0, self.leaves), node.dtype, &dims, Flags::STATE)?;
        self.cur.binds[d].push((whole, Source::Scratch(k)));
        for kv in w.clone() {
            let heads = x.start.max(kv * group)..x.end.min((kv + 1) * group);
            let at = heads.start - x.start;
            let queries = g.narrow(ins[0], axis, at, heads.len())?;
            let key = g.narrow(ins[1], kv_axis, kv - w.start, 1)?;
            let product = match (&node.op, ins) {
                (
                    Op::Attention { scale, window, slot_rows: None, sinks: false, paged: false },
                    [_, _, values, positions],
                ) => {
                    let value = g.narrow(*values, kv_axis, kv - w.start, 1)?;
                    g.attention(queries, (key, value), *positions, *scale, *window)?
                }
                (
                    Op::Attention { scale, window, slot_rows: Some(rows), sinks: false, paged: false },
                    [_, _, values, positions, slots],
                ) => {
                    let value = g.narrow(*values, kv_axis, kv - w.start, 1)?;
                    g.attention_in_slots(queries, (key, value), (*positions, *slots), *rows, *scale, *window)?
                }
                (
                    Op::Attention { scale, window, slot_rows: Some(rows), sinks: false, paged: true },
                    [_, _, values, positions, slots, table],
                ) => {
                    let value = g.narrow(*values, kv_axis, kv - w.start, 1)?;
                    let at = (*positions, *slots, *table);
                    g.attention_in_blocks(queries, (key, value), at, *rows, *scale, *window)?
                }
                (Op::Attention { .. }, _) => return Err(self.fail(id, "attention with sinks split inside a group")),
                _ => g.matmul(queries, key)?,
            };
            let into = g.narrow(whole, axis, at, heads.len())?;
            g.copy_into(into, product)?;
        }
        Ok(g.contiguous(whole)?)
    }
}
