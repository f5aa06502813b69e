//! The nodes of a recurrent layer (Gated DeltaNet, as Qwen 3.5's linear
//! attention), with their shape and type rules: the elementwise
//! [`Op::Sigmoid`] and [`Op::Softplus`], the row-wise [`Op::L2Norm`], and
//! the two ops that carry a sequence's state from one step to the next,
//! [`Op::SsmConv`] and [`Op::GatedDeltaNet`], which write their state leaf
//! in place (see [`Op::writes_state`]).

use super::{Graph, GraphError, KeptStates, NodeId, Op};
use crate::shape::{Shape, ShapeError};
use crate::DType;

fn mismatch(op: &'static str, what: &'static str, left: &[usize], right: &[usize]) -> GraphError {
    GraphError::Shape { op, source: ShapeError::Mismatch { what, left: left.to_vec(), right: right.to_vec() } }
}

fn shape(op: &'static str, dims: &[usize]) -> Result<Shape, GraphError> {
    Shape::new(dims).map_err(|source| GraphError::Shape { op, source })
}

impl Graph {
    fn elementwise(&mut self, op: Op, x: NodeId) -> Result<NodeId, GraphError> {
        let shape = self.require_f32(op.name(), x, 0)?.layout.shape;
        self.computed(op, vec![x], DType::F32, shape)
    }

    /// `1 / (1 + exp(-x))`; see [`Op::Sigmoid`].
    pub fn sigmoid(&mut self, x: NodeId) -> Result<NodeId, GraphError> {
        self.elementwise(Op::Sigmoid, x)
    }

    /// ggml's softplus; see [`Op::Softplus`].
    pub fn softplus(&mut self, x: NodeId) -> Result<NodeId, GraphError> {
        self.elementwise(Op::Softplus, x)
    }

    /// L2 norm over the last dimension; see [`Op::L2Norm`].
    pub fn l2_norm(&mut self, x: NodeId, eps: f32) -> Result<NodeId, GraphError> {
        self.elementwise(Op::L2Norm { eps }, x)
    }

    /// A state leaf (or a view of one) a recurrent op writes in place:
    /// contiguous f32 of `rank` dimensions; returns its dimensions.
    fn recurrent_state(&self, op: &'static str, state: NodeId, rank: usize) -> Result<Vec<usize>, GraphError> {
        let node = self.require_f32(op, state, 0)?;
        if !matches!(self.node(self.storage_root(state)).op, Op::Leaf) {
            return Err(GraphError::CopyTargetNotLeaf);
        }
        if !node.layout.is_contiguous(DType::F32) {
            return Err(GraphError::Shape { op, source: ShapeError::NotContiguous });
        }
        let dims = node.layout.shape.dims().to_vec();
        if dims.len() != rank {
            return Err(mismatch(op, "a state of the stated rank", &dims, &[rank]));
        }
        Ok(dims)
    }

    /// The `slots` and `positions` inputs of a recurrent op over `t` rows.
    fn row_indices(&self, op: &'static str, ids: [NodeId; 2], first: usize, t: usize) -> Result<(), GraphError> {
        for (i, id) in ids.into_iter().enumerate() {
            let node = self.check(id)?;
            if node.dtype != DType::I32 {
                return Err(GraphError::Type { op, dtype: node.dtype, input: first + i });
            }
            if node.layout.shape.dims() != [t] || !node.layout.is_contiguous(DType::I32) {
                return Err(mismatch(op, "slots and positions [T]", node.layout.shape.dims(), &[t]));
            }
        }
        Ok(())
    }

