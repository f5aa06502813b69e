//! The parts of the graph only hybrid models (Qwen 3.5) have: a recurrent
//! layer (Gated DeltaNet), the query's output gate of their attention
//! layers, and the shared expert beside their experts.

use baton_core::graph::{GraphError, KeptStates, NodeId};

use super::Builder;
use crate::hybrid::Recurrent;

impl Builder<'_> {
    /// Recurrent layer `l` on the normalised rows `h [T, dim]`: returns
    /// what it adds to the residual stream. `(slots, positions)` give each
    /// row's sequence and position; each sequence's convolution and
    /// delta-rule state is read and written in place in its slot.
    pub(super) fn recurrent_layer(
        &mut self,
        l: usize,
        h: NodeId,
        r: &Recurrent,
        (slots, positions): (NodeId, NodeId),
        cache_slots: usize,
    ) -> Result<NodeId, GraphError> {
        let (d, eps) = (self.config.dim, self.config.rms_eps);
        let t = self.g.node(h).layout.shape.dims()[0];
        let name = |n: &str| format!("blk.{l}.{n}");
        let (hd, kh, vh) = (r.head_dim, r.key_heads, r.value_heads);
        let (key_dim, value_dim, conv_dim) = (r.key_dim(), r.value_dim(), r.conv_dim());
        let qkv = self.linear(h, &name("attn_qkv.weight"), conv_dim, d)?;
        let z = self.linear(h, &name("attn_gate.weight"), value_dim, d)?;
        let beta = self.linear(h, &name("ssm_beta.weight"), vh, d)?;
        let beta = self.g.sigmoid(beta)?;
        // The decay: softplus(alpha + dt_bias) × a, where `ssm_a` holds
        // -exp(A_log) (negative: a decay below one).
        let alpha = self.linear(h, &name("ssm_alpha.weight"), vh, d)?;
        let dt_bias = self.weight(&name("ssm_dt.bias"), &[vh])?;
        let a = self.weight(&name("ssm_a"), &[vh])?;
        let gate = self.g.add(alpha, dt_bias)?;
        let gate = self.g.softplus(gate)?;
        let gate = self.g.mul(gate, a)?;
        // The short convolution over queries, keys and values, each
        // sequence's last inputs kept in its slot.
        let conv_state = self.state(&super::conv_state_name(l), &r.conv_state_dims(cache_slots))?;
        let conv_w = self.weight(&name("ssm_conv1d.weight"), &[conv_dim, r.conv_kernel])?;
        let conv_kept = self.kept(&super::conv_kept_name(l), &r.conv_state_dims(0))?;
        let conv = self.g.ssm_conv_keeping(conv_state, qkv, conv_w, (slots, positions), conv_kept)?;
        let conv = self.g.silu(conv)?;
        let part = |b: &mut Self, start: usize, width: usize, heads: usize| -> Result<NodeId, GraphError> {
            let view = b.g.narrow(conv, 1, start, width)?;
            let view = b.g.contiguous(view)?;
            b.g.reshape(view, &[t, heads, hd])
        };
        let q = part(self, 0, key_dim, kh)?;
        let k = part(self, key_dim, key_dim, kh)?;
        let v = part(self, 2 * key_dim, value_dim, vh)?;
        let q = self.g.l2_norm(q, eps)?;
        let k = self.g.l2_norm(k, eps)?;
        let delta_state = self.state(&super::delta_state_name(l), &r.delta_state_dims(cache_slots))?;
        let scale = 1.0 / (hd as f32).sqrt();
        let rows = (slots, positions);
        let delta_kept = self.kept(&super::delta_kept_name(l), &r.delta_state_dims(0))?;
        let qkv = (q, k, v);
        let o = self.g.gated_delta_net_keeping(
            delta_state,
            qkv,
            (gate, beta),
            rows,
            (scale, self.delta_chunk),
            delta_kept,
        )?;
        // Each head RMS-normalised (one weight for all heads), gated by
        // silu(z), then projected back.
        let o = self.norm(o, &name("ssm_norm.weight"), hd)?;
        let z = self.g.reshape(z, &[t, vh, hd])?;
        let z = self.g.silu(z)?;
        let o = self.g.mul(o, z)?;
        let o = self.g.reshape(o, &[t, value_dim])?;
        self.linear(o, &name("ssm_out.weight"), d, value_dim)
    }

    /// A recurrent layer's state leaf (f32, every slot's).
    fn state(&mut self, name: &str, dims: &[usize]) -> Result<NodeId, GraphError> {
        self.g.leaf(name, baton_core::DType::F32, dims, baton_core::graph::Flags::STATE)
    }

    /// The kept states leaf `name` of one slot's dimensions `dims[1..]`
    /// (`dims[0]` is replaced by the rows kept) and each row's kept row,
    /// where the model keeps states.
    fn kept(&mut self, name: &str, dims: &[usize]) -> Result<Option<KeptStates>, GraphError> {
        let Some((keep, rows)) = self.kept else { return Ok(None) };
        let mut dims = dims.to_vec();
        dims[0] = rows;
        let kept = self.state(name, &dims)?;
        Ok(Some(KeptStates { kept, keep }))
    }

    /// Layer `l`'s query and its output gate, each `[T, heads × head_dim]`,
    /// from `attn_q`'s rows of `[query | gate]` per head.
    pub(super) fn gated_query(&mut self, l: usize, h: NodeId) -> Result<(NodeId, NodeId), GraphError> {
        let c = self.config;
        let (heads, hd) = (c.heads, c.head_dim);
        let t = self.g.node(h).layout.shape.dims()[0];
        let both = self.linear(h, &format!("blk.{l}.attn_q.weight"), 2 * heads * hd, c.dim)?;
        let both = self.g.reshape(both, &[t, heads, 2 * hd])?;
        let mut half = |start: usize| -> Result<NodeId, GraphError> {
            let view = self.g.narrow(both, 2, start, hd)?;
            let view = self.g.contiguous(view)?;
            self.g.reshape(view, &[t, heads * hd])
        };
        let q = half(0)?;
        let gate = half(hd)?;
        Ok((q, gate))
    }

    /// Layer `l`'s shared expert on the normalised rows `h [T, dim]`: a
    /// SwiGLU block of width `width`, weighted per token by
    /// `σ(ffn_gate_inp_shexp · h)`.
    pub(super) fn shared_expert(&mut self, l: usize, h: NodeId, width: usize) -> Result<NodeId, GraphError> {
        let d = self.config.dim;
        let t = self.g.node(h).layout.shape.dims()[0];
        let p = |n: &str| format!("blk.{l}.{n}.weight");
        let gate = self.linear(h, &p("ffn_gate_shexp"), width, d)?;
        let up = self.linear(h, &p("ffn_up_shexp"), width, d)?;
        let gate = self.g.silu(gate)?;
        let act = self.g.mul(gate, up)?;
        let down = self.linear(act, &p("ffn_down_shexp"), d, width)?;
        // The gate's weight is one row: its product with each token is the
        // sum of the elementwise product.
        let w = self.weight(&p("ffn_gate_inp_shexp"), &[d])?;
        let each = self.g.mul(h, w)?;
        let each = self.g.reshape(each, &[t, d, 1])?;
        let score = self.g.sum_rows(each)?;
        let weight = self.g.sigmoid(score)?;
        self.g.mul(down, weight)
    }
}
