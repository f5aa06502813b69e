//! The llama-family decoder as a Baton graph: one builder for every
//! [`Architecture`](crate::Architecture), which reads where they differ
//! from [`ArchTraits`](crate::ArchTraits).
//!
//! One graph evaluates new tokens of one or more sequences ([`BatchShape`]),
//! each after its own cached positions in its own slot of the cache.
//! Leaves: `tokens` and `positions` (i32 inputs, every sequence's rows in
//! turn), every weight under its GGUF name, and the KV cache of each layer
//! (`cache.k.N`, `cache.v.N`, state). The output is `logits`: `[tokens,
//! vocab]`, or one row per sequence for its last token only. A batch of
//! several sequences also reads `logit_rows` (which rows give logits) and
//! writes each layer's attention rows scratch (`attn.rows.N`).
//!
//! Keys and values are stored as `[kv_heads, slots × context, head_dim]`
//! (of the cache's types, quantized ones included); the new keys and
//! values are scattered to their positions (later nodes that read the
//! cache see the write, by node order), and one fused attention node per
//! sequence and layer streams over its slot (online softmax over blocks of
//! keys: no row of scores is materialised). A batch of several sequences
//! on devices that attend in slots ([`BatchShape::in_slots`]) has instead
//! one scatter of each kind and one attention node per layer for all its
//! sequences: each row reads its own slot (the [`SLOTS`] input) and writes
//! its keys and values at its row of the whole cache ([`CACHE_ROWS`],
//! [`RING_CACHE_ROWS`]), so the graph depends on the batch's token counts
//! only.
//! Attention reads a window of the cache padded to [`WINDOW_STEP`] positions
//! (a quarter of that below the first step, so short sequences do not
//! attend over hundreds of empty positions) and masks by position, so one
//! graph serves every decode step in the window: its plan is reused and the
//! host's cost per token stays small.
//! A sliding-window layer (Gemma 3's local layers) masks the keys before
//! its last `sliding_window` positions too, and where the context is longer
//! than its window and a prompt batch its cache is a ring of the last
//! positions ([`RING_ROWS`]), read whole.

use baton_core::graph::{Flags, Graph, GraphError, NodeId};
use baton_core::DType;

mod gemma4;
mod hybrid;

use crate::arch::{Activation, LayerAttention, SWIGLU_CLAMPED};
use crate::config::{Experts, LlamaConfig};
use crate::state::KvTypes;

/// Which logits a graph produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Logits {
    /// Only the last token's (generation).
    Last,
    /// Every token's (perplexity, teacher-forced checks).
    All,
    /// No logits: every token's final hidden state (after the output norm),
    /// `dim` values per token, of one sequence (embeddings). The graph's
    /// output is named [`HIDDEN`].
    Hidden,
}

/// The name of a [`Logits::Hidden`] graph's output.
pub const HIDDEN: &str = "hidden";

/// Positions the attention window grows by: decode steps within one
/// window share one graph (and so one plan). Up to this many positions it
/// grows by a quarter of this.
pub const WINDOW_STEP: usize = 256;

/// The key under which a graph is cached: its shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GraphShape {
    /// New tokens.
    pub tokens: usize,
    /// Cache positions attention reads (a multiple of [`WINDOW_STEP`], of a
    /// quarter of it below it, or the whole cache); positions past the
    /// tokens' own are masked.
    pub window: usize,
    /// Which logits.
    pub logits: Logits,
}

impl GraphShape {
    /// The shape evaluating `tokens` after `past` cached positions, with a
    /// cache of `context` positions.
    pub fn new(tokens: usize, past: usize, logits: Logits, context: usize) -> GraphShape {
        let needed = past + tokens;
        let step = if needed <= WINDOW_STEP { WINDOW_STEP / 4 } else { WINDOW_STEP };
        let window = needed.div_ceil(step).max(1) * step;
        GraphShape { tokens, window: window.min(context), logits }
    }
}

