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

use baton_core::graph::{Flags, Graph, GraphError, NodeId, SlotCaches, ATTENTION_BLOCK};
use baton_core::DType;

mod expert_split;
mod gemma4;
mod hybrid;
mod names;

pub use names::*;

use crate::arch::{Activation, LayerAttention, SWIGLU_CLAMPED};
use crate::config::{Experts, LlamaConfig};
use crate::expert_parallel::{share_name, ExpertSplit};
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
    /// Under an expert split, layer `l`'s products by device `d`'s share of
    /// its experts ([`expert_share_group`]): `ExpertShare(l, d)`.
    ExpertShare(usize, usize),
}

/// What placement group `group` holds.
pub fn group_place(config: &LlamaConfig, group: u32) -> GroupPlace {
    let (g, layers) = (group as usize, config.layers);
    match g.checked_sub(layers + 2) {
        Some(i) if i >= layers => GroupPlace::ExpertShare((i - layers) % layers, (i - layers) / layers),
        Some(l) => GroupPlace::Experts(l),
        None => GroupPlace::Layer(g.saturating_sub(1).min(layers - 1)),
    }
}

/// The placement group of layer `l`'s products by device `device`'s share
/// of its experts (an expert split).
pub fn expert_share_group(config: &LlamaConfig, l: usize, device: usize) -> u32 {
    (2 * config.layers + 2 + device * config.layers + l) as u32
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
    /// The experts split over devices, if they are.
    expert_split: Option<ExpertSplit>,
    /// Rows per chunk of the delta rule; 0: row by row.
    delta_chunk: usize,
    /// The input of each row's kept state ([`STATE_KEEP`]) and the rows
    /// of kept states, in a model that keeps some.
    kept: Option<(NodeId, usize)>,
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
    /// `per_slot` rows (`slots`), or of a paged cache, over the blocks its
    /// row of `table` lists.
    fn attention_in_slots(
        &mut self,
        q: NodeId,
        new: Option<(NodeId, NodeId)>,
        (positions, slots, rows, table): (NodeId, NodeId, NodeId, Option<NodeId>),
        (kc, vc): (NodeId, NodeId),
        per_slot: usize,
        (sliding, sinks): (Option<usize>, Option<NodeId>),
    ) -> Result<NodeId, GraphError> {
        if let Some(new) = new {
            self.write_cache(new, (kc, vc), rows)?;
        }
        let slots = Some(SlotCaches { slots, rows: per_slot, table });
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
            let y = match (self.expert_split, self.experts_apart) {
                (Some(split), _) => self.split_experts(l, h, experts, split),
                // A view does not cross devices: the experts' side copies
                // its rows first.
                (None, true) => self.g.contiguous(h).and_then(|rows| self.experts(l, rows, experts)),
                (None, false) => self.experts(l, h, experts),
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
        let width = c.layer_ffn_dim(l);
        let gate = self.linear(h, &p("ffn_gate"), width, c.dim)?;
        let up = self.linear(h, &p("ffn_up"), width, c.dim)?;
        let act = self.gated(gate, up)?;
        self.linear(act, &p("ffn_down"), c.dim, width)
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
    /// k]` of the weight `table` `[count, n]`), where the architecture has
    /// them.
    fn expert_bias(&mut self, table: &str, y: NodeId, ids: NodeId, count: usize) -> Result<NodeId, GraphError> {
        if !self.config.traits().expert_biases {
            return Ok(y);
        }
        let dims = self.g.node(y).layout.shape.dims().to_vec();
        let table = self.weight(table, &[count, dims[2]])?;
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
        let (ids, weights) = self.router(l, h, e)?;
        let outs = self.expert_products(l, h, ids, e, None)?;
        let outs = self.expert_bias(&format!("blk.{l}.ffn_down_exps.bias"), outs, ids, e.count)?;
        self.weighted_sum(outs, weights)
    }

    /// Layer `l`'s router on the rows `h [T, dim]`: each token's `used`
    /// best experts `[T, used]` (i32) and their weights `[T, used]`.
    fn router(&mut self, l: usize, h: NodeId, e: Experts) -> Result<(NodeId, NodeId), GraphError> {
        let d = self.config.dim;
        let mut scores = self.linear(h, &format!("blk.{l}.ffn_gate_inp.weight"), e.count, d)?;
        if self.config.traits().expert_biases {
            let bias = self.weight(&format!("blk.{l}.ffn_gate_inp.bias"), &[e.count])?;
            scores = self.g.add(scores, bias)?;
        }
        let ids = self.g.top_k(scores, e.used)?;
        let chosen = self.g.take_columns(scores, ids)?;
        Ok((ids, self.g.softmax(chosen, 1.0, false)?))
    }

    /// Each token's rows `h [T, dim]` through its chosen experts `ids`
    /// (gate and up, their biases, the activation, down; not the down
    /// product's bias): `[T, used, dim]`. With `share` (a device and its
    /// experts `first..first + count`), through that device's share of the
    /// experts only ([`share_name`]), the other rows `-0.0`.
    fn expert_products(
        &mut self,
        l: usize,
        h: NodeId,
        ids: NodeId,
        e: Experts,
        share: Option<(usize, std::ops::Range<usize>)>,
    ) -> Result<NodeId, GraphError> {
        let d = self.config.dim;
        let t = self.g.node(h).layout.shape.dims()[0];
        let rows = self.g.reshape(h, &[t, 1, d])?;
        let held = share.as_ref().map_or(e.count, |(_, experts)| experts.len());
        let name = |n: &str| match &share {
            Some((device, _)) => share_name(n, *device),
            None => n.to_string(),
        };
        let p = |n: &str| name(&format!("blk.{l}.{n}.weight"));
        let bias = |n: &str| name(&format!("blk.{l}.{n}.bias"));
        let gate = self.weight(&p("ffn_gate_exps"), &[held, e.ffn_dim, d])?;
        let up = self.weight(&p("ffn_up_exps"), &[held, e.ffn_dim, d])?;
        let down = self.weight(&p("ffn_down_exps"), &[held, d, e.ffn_dim])?;
        let first = share.as_ref().map(|(_, experts)| experts.start);
        let product = |b: &mut Self, x: NodeId, w: NodeId| match first {
            Some(first) => b.g.matmul_id_share(x, w, ids, first),
            None => b.g.matmul_id(x, w, ids),
        };
        let gate = product(self, rows, gate)?;
        let gate = self.expert_bias(&bias("ffn_gate_exps"), gate, ids, e.count)?;
        let up = product(self, rows, up)?;
        let up = self.expert_bias(&bias("ffn_up_exps"), up, ids, e.count)?;
        let act = self.gated(gate, up)?;
        product(self, act, down)
    }

    /// The experts' outputs `outs [T, used, n]` times their weights `[T,
    /// used]`, summed in order of rank ([`Op::SumRows`]). (The weights'
    /// view is taken here, where they are read: a view does not cross
    /// between splits.)
    ///
    /// [`Op::SumRows`]: baton_core::graph::Op::SumRows
    fn weighted_sum(&mut self, outs: NodeId, weights: NodeId) -> Result<NodeId, GraphError> {
        let dims = self.g.node(weights).layout.shape.dims().to_vec();
        let weights = self.g.reshape(weights, &[dims[0], dims[1], 1])?;
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
    /// A paged cache's block tables ([`BLOCK_TABLE`]).
    table: Option<NodeId>,
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
    /// A paged cache's blocks: the layers without a ring are a pool of
    /// this many blocks read through [`BLOCK_TABLE`] (batches in slots
    /// only).
    pub pool: Option<usize>,
    /// The experts split over devices ([`expert_share_group`]), if they
    /// are.
    pub expert_split: Option<ExpertSplit>,
    /// Rows per chunk of the recurrent layers' delta rule; 0: row by row.
    pub delta_chunk: usize,
    /// Rows of recurrent states kept after chosen rows of a step (see
    /// [`KeptStates`](baton_core::graph::KeptStates)); 0: none.
    pub kept_rows: usize,
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
    let mut b = Builder {
        g: Graph::new(),
        config,
        types,
        experts_apart: cache.experts_apart,
        expert_split: cache.expert_split,
        delta_chunk: cache.delta_chunk,
        kept: None,
    };
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
            table: match cache.pool {
                Some(_) => {
                    let per_slot = cache.context.div_ceil(ATTENTION_BLOCK);
                    Some(b.g.leaf(BLOCK_TABLE, DType::I32, &[cache.slots, per_slot], Flags::INPUT)?)
                }
                None => None,
            },
        }),
        false if cache.pool.is_some() => {
            return Err(GraphError::Invalid("a paged cache is read in slots only".into()));
        }
        false => None,
    };
    // A hybrid model's recurrent ops take every row's slot.
    let state_slots = match c.recurrent {
        Some(_) => Some(b.g.leaf(STATE_SLOTS, DType::I32, &[t], Flags::INPUT)?),
        None => None,
    };
    if c.recurrent.is_some() && cache.kept_rows > 0 {
        b.kept = Some((b.g.leaf(STATE_KEEP, DType::I32, &[t], Flags::INPUT)?, cache.kept_rows));
    }
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
        // A paged cache: the pool's rows, each slot's `per_slot` of them in
        // whole blocks through its table.
        let paged = cache.pool.filter(|_| ring.is_none());
        let (total, per_slot) = match paged {
            Some(blocks) => (blocks * ATTENTION_BLOCK, per_slot.next_multiple_of(ATTENTION_BLOCK)),
            None => (cache.slots * per_slot, per_slot),
        };
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
            let table = paged.and(inputs.table);
            let at = (positions, inputs.slots, rows, table);
            b.attention_in_slots(q, new, at, (kc, vc), per_slot, (layer.window, sinks))?
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