    /// Checks `kept` (inputs `first` and `first + 1`) against a state of
    /// dimensions `sd` over `t` rows; returns its two inputs, or none.
    fn kept_inputs(
        &self,
        (op, first): (&'static str, usize),
        kept: Option<KeptStates>,
        sd: &[usize],
        t: usize,
    ) -> Result<Vec<NodeId>, GraphError> {
        let Some(KeptStates { kept, keep }) = kept else { return Ok(Vec::new()) };
        let kd = self.recurrent_state(op, kept, sd.len())?;
        if kd[1..] != sd[1..] {
            return Err(mismatch(op, "kept states of one slot's shape", &kd, sd));
        }
        let node = self.check(keep)?;
        if node.dtype != DType::I32 {
            return Err(GraphError::Type { op, dtype: node.dtype, input: first + 1 });
        }
        if node.layout.shape.dims() != [t] || !node.layout.is_contiguous(DType::I32) {
            return Err(mismatch(op, "keep [T]", node.layout.shape.dims(), &[t]));
        }
        Ok(vec![kept, keep])
    }

    fn contiguous_f32(&self, op: &'static str, id: NodeId, input: usize) -> Result<Vec<usize>, GraphError> {
        let node = self.require_f32(op, id, input)?;
        if !node.layout.is_contiguous(DType::F32) {
            return Err(GraphError::Shape { op, source: ShapeError::NotContiguous });
        }
        Ok(node.layout.shape.dims().to_vec())
    }

    /// A short causal convolution of `x [T, C]` by `w [C, K]`, the last
    /// inputs of each slot kept in `state [S, C, K-1]`; see [`Op::SsmConv`].
    pub fn ssm_conv(
        &mut self,
        state: NodeId,
        x: NodeId,
        w: NodeId,
        (slots, positions): (NodeId, NodeId),
    ) -> Result<NodeId, GraphError> {
        self.ssm_conv_keeping(state, x, w, (slots, positions), None)
    }

    /// [`ssm_conv`](Self::ssm_conv) that also keeps the state after the
    /// rows `kept` names (see [`Op::SsmConv`]).
    pub fn ssm_conv_keeping(
        &mut self,
        state: NodeId,
        x: NodeId,
        w: NodeId,
        (slots, positions): (NodeId, NodeId),
        kept: Option<KeptStates>,
    ) -> Result<NodeId, GraphError> {
        const OP: &str = "ssm_conv";
        let sd = self.recurrent_state(OP, state, 3)?;
        let xd = self.contiguous_f32(OP, x, 1)?;
        let wd = self.contiguous_f32(OP, w, 2)?;
        if xd.len() != 2 || wd.len() != 2 || wd[0] != xd[1] || wd[1] < 2 || sd[1] != xd[1] || sd[2] != wd[1] - 1 {
            return Err(mismatch(OP, "state [S, C, K-1], x [T, C] and w [C, K] (K >= 2)", &xd, &wd));
        }
        self.row_indices(OP, [slots, positions], 3, xd[0])?;
        let mut inputs = vec![state, x, w, slots, positions];
        inputs.extend(self.kept_inputs((OP, 5), kept, &sd, xd[0])?);
        let out = shape(OP, &xd)?;
        self.computed(Op::SsmConv, inputs, DType::F32, out)
    }

    /// The gated delta rule over `q`, `k` `[T, Hk, Dk]`, `v [T, H, Dv]`,
    /// `g` and `beta` `[T, H]`, with each slot's state in `state [S, H, Dv,
    /// Dk]`; see [`Op::GatedDeltaNet`] (row by row: `chunk` 0).
    pub fn gated_delta_net(
        &mut self,
        state: NodeId,
        qkv: (NodeId, NodeId, NodeId),
        gates: (NodeId, NodeId),
        rows: (NodeId, NodeId),
        scale: f32,
    ) -> Result<NodeId, GraphError> {
        self.gated_delta_net_chunked(state, qkv, gates, rows, scale, 0)
    }

    /// [`gated_delta_net`](Self::gated_delta_net) taking a slot's runs of
    /// rows `chunk` at a time where the backend can (see
    /// [`Op::GatedDeltaNet`]'s `chunk`: not bit-invariant).
    pub fn gated_delta_net_chunked(
        &mut self,
        state: NodeId,
        (q, k, v): (NodeId, NodeId, NodeId),
        (g, beta): (NodeId, NodeId),
        (slots, positions): (NodeId, NodeId),
        scale: f32,
        chunk: usize,
    ) -> Result<NodeId, GraphError> {
        self.gated_delta_net_keeping(state, (q, k, v), (g, beta), (slots, positions), (scale, chunk), None)
    }

    /// [`gated_delta_net_chunked`](Self::gated_delta_net_chunked) that also
    /// keeps the state after the rows `kept` names (see
    /// [`Op::GatedDeltaNet`]).
    pub fn gated_delta_net_keeping(
        &mut self,
        state: NodeId,
        (q, k, v): (NodeId, NodeId, NodeId),
        (g, beta): (NodeId, NodeId),
        (slots, positions): (NodeId, NodeId),
        (scale, chunk): (f32, usize),
        kept: Option<KeptStates>,
    ) -> Result<NodeId, GraphError> {
        const OP: &str = "gated_delta_net";
        let sd = self.recurrent_state(OP, state, 4)?;
        let qd = self.contiguous_f32(OP, q, 1)?;
        let kd = self.contiguous_f32(OP, k, 2)?;
        let vd = self.contiguous_f32(OP, v, 3)?;
        let gd = self.contiguous_f32(OP, g, 4)?;
        let bd = self.contiguous_f32(OP, beta, 5)?;
        if qd.len() != 3 || qd != kd || vd.len() != 3 || vd[0] != qd[0] {
            return Err(mismatch(OP, "q and k [T, Hk, Dk], v [T, H, Dv]", &qd, &vd));
        }
        let (t, hk, dk, h, dv) = (qd[0], qd[1], qd[2], vd[1], vd[2]);
        if hk == 0 || h % hk != 0 || sd[1..] != [h, dv, dk] {
            return Err(mismatch(OP, "state [S, H, Dv, Dk] with H a multiple of Hk", &sd, &[h, dv, dk]));
        }
        if gd != [t, h] || bd != [t, h] {
            return Err(mismatch(OP, "g and beta [T, H]", &gd, &[t, h]));
        }
        self.row_indices(OP, [slots, positions], 6, t)?;
        let out = shape(OP, &vd)?;
        let mut inputs = vec![state, q, k, v, g, beta, slots, positions];
        inputs.extend(self.kept_inputs((OP, 8), kept, &sd, t)?);
        self.computed(Op::GatedDeltaNet { scale, chunk }, inputs, DType::F32, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Flags;

    #[test]
    fn recurrent_nodes_take_their_shapes_and_refuse_others() {
        let mut g = Graph::new();
        let conv_state = g.leaf("conv", DType::F32, &[2, 12, 3], Flags::STATE).unwrap();
        let x = g.leaf("x", DType::F32, &[5, 12], Flags::INPUT).unwrap();
        let w = g.leaf("w", DType::F32, &[12, 4], Flags::WEIGHT).unwrap();
        let slots = g.leaf("slots", DType::I32, &[5], Flags::INPUT).unwrap();
        let pos = g.leaf("pos", DType::I32, &[5], Flags::INPUT).unwrap();
        let y = g.ssm_conv(conv_state, x, w, (slots, pos)).unwrap();
        assert_eq!(g.node(y).layout.shape.dims(), &[5, 12]);
        let w3 = g.leaf("w3", DType::F32, &[12, 3], Flags::WEIGHT).unwrap();
        assert!(g.ssm_conv(conv_state, x, w3, (slots, pos)).is_err(), "K - 1 must match the state");
        assert!(g.ssm_conv(x, x, w, (slots, pos)).is_err(), "a state of rank 3");
        let computed = g.silu(x).unwrap();
        let fake = g.reshape(computed, &[5, 12, 1]).unwrap();
        assert!(matches!(g.ssm_conv(fake, x, w, (slots, pos)), Err(GraphError::CopyTargetNotLeaf)));
        let state = g.leaf("s", DType::F32, &[2, 4, 8, 16], Flags::STATE).unwrap();
        let q = g.leaf("q", DType::F32, &[5, 2, 16], Flags::INPUT).unwrap();
        let k = g.leaf("k", DType::F32, &[5, 2, 16], Flags::INPUT).unwrap();
        let v = g.leaf("v", DType::F32, &[5, 4, 8], Flags::INPUT).unwrap();
        let gate = g.leaf("g", DType::F32, &[5, 4], Flags::INPUT).unwrap();
        let beta = g.leaf("beta", DType::F32, &[5, 4], Flags::INPUT).unwrap();
        let o = g.gated_delta_net(state, (q, k, v), (gate, beta), (slots, pos), 0.25).unwrap();
        assert_eq!(g.node(o).layout.shape.dims(), &[5, 4, 8]);
        assert!(g.node(o).op.writes_state() && g.node(o).inputs[0] == state);
        assert!(g.gated_delta_net(state, (q, k, v), (beta, gate), (pos, slots), 0.25).is_ok());
        let v3 = g.leaf("v3", DType::F32, &[5, 3, 8], Flags::INPUT).unwrap();
        assert!(g.gated_delta_net(state, (q, k, v3), (gate, beta), (slots, pos), 0.25).is_err());
        let fpos = g.leaf("fpos", DType::F32, &[5], Flags::INPUT).unwrap();
        assert!(g.gated_delta_net(state, (q, k, v), (gate, beta), (slots, fpos), 0.25).is_err());
        let kept = g.leaf("kept", DType::F32, &[3, 4, 8, 16], Flags::STATE).unwrap();
        let keep = g.leaf("keep", DType::I32, &[5], Flags::INPUT).unwrap();
        let rows = (slots, pos);
        let kept_ok = Some(KeptStates { kept, keep });
        let o = g.gated_delta_net_keeping(state, (q, k, v), (gate, beta), rows, (0.25, 0), kept_ok).unwrap();
        assert_eq!(g.node(o).inputs[8..], [kept, keep]);
        let wrong = Some(KeptStates { kept: conv_state, keep });
        assert!(g.gated_delta_net_keeping(state, (q, k, v), (gate, beta), rows, (0.25, 0), wrong).is_err());
        let conv_kept = g.leaf("conv_kept", DType::F32, &[4, 12, 3], Flags::STATE).unwrap();
        let y = g.ssm_conv_keeping(conv_state, x, w, rows, Some(KeptStates { kept: conv_kept, keep })).unwrap();
        assert_eq!(g.node(y).inputs.len(), 7);
        let short = g.leaf("short", DType::I32, &[4], Flags::INPUT).unwrap();
        let bad = Some(KeptStates { kept: conv_kept, keep: short });
        assert!(g.ssm_conv_keeping(conv_state, x, w, rows, bad).is_err(), "keep [T]");
        let sig = g.sigmoid(x).unwrap();
        let l2 = g.l2_norm(sig, 1e-6).unwrap();
        assert_eq!(g.node(l2).op, Op::L2Norm { eps: 1e-6 });
        assert!(g.softplus(slots).is_err(), "f32 only");
    }
}