/// One sequence's part of a batched evaluation: its tokens are the batch's
/// rows `offset..offset + tokens`, in order of the sequences.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SeqShape {
    /// Its KV cache slot.
    pub slot: usize,
    /// New tokens.
    pub tokens: usize,
    /// Cache positions its attention reads (as in [`GraphShape`]).
    pub window: usize,
}

/// The key under which a batched graph is cached: every sequence's shape,
/// in row order, and which logits.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BatchShape {
    /// The sequences (one, for a plain evaluation).
    pub seqs: Vec<SeqShape>,
    /// Which logits: [`Logits::Last`] gives one row per sequence (its last
    /// token's); [`Logits::All`] (one sequence only) one per token.
    pub logits: Logits,
    /// In a batch of several sequences, rows whose logits the
    /// [`LOGIT_ROWS`] input picks: 0 for one per sequence (its last
    /// token's); more when some sequence's every token's logits are
    /// asked for (a prompt's score carried by a decode step).
    pub logit_rows: usize,
    /// Rows whose final hidden states are an output besides the logits
    /// (the [`HIDDEN_ROWS`] input picks them; a step that carries an
    /// embedding's tokens): 0 for none.
    pub hidden_rows: usize,
    /// One attention node per layer for every sequence, each row in its
    /// own slot ([`SLOTS`]); the sequences' slots and windows are then
    /// inputs, and [`SeqShape`]'s `slot` and `window` are 0.
    pub in_slots: bool,
}

impl BatchShape {
    /// Rows of the batch: every sequence's tokens.
    pub fn tokens(&self) -> usize {
        self.seqs.iter().map(|s| s.tokens).sum()
    }
}

impl From<GraphShape> for BatchShape {
    fn from(shape: GraphShape) -> BatchShape {
        BatchShape {
            seqs: vec![SeqShape { slot: 0, tokens: shape.tokens, window: shape.window }],
            logits: shape.logits,
            logit_rows: 0,
            hidden_rows: 0,
            in_slots: false,
        }
    }
}

/// Name of layer `l`'s attention rows leaf: a scratch of `[batch, heads ×
/// head_dim]` where the attention outputs of several sequences are put
/// together before the output projection (only in batches of several).
pub fn attention_rows_name(l: usize) -> String {
    format!("attn.rows.{l}")
}

/// Name of the input that picks the rows that give logits: each
/// sequence's last row, or every row of some ([`BatchShape::logit_rows`])
/// (batches of several sequences).
pub const LOGIT_ROWS: &str = "logit_rows";

/// Name of the input that picks the rows whose hidden states a batch
/// outputs besides its logits ([`BatchShape::hidden_rows`]).
pub const HIDDEN_ROWS: &str = "hidden_rows";

/// Name of the input of each token's row in a sliding-window layer's ring
/// (its position modulo the ring's rows), when the cache has rings.
pub const RING_ROWS: &str = "ring_rows";

/// Name of the input of each token's slot (batches in slots).
pub const SLOTS: &str = "slots";

/// Name of the input of each token's row in the whole cache of a layer
/// without a ring: `slot × context + position` (batches in slots).
pub const CACHE_ROWS: &str = "cache_rows";

/// Name of the input of each token's row in the whole ring cache of a
/// sliding-window layer: `slot × ring + position mod ring` (batches in
/// slots, when the cache has rings).
pub const RING_CACHE_ROWS: &str = "ring_cache_rows";

/// Name of layer `l`'s key cache leaf.
pub fn key_cache_name(l: usize) -> String {
    format!("cache.k.{l}")
}

/// Name of layer `l`'s value cache leaf.
pub fn value_cache_name(l: usize) -> String {
    format!("cache.v.{l}")
}

/// Name of recurrent layer `l`'s convolution state leaf.
pub fn conv_state_name(l: usize) -> String {
    format!("cache.conv.{l}")
}

