//! What Gemma 4's layers add to the graph (see [`crate::gemma4`]): the
//! per-layer embeddings, the end of a layer (its feed-forward block, dense
//! or a dense block beside experts; the per-layer embedding; the layer's
//! output scale) and the logits' soft-cap.

use baton_core::graph::{GraphError, NodeId};

use super::{expert_group, Builder};
use crate::config::Experts;
use crate::gemma4::Gemma4;

impl Builder<'_> {
    /// Every layer's per-layer input `[T, layers, width]`: the token's row
    /// of `per_layer_token_embd` times `√width`, plus the RMS-normed
    /// projection of the scaled embedding `x0` (`per_layer_model_proj`,
    /// times `1/√dim`, normed by `per_layer_proj_norm`), times `1/√2`.
    pub(super) fn per_layer_inputs(&mut self, tokens: NodeId, x0: NodeId, width: usize) -> Result<NodeId, GraphError> {
        let c = self.config;
        let (t, all) = (self.g.node(x0).layout.shape.dims()[0], width * c.layers);
        let table = self.weight("per_layer_token_embd.weight", &[c.vocab, all])?;
        let own = self.g.get_rows(table, tokens)?;
        let own = self.g.scale(own, (width as f32).sqrt())?;
        let own = self.g.reshape(own, &[t, c.layers, width])?;
        let projected = self.linear(x0, "per_layer_model_proj.weight", all, c.dim)?;
        let projected = self.g.scale(projected, 1.0 / (c.dim as f32).sqrt())?;
        let projected = self.g.reshape(projected, &[t, c.layers, width])?;
        let projected = self.norm(projected, "per_layer_proj_norm.weight", width)?;
        let sum = self.g.add(projected, own)?;
        self.g.scale(sum, std::f32::consts::FRAC_1_SQRT_2)
    }

    /// The rest of Gemma 4's layer `l` after attention, on the residual
    /// stream `x`: the feed-forward block (with experts beside it where the
    /// model has them) added through `post_ffw_norm`, then the per-layer
    /// embedding (rows `per_layer` of every layer's inputs), then the
    /// layer's output scale.
    pub(super) fn gemma4_layer_end(
        &mut self,
        l: usize,
        x: NodeId,
        gemma: &Gemma4,
        per_layer: Option<&NodeId>,
    ) -> Result<NodeId, GraphError> {
        let c = self.config;
        let d = c.dim;
        let p = |n: &str| format!("blk.{l}.{n}.weight");
        let h = self.norm(x, &p("ffn_norm"), d)?;
        let mut f = self.dense_ffn(l, h)?;
        if let Some(experts) = c.experts {
            f = self.norm(f, &p("post_ffw_norm_1"), d)?;
            let group = self.g.group();
            self.g.set_group(Some(expert_group(c, l)));
            let moe = self.gemma4_experts(l, x, experts, gemma);
            self.g.set_group(group);
            let moe = self.norm(moe?, &p("post_ffw_norm_2"), d)?;
            f = self.g.add(f, moe)?;
        }
        let mut x = self.residual(x, f, &p("post_ffw_norm"))?;
        if let Some(&inputs) = per_layer {
            let width = gemma.per_layer;
            let t = self.g.node(x).layout.shape.dims()[0];
            let mine = self.g.narrow(inputs, 1, l, 1)?;
            let mine = self.g.contiguous(mine)?;
            let mine = self.g.reshape(mine, &[t, width])?;
            let gate = self.linear(x, &p("inp_gate"), width, d)?;
            let gate = self.g.gelu(gate)?;
            let gated = self.g.mul(gate, mine)?;
            let y = self.linear(gated, &p("proj"), d, width)?;
            let y = self.norm(y, &p("post_norm"), d)?;
            x = self.g.add(x, y)?;
        }
        if gemma.output_scale[l] {
            let scale = self.weight(&p("layer_output_scale"), &[1])?;
            x = self.g.mul(x, scale)?;
        }
        Ok(x)
    }

    /// Gemma 4's experts of layer `l` on the residual stream `x`: routed
    /// by `ffn_gate_inp · (rmsnorm(x) / √dim ⊙ ffn_gate_inp.scale)` (top-k,
    /// weighted by the softmax of the chosen logits), each a GeGLU block on
    /// `rmsnorm(x) · pre_ffw_norm_2` whose output is scaled by its
    /// `ffn_down_exps.scale`.
    fn gemma4_experts(&mut self, l: usize, x: NodeId, e: Experts, gemma: &Gemma4) -> Result<NodeId, GraphError> {
        let c = self.config;
        let d = c.dim;
        let p = |n: &str| format!("blk.{l}.{n}.weight");
        // A view does not cross devices: the experts' side copies its rows.
        let x = if self.experts_apart { self.g.contiguous(x)? } else { x };
        let t = self.g.node(x).layout.shape.dims()[0];
        let r = self.g.rms_norm(x, c.rms_eps)?;
        let r = self.g.scale(r, 1.0 / (d as f32).sqrt())?;
        let router_scale = self.weight(&format!("blk.{l}.ffn_gate_inp.scale"), &[d])?;
        let r = self.g.mul(r, router_scale)?;
        let scores = self.linear(r, &p("ffn_gate_inp"), e.count, d)?;
        let ids = self.g.top_k(scores, e.used)?;
        let chosen = self.g.take_columns(scores, ids)?;
        let weights = self.g.softmax(chosen, 1.0, false)?;
        let h = self.norm(x, &p("pre_ffw_norm_2"), d)?;
        let rows = self.g.reshape(h, &[t, 1, d])?;
        let (gate, up) = match gemma.merged_gate_up {
            true => {
                let both = self.weight(&p("ffn_gate_up_exps"), &[e.count, 2 * e.ffn_dim, d])?;
                let both = self.g.matmul_id(rows, both, ids)?;
                let mut half = |start: usize| -> Result<NodeId, GraphError> {
                    let view = self.g.narrow(both, 2, start, e.ffn_dim)?;
                    self.g.contiguous(view)
                };
                (half(0)?, half(e.ffn_dim)?)
            }
            false => {
                let gate = self.weight(&p("ffn_gate_exps"), &[e.count, e.ffn_dim, d])?;
                let up = self.weight(&p("ffn_up_exps"), &[e.count, e.ffn_dim, d])?;
                (self.g.matmul_id(rows, gate, ids)?, self.g.matmul_id(rows, up, ids)?)
            }
        };
        let act = self.gated(gate, up)?;
        let down = self.weight(&p("ffn_down_exps"), &[e.count, d, e.ffn_dim])?;
        let mut outs = self.g.matmul_id(act, down, ids)?;
        if gemma.expert_scales {
            let table = self.weight(&format!("blk.{l}.ffn_down_exps.scale"), &[e.count])?;
            let table = self.g.reshape(table, &[e.count, 1])?;
            let flat = self.g.reshape(ids, &[t * e.used])?;
            let scales = self.g.get_rows(table, flat)?;
            let scales = self.g.reshape(scales, &[t, e.used, 1])?;
            outs = self.g.mul(outs, scales)?;
        }
        let weights = self.g.reshape(weights, &[t, e.used, 1])?;
        let weighted = self.g.mul(outs, weights)?;
        self.g.sum_rows(weighted)
    }

    /// `cap · tanh(x / cap)`, as `cap · (σ(2x / cap) - σ(-2x / cap))`.
    pub(super) fn soft_cap(&mut self, x: NodeId, cap: f32) -> Result<NodeId, GraphError> {
        let up = self.g.scale(x, 2.0 / cap)?;
        let up = self.g.sigmoid(up)?;
        let down = self.g.scale(x, -2.0 / cap)?;
        let down = self.g.sigmoid(down)?;
        let up = self.g.scale(up, cap)?;
        let down = self.g.scale(down, -cap)?;
        self.g.add(up, down)
    }
}
