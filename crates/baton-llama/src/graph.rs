//! The llama-family decoder as a Baton graph: one builder for every
//! [`Architecture`](crate::Architecture), which reads where they differ
//! from [`ArchTraits`](crate::ArchTraits).
//!
//! One graph evaluates `tokens` new tokens after `past` cached positions.
//! Leaves: `tokens` and `positions` (i32 inputs), every weight under its GGUF
//! name, and the KV cache of each layer (`cache.k.N`, `cache.v.N`, state).
//! The output is `logits`: `[tokens, vocab]`, or `[1, vocab]` for the last
//! token only.
//!
//! Keys are stored as `[kv_heads, context, head_dim]` and values transposed
//! as `[kv_heads, head_dim, context]`, so both attention products read
//! contiguous rows; the new keys and values are scattered to their positions
//! (later nodes that read the cache see the write, by node order).
//! Attention reads a window of the cache padded to [`WINDOW_STEP`] positions
//! and masks by position, so one graph serves every decode step in the
//! window: its plan is reused and the host's cost per token stays small.
//! A sliding-window layer (Gemma 3's local layers) reads the same window
//! and masks the keys before its last `sliding_window` positions too.

use baton_core::graph::{Flags, Graph, GraphError, NodeId};
use baton_core::DType;

use crate::arch::Activation;
use crate::config::LlamaConfig;

/// Which logits a graph produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Logits {
    /// Only the last token's (generation).
    Last,
    /// Every token's (perplexity, teacher-forced checks).
    All,
}

/// Positions the attention window grows by: decode steps within one
/// window share one graph (and so one plan).
pub const WINDOW_STEP: usize = 256;

/// The key under which a graph is cached: its shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GraphShape {
    /// New tokens.
    pub tokens: usize,
    /// Cache positions attention reads (a multiple of [`WINDOW_STEP`] or the
    /// whole cache); positions past the tokens' own are masked.
    pub window: usize,
    /// Which logits.
    pub logits: Logits,
}

impl GraphShape {
    /// The shape evaluating `tokens` after `past` cached positions, with a
    /// cache of `context` positions.
    pub fn new(tokens: usize, past: usize, logits: Logits, context: usize) -> GraphShape {
        let window = (past + tokens).div_ceil(WINDOW_STEP).max(1) * WINDOW_STEP;
        GraphShape { tokens, window: window.min(context), logits }
    }
}

/// Name of layer `l`'s key cache leaf.
pub fn key_cache_name(l: usize) -> String {
    format!("cache.k.{l}")
}

/// Name of layer `l`'s value cache leaf.
pub fn value_cache_name(l: usize) -> String {
    format!("cache.v.{l}")
}

/// The layer whose device runs a placement group: the embedding (group 0)
/// goes with the first layer, the output (the last group) with the last.
pub fn group_layer(config: &LlamaConfig, group: u32) -> usize {
    (group as usize).saturating_sub(1).min(config.layers - 1)
}

/// The types of the weights, by name (from the loaded model).
pub trait WeightTypes {
    /// The type of weight `name`.
    fn weight_type(&self, name: &str) -> DType;
}

struct Builder<'a> {
    g: Graph,
    config: &'a LlamaConfig,
    types: &'a dyn WeightTypes,
}

impl Builder<'_> {
    fn weight(&mut self, name: &str, dims: &[usize]) -> Result<NodeId, GraphError> {
        let dtype = self.types.weight_type(name);
        self.g.leaf(name, dtype, dims, Flags::WEIGHT)
    }

    /// RMS norm over the last dimension (`width` wide), times the weight.
    fn norm(&mut self, x: NodeId, weight: &str, width: usize) -> Result<NodeId, GraphError> {
        let w = self.weight(weight, &[width])?;
        let n = self.g.rms_norm(x, self.config.rms_eps)?;
        self.g.mul(n, w)
    }

    fn linear(&mut self, x: NodeId, weight: &str, out: usize, input: usize) -> Result<NodeId, GraphError> {
        let w = self.weight(weight, &[out, input])?;
        self.g.matmul(x, w)
    }

    /// `x · Wᵀ (+ bias)`: layer `l`'s projection `name` (`attn_q`, …),
    /// with its bias where the architecture has one.
    fn projection(&mut self, l: usize, name: &str, x: NodeId, out: usize) -> Result<NodeId, GraphError> {
        let y = self.linear(x, &format!("blk.{l}.{name}.weight"), out, self.config.dim)?;
        if !self.config.traits().qkv_bias {
            return Ok(y);
        }
        let bias = self.weight(&format!("blk.{l}.{name}.bias"), &[out])?;
        self.g.add(y, bias)
    }

    /// Splits `x [T, heads × hd]` into heads, RMS-normalises each (where
    /// the architecture does, with `norm`'s weight) and rotates it.
    fn heads(
        &mut self,
        x: NodeId,
        heads: usize,
        norm: &str,
        positions: NodeId,
        rope: (f32, f32),
    ) -> Result<NodeId, GraphError> {
        let c = self.config;
        let t = self.g.node(x).layout.shape.dims()[0];
        let mut x = self.g.reshape(x, &[t, heads, c.head_dim])?;
        if c.traits().qk_norm {
            x = self.norm(x, norm, c.head_dim)?;
        }
        self.g.rope(x, positions, c.rope_mode, c.rope_dims, rope.0, rope.1)
    }

    /// The residual stream plus `y`, normalised first by `post_norm` where
    /// the architecture has norms after attention and FFN.
    fn residual(&mut self, x: NodeId, y: NodeId, post_norm: &str) -> Result<NodeId, GraphError> {
        let y = if self.config.traits().post_norms { self.norm(y, post_norm, self.config.dim)? } else { y };
        self.g.add(x, y)
    }
}