/// Name of recurrent layer `l`'s delta-rule state leaf.
pub fn delta_state_name(l: usize) -> String {
    format!("cache.delta.{l}")
}

/// Name of the input of each token's slot in a model with recurrent
/// layers (every step: their ops take the rows of every sequence).
pub const STATE_SLOTS: &str = "state_slots";

/// What a placement group holds: a layer's nodes (the embedding, group 0,
/// counts as the first layer's; the output, group `layers + 1`, as the
/// last's), or a layer's router and experts ([`expert_group`]), which run
/// on their layer's device unless placed elsewhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupPlace {
    /// Layer `l`'s nodes.
    Layer(usize),
    /// Layer `l`'s router and experts (`--cpu-moe`, `-ot exps=…`).
    Experts(usize),
}

/// What placement group `group` holds.
pub fn group_place(config: &LlamaConfig, group: u32) -> GroupPlace {
    let g = group as usize;
    match g.checked_sub(config.layers + 2) {
        Some(l) => GroupPlace::Experts(l.min(config.layers - 1)),
        None => GroupPlace::Layer(g.saturating_sub(1).min(config.layers - 1)),
    }
}

/// The placement group of layer `l`'s router and experts.
pub fn expert_group(config: &LlamaConfig, l: usize) -> u32 {
    (config.layers + 2 + l) as u32
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
    /// Whether some layer's experts run on another device than the layer.
    experts_apart: bool,
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
        layer: LayerAttention,
    ) -> Result<NodeId, GraphError> {
        let c = self.config;
        let t = self.g.node(x).layout.shape.dims()[0];
        let hd = layer.head_dim;
        let mut x = self.g.reshape(x, &[t, heads, hd])?;
        if c.traits().qk_norm {
            x = self.norm(x, norm, hd)?;
        }
        let frequencies = (layer.rope_base, layer.rope_scale);
        self.g.rope_pairs((x, positions), (c.rope_mode, layer.rope_dims, layer.rotated_pairs), frequencies, layer.yarn)
    }

    /// Layer `l`'s new keys and values `[T, kv_heads, head_dim]` from the
    /// normalised rows `h`: keys normed per head (where the architecture
    /// does) and rotated; Gemma 4's values RMS-normed without a weight, and
    /// its keys' projection where the layer has no `attn_v`.
    fn keys_values(
        &mut self,
        l: usize,
        h: NodeId,
        positions: NodeId,
        layer: LayerAttention,
    ) -> Result<(NodeId, NodeId), GraphError> {
        let c = self.config;
        let (t, kvh, hd) = (self.g.node(h).layout.shape.dims()[0], layer.kv_heads, layer.head_dim);
        let k = self.projection(l, "attn_k", h, kvh * hd)?;
        let v = match c.gemma4.as_ref().is_some_and(|g| g.values_from_keys[l]) {
            true => k,
            false => self.projection(l, "attn_v", h, kvh * hd)?,
        };
        let k = self.heads(k, kvh, &format!("blk.{l}.attn_k_norm.weight"), positions, layer)?;
        let mut v = self.g.reshape(v, &[t, kvh, hd])?;
        if c.gemma4.is_some() {
            v = self.g.rms_norm(v, c.rms_eps)?;
        }
        Ok((k, v))
    }

    /// One sequence's attention: writes its keys and values `k`, `v`
    /// (`[t, kv_heads, head_dim]`; none where the layer reads an earlier
    /// layer's) at rows `rows` of its slot's cache
    /// `(keys, values)` (their positions, or a ring's rows for them), and
    /// attends over the first `window` rows (the fused, streamed
    /// [`Op::Attention`](baton_core::graph::Op)), returning
    /// `[t, heads, head_dim]`.
    #[allow(clippy::too_many_arguments)]
    fn attention(
        &mut self,
        q: NodeId,
        new: Option<(NodeId, NodeId)>,
        (positions, rows): (NodeId, NodeId),
        (kc, vc): (NodeId, NodeId),
        window: usize,
        (sliding, sinks): (Option<usize>, Option<NodeId>),
    ) -> Result<NodeId, GraphError> {
        // The new keys and values go to their rows (an input), so the graph
        // is the same for every step within the window.
        if let Some(new) = new {
            self.write_cache(new, (kc, vc), rows)?;
        }
        let keys = self.g.narrow(kc, 1, 0, window)?;
        let values = self.g.narrow(vc, 1, 0, window)?;
        self.g.attention_node(q, (keys, values), positions, None, sinks, self.config.attn_scale, sliding)
    }

    /// Writes keys `k` and values `v` (`[t, kv_heads, head_dim]`) at rows
    /// `rows` of the caches `(kc, vc)` (`[kv_heads, rows, head_dim]`).
    fn write_cache(
        &mut self,
        (k, v): (NodeId, NodeId),
        (kc, vc): (NodeId, NodeId),
        rows: NodeId,
    ) -> Result<(), GraphError> {
        for (new, cache) in [(k, kc), (v, vc)] {
            let by_row = self.g.permute(cache, &[1, 0, 2])?;
            self.g.scatter_rows(by_row, new, rows)?;
        }
        Ok(())
    }

    /// Every sequence's attention in one node (a batch in slots): writes the
    /// new keys and values (if the layer has its own) at each row's row `rows` of the whole
    /// caches `(kc, vc)` and attends each query row over its own slot of
    /// `per_slot` rows (`slots`).
    fn attention_in_slots(
        &mut self,
        q: NodeId,
        new: Option<(NodeId, NodeId)>,
        (positions, slots, rows): (NodeId, NodeId, NodeId),
        (kc, vc): (NodeId, NodeId),
        per_slot: usize,
        (sliding, sinks): (Option<usize>, Option<NodeId>),
    ) -> Result<NodeId, GraphError> {
        if let Some(new) = new {
            self.write_cache(new, (kc, vc), rows)?;
        }
        let slots = Some((slots, per_slot));
        self.g.attention_node(q, (kc, vc), positions, slots, sinks, self.config.attn_scale, sliding)
    }

    /// Layer `l`'s gated feed-forward block (SwiGLU or GeGLU) on the
    /// residual stream `x`, added back to it.
    fn feed_forward(&mut self, l: usize, x: NodeId) -> Result<NodeId, GraphError> {
        let c = self.config;
        let p = |n: &str| format!("blk.{l}.{n}.weight");
        let h = self.norm(x, &p(c.traits().ffn_norm), c.dim)?;
        if let Some(experts) = c.experts {
            // The router and experts in a group of their own (which may be
            // placed on another device than the layer's).
            let group = self.g.group();
            self.g.set_group(Some(expert_group(c, l)));
            let y = match self.experts_apart {
                // A view does not cross devices: the experts' side copies
                // its rows first.
                true => self.g.contiguous(h).and_then(|rows| self.experts(l, rows, experts)),
                false => self.experts(l, h, experts),
            };
            self.g.set_group(group);
            let mut y = y?;
            if let Some(width) = experts.shared {
                let shared = self.shared_expert(l, h, width)?;
                y = self.g.add(y, shared)?;
            }
            return self.residual(x, y, &p("post_ffw_norm"));
        }
        let down = self.dense_ffn(l, h)?;
        self.residual(x, down, &p("post_ffw_norm"))
    }

    /// Layer `l`'s dense gated block (`ffn_gate`, `ffn_up`, `ffn_down`) on
    /// the normalised rows `h`.
    fn dense_ffn(&mut self, l: usize, h: NodeId) -> Result<NodeId, GraphError> {
        let c = self.config;
        let p = |n: &str| format!("blk.{l}.{n}.weight");
        let gate = self.linear(h, &p("ffn_gate"), c.ffn_dim, c.dim)?;
        let up = self.linear(h, &p("ffn_up"), c.ffn_dim, c.dim)?;
        let act = self.gated(gate, up)?;
        self.linear(act, &p("ffn_down"), c.dim, c.ffn_dim)
    }

    /// The gate's activation times the up projection, as the architecture
    /// gates its feed-forward blocks.
    fn gated(&mut self, gate: NodeId, up: NodeId) -> Result<NodeId, GraphError> {
        let gate = match self.config.traits().activation {
            Activation::Silu => self.g.silu(gate)?,
            Activation::GeluTanh => self.g.gelu(gate)?,
            Activation::SwiGluClamped => return self.g.swiglu_clamped(gate, up, SWIGLU_CLAMPED.0, SWIGLU_CLAMPED.1),
        };
        self.g.mul(gate, up)
    }

    /// `y [T, k, n]` plus each token's chosen experts' biases (rows `ids [T,
    /// k]` of layer `l`'s `name.bias` `[count, n]`), where the architecture
    /// has them.
    fn expert_bias(
        &mut self,
        l: usize,
        name: &str,
        y: NodeId,
        ids: NodeId,
        count: usize,
    ) -> Result<NodeId, GraphError> {
        if !self.config.traits().expert_biases {
            return Ok(y);
        }
        let dims = self.g.node(y).layout.shape.dims().to_vec();
        let table = self.weight(&format!("blk.{l}.{name}.bias"), &[count, dims[2]])?;
        let flat = self.g.reshape(ids, &[dims[0] * dims[1]])?;
        let rows = self.g.get_rows(table, flat)?;
        let rows = self.g.reshape(rows, &dims)?;
        self.g.add(y, rows)
    }

    /// Layer `l`'s mixture of experts on the normalised rows `h [T, dim]`:
    /// the router's `used` best experts per token (top-k of its logits),
    /// weighted by the softmax of their logits (which is the router's
    /// softmax over every expert renormalised over the chosen), each a
    /// SwiGLU block run on that token only ([`Op::MatMulId`]), the
    /// weighted outputs summed in order of rank.
    ///
    /// [`Op::MatMulId`]: baton_core::graph::Op::MatMulId
    fn experts(&mut self, l: usize, h: NodeId, e: Experts) -> Result<NodeId, GraphError> {
        let d = self.config.dim;
        let p = |n: &str| format!("blk.{l}.{n}.weight");
        let t = self.g.node(h).layout.shape.dims()[0];
        let mut scores = self.linear(h, &p("ffn_gate_inp"), e.count, d)?;
        if self.config.traits().expert_biases {
            let bias = self.weight(&format!("blk.{l}.ffn_gate_inp.bias"), &[e.count])?;
            scores = self.g.add(scores, bias)?;
        }
        let ids = self.g.top_k(scores, e.used)?;
        let chosen = self.g.take_columns(scores, ids)?;
        let weights = self.g.softmax(chosen, 1.0, false)?;
        let rows = self.g.reshape(h, &[t, 1, d])?;
        let gate = self.weight(&p("ffn_gate_exps"), &[e.count, e.ffn_dim, d])?;
        let up = self.weight(&p("ffn_up_exps"), &[e.count, e.ffn_dim, d])?;
        let down = self.weight(&p("ffn_down_exps"), &[e.count, d, e.ffn_dim])?;
        let gate = self.g.matmul_id(rows, gate, ids)?;
        let gate = self.expert_bias(l, "ffn_gate_exps", gate, ids, e.count)?;
        let up = self.g.matmul_id(rows, up, ids)?;
        let up = self.expert_bias(l, "ffn_up_exps", up, ids, e.count)?;
        let act = self.gated(gate, up)?;
        let outs = self.g.matmul_id(act, down, ids)?;
        let outs = self.expert_bias(l, "ffn_down_exps", outs, ids, e.count)?;
        let weights = self.g.reshape(weights, &[t, e.used, 1])?;
        let weighted = self.g.mul(outs, weights)?;
        self.g.sum_rows(weighted)
    }

    /// The residual stream plus `y`, normalised first by `post_norm` where
    /// the architecture has norms after attention and FFN.
    fn residual(&mut self, x: NodeId, y: NodeId, post_norm: &str) -> Result<NodeId, GraphError> {
        let y = if self.config.traits().post_norms { self.norm(y, post_norm, self.config.dim)? } else { y };
        self.g.add(x, y)
    }
}

