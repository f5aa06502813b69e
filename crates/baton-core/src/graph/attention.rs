//! The fused attention node, with its shape and type rules.

use super::{Flags, Graph, GraphError, Node, NodeId, Op, SlotCaches, ATTENTION_BLOCK};
use crate::shape::{Layout, ShapeError};
use crate::DType;

fn mismatch(what: &'static str, left: &[usize], right: &[usize]) -> GraphError {
    GraphError::Shape {
        op: "attention",
        source: ShapeError::Mismatch { what, left: left.to_vec(), right: right.to_vec() },
    }
}

impl Graph {
    /// Streamed attention of `q [T, H, D]` (f32) over keys `k [Hk, S, D]`
    /// and values `v [Hk, S, D]` (any type, rows contiguous), row `t` at
    /// `positions[t]` (i32); see [`Op::Attention`]. A window of 0 is refused.
    pub fn attention(
        &mut self,
        q: NodeId,
        (k, v): (NodeId, NodeId),
        positions: NodeId,
        scale: f32,
        window: Option<usize>,
    ) -> Result<NodeId, GraphError> {
        self.attention_node(q, (k, v), positions, None, None, scale, window)
    }

    /// Attention of `q [T, H, D]` over `S / rows` caches of `rows` rows
    /// each held in `k` and `v` (`[Hk, S, D]`), row `t` over cache
    /// `slots[t]` (i32 `[T]`) at `positions[t]`: every sequence of a
    /// batched step in one op (see [`Op::Attention`]'s slots). `S` must be
    /// a multiple of `rows`.
    pub fn attention_in_slots(
        &mut self,
        q: NodeId,
        (k, v): (NodeId, NodeId),
        (positions, slots): (NodeId, NodeId),
        rows: usize,
        scale: f32,
        window: Option<usize>,
    ) -> Result<NodeId, GraphError> {
        self.attention_node(q, (k, v), positions, Some(SlotCaches { slots, rows, table: None }), None, scale, window)
    }

    /// Attention of `q [T, H, D]` over sequences whose `rows` rows are
    /// blocks of the pool `k` and `v` (`[Hk, S, D]`, `S` a multiple of
    /// [`ATTENTION_BLOCK`]): row `t` reads sequence `slots[t]`'s blocks,
    /// listed in row `slots[t]` of `table` (i32 `[Q, rows /
    /// ATTENTION_BLOCK]`); see [`Op::Attention`]'s blocks.
    #[allow(clippy::too_many_arguments)]
    pub fn attention_in_blocks(
        &mut self,
        q: NodeId,
        (k, v): (NodeId, NodeId),
        (positions, slots, table): (NodeId, NodeId, NodeId),
        rows: usize,
        scale: f32,
        window: Option<usize>,
    ) -> Result<NodeId, GraphError> {
        let caches = SlotCaches { slots, rows, table: Some(table) };
        self.attention_node(q, (k, v), positions, Some(caches), None, scale, window)
    }

    /// The node of any form; `slots` where `k` and `v` hold several caches
    /// (in blocks with a table), and
    /// `sinks [H]` (f32) a sink logit per query head where given (see
    /// [`Op::Attention`]).
    #[allow(clippy::too_many_arguments)]
    pub fn attention_node(
        &mut self,
        q: NodeId,
        (k, v): (NodeId, NodeId),
        positions: NodeId,
        slots: Option<SlotCaches>,
        sinks: Option<NodeId>,
        scale: f32,
        window: Option<usize>,
    ) -> Result<NodeId, GraphError> {
        let qn = self.check(q)?.clone();
        if qn.dtype != DType::F32 {
            return Err(GraphError::Type { op: "attention", dtype: qn.dtype, input: 0 });
        }
        let (kn, vn) = (self.check(k)?.clone(), self.check(v)?.clone());
        let pn = self.check(positions)?.clone();
        if pn.dtype != DType::I32 {
            return Err(GraphError::Type { op: "attention", dtype: pn.dtype, input: 3 });
        }
        let (qd, kd, vd) = (qn.layout.shape.dims(), kn.layout.shape.dims(), vn.layout.shape.dims());
        if qd.len() != 3 || kd.len() != 3 || kd != vd {
            return Err(mismatch("q [T, H, D], k and v [Hk, S, D]", qd, kd));
        }
        let (t, h, d) = (qd[0], qd[1], qd[2]);
        if kd[2] != d || kd[0] == 0 || !h.is_multiple_of(kd[0]) {
            return Err(mismatch("key-value heads dividing the heads, the same head size", qd, kd));
        }
        if pn.layout.shape.dims() != [t] {
            return Err(mismatch("positions [T]", qd, pn.layout.shape.dims()));
        }
        for (node, input) in [(&kn, 1), (&vn, 2)] {
            if !node.layout.rows_contiguous(node.dtype) {
                return Err(GraphError::Shape { op: "attention", source: ShapeError::NotContiguous });
            }
            if node.dtype == DType::I32 {
                return Err(GraphError::Type { op: "attention", dtype: node.dtype, input });
            }
        }
        if window == Some(0) {
            return Err(mismatch("a window of at least one key", qd, kd));
        }
        let mut inputs = vec![q, k, v, positions];
        if let Some(SlotCaches { slots, rows, table }) = slots {
            let sn = self.check(slots)?;
            if sn.dtype != DType::I32 {
                return Err(GraphError::Type { op: "attention", dtype: sn.dtype, input: 4 });
            }
            if sn.layout.shape.dims() != [t] {
                return Err(mismatch("slots [T]", qd, sn.layout.shape.dims()));
            }
            if rows == 0 || (table.is_none() && !kd[1].is_multiple_of(rows)) {
                return Err(mismatch("caches of a whole number of rows", &[rows], kd));
            }
            inputs.push(slots);
            if let Some(table) = table {
                let tn = self.check(table)?;
                if tn.dtype != DType::I32 {
                    return Err(GraphError::Type { op: "attention", dtype: tn.dtype, input: 5 });
                }
                let td = tn.layout.shape.dims();
                let pool_rows = kd[1].is_multiple_of(ATTENTION_BLOCK);
                if !pool_rows
                    || !rows.is_multiple_of(ATTENTION_BLOCK)
                    || td.len() != 2
                    || td[1] != rows / ATTENTION_BLOCK
                {
                    return Err(mismatch("a table [Q, rows / ATTENTION_BLOCK] over whole blocks", td, kd));
                }
                if !tn.layout.is_contiguous(DType::I32) {
                    return Err(GraphError::Shape { op: "attention", source: ShapeError::NotContiguous });
                }
                inputs.push(table);
            }
        }
        if let Some(sinks) = sinks {
            let sn = self.check(sinks)?;
            if sn.dtype != DType::F32 {
                return Err(GraphError::Type { op: "attention", dtype: sn.dtype, input: inputs.len() });
            }
            if sn.layout.shape.dims() != [h] {
                return Err(mismatch("sinks [H]", qd, sn.layout.shape.dims()));
            }
            inputs.push(sinks);
        }
        let layout = Layout::contiguous(DType::F32, qn.layout.shape)
            .map_err(|source| GraphError::Shape { op: "attention", source })?;
        Ok(self.push(Node {
            op: Op::Attention {
                scale,
                window,
                slot_rows: slots.map(|s| s.rows),
                sinks: sinks.is_some(),
                paged: slots.is_some_and(|s| s.table.is_some()),
            },
            inputs,
            dtype: DType::F32,
            layout,
            name: None,
            flags: Flags::NONE,
            group: None,
        }))
    }
}