/// Builds the graph of one evaluation step.
pub fn build(
    config: &LlamaConfig,
    types: &dyn WeightTypes,
    shape: GraphShape,
    cache_dtype: DType,
    cache_context: usize,
) -> Result<Graph, GraphError> {
    let c = config;
    let (t, seen) = (shape.tokens, shape.window);
    let (hd, heads, kvh) = (c.head_dim, c.heads, c.kv_heads);
    let mut b = Builder { g: Graph::new(), config, types };
    // Placement groups: 0 = the embedding, l + 1 = layer l, layers + 1 = the
    // output (see `group_layer`).
    b.g.set_group(Some(0));
    let tokens = b.g.leaf("tokens", DType::I32, &[t], Flags::INPUT)?;
    let positions = b.g.leaf("positions", DType::I32, &[t], Flags::INPUT)?;
    let embd = b.weight("token_embd.weight", &[c.vocab, c.dim])?;
    let mut x = b.g.get_rows(embd, tokens)?;
    let traits = c.traits();
    if traits.embed_scale {
        x = b.g.scale(x, (c.dim as f32).sqrt())?;
    }
    for l in 0..c.layers {
        b.g.set_group(Some(l as u32 + 1));
        let p = |n: &str| format!("blk.{l}.{n}.weight");
        let layer = c.layer_attention(l);
        let rope = (layer.rope_base, layer.rope_scale);
        // Attention.
        let h = b.norm(x, &p("attn_norm"), c.dim)?;
        let q = b.projection(l, "attn_q", h, heads * hd)?;
        let k = b.projection(l, "attn_k", h, kvh * hd)?;
        let v = b.projection(l, "attn_v", h, kvh * hd)?;
        let q = b.heads(q, heads, &p("attn_q_norm"), positions, rope)?;
        let k = b.heads(k, kvh, &p("attn_k_norm"), positions, rope)?;
        let v = b.g.reshape(v, &[t, kvh, hd])?;
        let kc = b.g.leaf(&key_cache_name(l), cache_dtype, &[kvh, cache_context, hd], Flags::STATE)?;
        let vc = b.g.leaf(&value_cache_name(l), cache_dtype, &[kvh, hd, cache_context], Flags::STATE)?;
        // The new keys and values go to their positions (an input), so the
        // graph is the same for every step within the window.
        let k_rows = b.g.permute(kc, &[1, 0, 2])?;
        b.g.scatter_rows(k_rows, k, positions)?;
        let v_rows = b.g.permute(vc, &[2, 0, 1])?;
        b.g.scatter_rows(v_rows, v, positions)?;
        let keys = b.g.narrow(kc, 1, 0, seen)?;
        let values = b.g.narrow(vc, 2, 0, seen)?;
        let qh = b.g.permute(q, &[1, 0, 2])?;
        let qh = b.g.contiguous(qh)?;
        let scores = b.g.matmul(qh, keys)?;
        let probs = b.g.softmax_window(scores, c.attn_scale, positions, layer.window)?;
        let o = b.g.matmul(probs, values)?;
        let o = b.g.permute(o, &[1, 0, 2])?;
        let o = b.g.contiguous(o)?;
        let o = b.g.reshape(o, &[t, heads * hd])?;
        let attn = b.linear(o, &p("attn_output"), c.dim, heads * hd)?;
        x = b.residual(x, attn, &p("post_attention_norm"))?;
        // Feed-forward (gated: SwiGLU or GeGLU).
        let h = b.norm(x, &p("ffn_norm"), c.dim)?;
        let gate = b.linear(h, &p("ffn_gate"), c.ffn_dim, c.dim)?;
        let up = b.linear(h, &p("ffn_up"), c.ffn_dim, c.dim)?;
        let gate = match traits.activation {
            Activation::Silu => b.g.silu(gate)?,
            Activation::GeluTanh => b.g.gelu(gate)?,
        };
        let act = b.g.mul(gate, up)?;
        let down = b.linear(act, &p("ffn_down"), c.dim, c.ffn_dim)?;
        x = b.residual(x, down, &p("post_ffw_norm"))?;
    }
    b.g.set_group(Some(c.layers as u32 + 1));
    let mut x = b.norm(x, "output_norm.weight", c.dim)?;
    if shape.logits == Logits::Last && t > 1 {
        x = b.g.narrow(x, 0, t - 1, 1)?;
    }
    // A tied model binds `output.weight` to the token embedding's data.
    let logits = b.linear(x, "output.weight", c.vocab, c.dim)?;
    b.g.mark(logits, Flags::OUTPUT)?;
    b.g.set_name(logits, "logits")?;
    Ok(b.g)
}