/// The inputs of a batch in slots (see [`BatchShape::in_slots`]).
struct InSlots {
    slots: NodeId,
    rows: NodeId,
    ring_rows: Option<NodeId>,
}

/// The KV cache's geometry: element types, positions per slot, slots.
#[derive(Clone, Copy, Debug)]
pub struct CacheGeometry {
    /// Element types of the keys and the values.
    pub dtypes: KvTypes,
    /// Positions of one slot (one sequence's context).
    pub context: usize,
    /// Rows per slot of the sliding-window layers' rings, if they have
    /// rings ([`ring_rows`](crate::state::ring_rows)); their rows are
    /// written at [`RING_ROWS`].
    pub ring: Option<usize>,
    /// Sequences it holds.
    pub slots: usize,
    /// Rows of the attention rows scratch (the most tokens of a batch).
    pub batch: usize,
    /// Whether some layer's router and experts run on another device than
    /// the layer ([`expert_group`]).
    pub experts_apart: bool,
}

/// Builds the graph of one evaluation step of one or more sequences.
///
/// Every row-wise part (embedding, norms, projections, FFN, output) runs
/// once over all the batch's rows, so each weight is read once per step;
/// attention runs per sequence, on its slot of the cache. With several
/// sequences, their attention outputs are put together in the layer's
/// attention rows scratch, and the logits are the rows `logit_rows` picks.
pub fn build(
    config: &LlamaConfig,
    types: &dyn WeightTypes,
    shape: &BatchShape,
    cache: CacheGeometry,
) -> Result<Graph, GraphError> {
    let c = config;
    let t = shape.tokens();
    let several = shape.seqs.len() > 1;
    let heads = c.heads;
    let mut b = Builder { g: Graph::new(), config, types, experts_apart: cache.experts_apart };
    // Placement groups: 0 = the embedding, l + 1 = layer l, layers + 1 = the
    // output (see `group_place`).
    b.g.set_group(Some(0));
    let tokens = b.g.leaf("tokens", DType::I32, &[t], Flags::INPUT)?;
    let positions = b.g.leaf("positions", DType::I32, &[t], Flags::INPUT)?;
    let ring_rows = match cache.ring {
        Some(_) => Some(b.g.leaf(RING_ROWS, DType::I32, &[t], Flags::INPUT)?),
        None => None,
    };
    // In slots: each row's slot and its rows in the whole caches.
    let in_slots = match shape.in_slots {
        true => Some(InSlots {
            slots: b.g.leaf(SLOTS, DType::I32, &[t], Flags::INPUT)?,
            rows: b.g.leaf(CACHE_ROWS, DType::I32, &[t], Flags::INPUT)?,
            ring_rows: match cache.ring {
                Some(_) => Some(b.g.leaf(RING_CACHE_ROWS, DType::I32, &[t], Flags::INPUT)?),
                None => None,
            },
        }),
        false => None,
    };
    // A hybrid model's recurrent ops take every row's slot.
    let state_slots = match c.recurrent {
        Some(_) => Some(b.g.leaf(STATE_SLOTS, DType::I32, &[t], Flags::INPUT)?),
        None => None,
    };
    let embd = b.weight("token_embd.weight", &[c.vocab, c.dim])?;
    let mut x = b.g.get_rows(embd, tokens)?;
    let traits = c.traits();
    if traits.embed_scale {
        x = b.g.scale(x, (c.dim as f32).sqrt())?;
    }
    // Gemma 4's per-layer embeddings, computed once for every layer.
    let per_layer = match &c.gemma4 {
        Some(g) if g.per_layer > 0 => Some(b.per_layer_inputs(tokens, x, g.per_layer)?),
        _ => None,
    };
    // Each attention layer's cache leaves (a later layer may read them).
    let mut caches: Vec<Option<(NodeId, NodeId)>> = vec![None; c.layers];
    for l in 0..c.layers {
        b.g.set_group(Some(l as u32 + 1));
        let p = |n: &str| format!("blk.{l}.{n}.weight");
        if let Some(r) = c.recurrent.as_ref().filter(|r| r.is_recurrent(l)) {
            let slots = state_slots.ok_or(GraphError::Invalid("recurrent layers without their slots".into()))?;
            let h = b.norm(x, &p("attn_norm"), c.dim)?;
            let y = b.recurrent_layer(l, h, r, (slots, positions), cache.slots)?;
            x = b.g.add(x, y)?;
            x = b.feed_forward(l, x)?;
            continue;
        }
        let layer = c.layer_attention(l);
        let (hd, kvh) = (layer.head_dim, layer.kv_heads);
        let sinks = match c.traits().attn_sinks {
            true => Some(b.weight(&p("attn_sinks"), &[heads])?),
            false => None,
        };
        // Attention.
        let h = b.norm(x, &p("attn_norm"), c.dim)?;
        let (q, gate) = match traits.gated_attention {
            true => b.gated_query(l, h).map(|(q, gate)| (q, Some(gate)))?,
            false => (b.projection(l, "attn_q", h, heads * hd)?, None),
        };
        let q = b.heads(q, heads, &p("attn_q_norm"), positions, layer)?;
        // A layer that shares an earlier layer's keys and values computes
        // none and attends over that layer's cache.
        let source = c.kv_source(l);
        let new = match source == l {
            true => Some(b.keys_values(l, h, positions, layer)?),
            false => None,
        };
        // A sliding-window layer with a ring holds its last `ring` positions.
        let ring = layer.window.and(cache.ring).zip(ring_rows);
        let per_slot = ring.map_or(cache.context, |(rows, _)| rows);
        let total = cache.slots * per_slot;
        let (kc, vc) = match caches.get(source).copied().flatten() {
            Some(leaves) if source != l => leaves,
            _ => {
                let kc = b.g.leaf(&key_cache_name(l), cache.dtypes.k, &[kvh, total, hd], Flags::STATE)?;
                let vc = b.g.leaf(&value_cache_name(l), cache.dtypes.v, &[kvh, total, hd], Flags::STATE)?;
                (kc, vc)
            }
        };
        caches[l] = Some((kc, vc));
        let o = if let Some(inputs) = &in_slots {
            let rows = match ring {
                Some(_) => inputs.ring_rows.ok_or(GraphError::Invalid("a ring without its rows".into()))?,
                None => inputs.rows,
            };
            b.attention_in_slots(q, new, (positions, inputs.slots, rows), (kc, vc), per_slot, (layer.window, sinks))?
        } else {
            let rows = if several {
                Some(b.g.leaf(&attention_rows_name(l), DType::F32, &[cache.batch, heads * hd], Flags::STATE)?)
            } else {
                None
            };
            let mut offset = 0;
            let mut o = None;
            for seq in &shape.seqs {
                let part = |b: &mut Builder, x: NodeId| -> Result<NodeId, GraphError> {
                    if several {
                        b.g.narrow(x, 0, offset, seq.tokens)
                    } else {
                        Ok(x)
                    }
                };
                let (qs, ps) = (part(&mut b, q)?, part(&mut b, positions)?);
                let news = match new {
                    Some((k, v)) => Some((part(&mut b, k)?, part(&mut b, v)?)),
                    None => None,
                };
                // The sequence's slot of the cache (the whole cache when it has
                // one slot, so a one-sequence graph is what it always was).
                let (kc, vc) = if cache.slots > 1 {
                    let start = seq.slot * per_slot;
                    (b.g.narrow(kc, 1, start, per_slot)?, b.g.narrow(vc, 1, start, per_slot)?)
                } else {
                    (kc, vc)
                };
                // A ring is read whole and written at its rows; else the window.
                let (written_at, window) = match ring {
                    Some((ring_size, input)) => (part(&mut b, input)?, ring_size),
                    None => (ps, seq.window),
                };
                let os = b.attention(qs, news, (ps, written_at), (kc, vc), window, (layer.window, sinks))?;
                o = Some(match rows {
                    // Several sequences: each one's rows of the scratch.
                    Some(rows) => {
                        let dst = b.g.narrow(rows, 0, offset, seq.tokens)?;
                        let dst = b.g.reshape(dst, &[seq.tokens, heads, hd])?;
                        b.g.copy_into(dst, os)?
                    }
                    None => os,
                });
                offset += seq.tokens;
            }
            match (rows, o) {
                (Some(rows), _) => b.g.narrow(rows, 0, 0, t)?,
                (None, Some(o)) => o,
                (None, None) => return Err(GraphError::Invalid("a batch without sequences".into())),
            }
        };
        let mut o = b.g.reshape(o, &[t, heads * hd])?;
        if let Some(gate) = gate {
            let gate = b.g.sigmoid(gate)?;
            o = b.g.mul(o, gate)?;
        }
        let mut attn = b.linear(o, &p("attn_output"), c.dim, heads * hd)?;
        if c.traits().attn_output_bias {
            let bias = b.weight(&format!("blk.{l}.attn_output.bias"), &[c.dim])?;
            attn = b.g.add(attn, bias)?;
        }
        x = b.residual(x, attn, &p("post_attention_norm"))?;
        x = match &c.gemma4 {
            Some(g) => b.gemma4_layer_end(l, x, g, per_layer.as_ref())?,
            None => b.feed_forward(l, x)?,
        };
    }
    b.g.set_group(Some(c.layers as u32 + 1));
    let mut x = b.norm(x, "output_norm.weight", c.dim)?;
    if shape.logits == Logits::Hidden {
        if several {
            return Err(GraphError::Invalid("hidden states are for one sequence at a time".into()));
        }
        b.g.mark(x, Flags::OUTPUT)?;
        b.g.set_name(x, HIDDEN)?;
        return Ok(b.g);
    }
    if shape.hidden_rows > 0 {
        let picks = b.g.leaf(HIDDEN_ROWS, DType::I32, &[shape.hidden_rows], Flags::INPUT)?;
        let hidden = b.g.get_rows(x, picks)?;
        b.g.mark(hidden, Flags::OUTPUT)?;
        b.g.set_name(hidden, HIDDEN)?;
    }
    if several {
        if shape.logits == Logits::All {
            return Err(GraphError::Invalid("every token's logits are for one sequence at a time".into()));
        }
        let rows = if shape.logit_rows > 0 { shape.logit_rows } else { shape.seqs.len() };
        let picks = b.g.leaf(LOGIT_ROWS, DType::I32, &[rows], Flags::INPUT)?;
        x = b.g.get_rows(x, picks)?;
    } else if shape.logits == Logits::Last && t > 1 {
        x = b.g.narrow(x, 0, t - 1, 1)?;
    }
    // A tied model binds `output.weight` to the token embedding's data.
    let mut logits = b.linear(x, "output.weight", c.vocab, c.dim)?;
    if let Some(cap) = c.gemma4.as_ref().and_then(|g| g.final_softcap) {
        logits = b.soft_cap(logits, cap)?;
    }
    b.g.mark(logits, Flags::OUTPUT)?;
    b.g.set_name(logits, "logits")?;
    Ok(b.g)
}
