//! What Gemma 4 (`gemma4`: the dense 31B, the 26B-A4B mixture of experts
//! and the small E2B/E4B) adds to the llama-family decoder, read from GGUF
//! metadata and tensors as llama.cpp reads them (`docs/hybrid-facts.md` §4
//! has the facts):
//!
//! - sliding-window and full layers by a per-layer pattern, each kind with
//!   its own head size, KV heads, RoPE base and rotated dimensions; the
//!   full layers' RoPE pairs `(i, i + D/2)` over the whole head but rotates
//!   only the pairs whose `rope_freqs` factor is 1 (the others' factor is
//!   1e30: they keep their values);
//! - queries and keys RMS-normed per head with weights, values without, the
//!   scores not scaled (`1.0`); a full layer without `attn_v` uses its
//!   keys' projection for the values;
//! - the last `shared_kv_layers` layers have no keys or values of their
//!   own: they read those of the last sliding (or full) layer that has
//!   them;
//! - per-layer embeddings (`per_layer_token_embd`, projected and gated into
//!   each layer's residual stream);
//! - each layer's output multiplied by `layer_output_scale`; the logits
//!   soft-capped (`c · tanh(logits / c)`);
//! - the mixture of experts (26B-A4B): a dense feed-forward block beside
//!   the experts, the router on the scaled, normalised residual stream,
//!   each expert's output times its `ffn_down_exps.scale`.

use baton_gguf::{GgufFile, Metadata, OptionalKey};

use crate::arch::LayerAttention;
use crate::error::ModelError;

/// A `rope_freqs` factor at or above this leaves its pair unrotated (the
/// converter writes 1e30).
const UNROTATED_FACTOR: f32 = 1e29;

/// Gemma 4's per-layer structure (see the module's documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct Gemma4 {
    /// Per layer: whether it attends a sliding window
    /// (`attention.sliding_window_pattern`).
    pub sliding: Vec<bool>,
    /// Per layer: its key-value heads (`attention.head_count_kv`, an array
    /// or one value).
    pub kv_heads: Vec<usize>,
    /// Per layer: the width of its dense feed-forward block
    /// (`feed_forward_length`, an array or one value; E2B's KV-sharing
    /// layers are twice as wide).
    pub ffn_widths: Vec<usize>,
    /// Head size of the sliding layers (`attention.key_length_swa`); the
    /// full layers' is the config's `head_dim`.
    pub swa_head_dim: usize,
    /// Rotated elements of a sliding layer's head
    /// (`rope.dimension_count_swa`).
    pub swa_rope_dims: usize,
    /// RoPE base of the sliding layers (`rope.freq_base_swa`, 10,000).
    pub swa_rope_base: f32,
    /// Pairs a full layer's RoPE rotates (those whose `rope_freqs` factor
    /// is 1; all without the tensor).
    pub full_rotated_pairs: Option<usize>,
    /// Layers with keys and values of their own: the first ones (the rest
    /// share; `block_count - attention.shared_kv_layers`).
    pub kv_layers: usize,
    /// Width of each layer's per-layer embedding
    /// (`embedding_length_per_layer_input`; 0: none).
    pub per_layer: usize,
    /// `c` of the logits' soft-cap (`final_logit_softcapping`).
    pub final_softcap: Option<f32>,
    /// Per layer: whether its values are its keys' projection (no
    /// `attn_v`).
    pub values_from_keys: Vec<bool>,
    /// Per layer: whether it has a `layer_output_scale`.
    pub output_scale: Vec<bool>,
    /// The experts' gate and up projections are one tensor
    /// (`ffn_gate_up_exps`, gate first) rather than two.
    pub merged_gate_up: bool,
    /// Each expert's output is scaled by `ffn_down_exps.scale`.
    pub expert_scales: bool,
}

impl Gemma4 {
    /// Gemma 4's structure from a `gemma4` file of `layers` layers, whose
    /// full layers have heads of `head_dim` rotating `rope_dims`.
    pub fn from_file(
        file: &GgufFile,
        layers: usize,
        (head_dim, rope_dims): (usize, usize),
    ) -> Result<Gemma4, ModelError> {
        let meta = file.metadata();
        let key = |k: &str| format!("gemma4.{k}");
        // Every message starts with the key it is about (after `gemma4.`).
        let bad = |what: String| Err(ModelError::Config(format!("gemma4.{what}")));
        let get = |k: &str| -> Result<usize, ModelError> { Ok(meta.get_usize(&key(k))?) };
        let sliding = per_layer_flags(meta, &key("attention.sliding_window_pattern"), layers)?;
        let kv_heads = per_layer_counts(meta, &key("attention.head_count_kv"), layers)?;
        let ffn_widths = per_layer_counts(meta, &key("feed_forward_length"), layers)?;
        if let Some(l) = ffn_widths.iter().position(|&w| w == 0) {
            return bad(format!("feed_forward_length: a width of 0 at layer {l}"));
        }
        // One value, or a per-layer array of one value (checked by the config).
        let heads = per_layer_counts(meta, &key("attention.head_count"), layers)?.first().copied().unwrap_or(0);
        if let Some(l) = (0..layers).find(|&l| kv_heads[l] == 0 || heads % kv_heads[l] != 0) {
            return bad(format!("attention.head_count_kv: {} KV heads at layer {l} for {heads} heads", kv_heads[l]));
        }
        let swa_head_dim = get("attention.key_length_swa")?;
        let swa_value_dim = get("attention.value_length_swa")?;
        if swa_head_dim == 0 || swa_value_dim != swa_head_dim {
            return bad(format!(
                "attention.key_length_swa {swa_head_dim} and gemma4.attention.value_length_swa {swa_value_dim} must be equal"
            ));
        }
        let swa_rope_dims = meta.get_usize(&key("rope.dimension_count_swa")).optional()?.unwrap_or(swa_head_dim);
        if swa_rope_dims > swa_head_dim || swa_rope_dims % 2 != 0 {
            return bad(format!("rope.dimension_count_swa {swa_rope_dims} for heads of {swa_head_dim}"));
        }
        let shared = meta.get_usize(&key("attention.shared_kv_layers")).optional()?.unwrap_or(0);
        let kv_layers = layers.saturating_sub(shared);
        let mut g = Gemma4 {
            sliding,
            kv_heads,
            ffn_widths,
            swa_head_dim,
            swa_rope_dims,
            swa_rope_base: 10_000.0,
            full_rotated_pairs: None,
            kv_layers,
            per_layer: 0,
            final_softcap: None,
            values_from_keys: Vec::new(),
            output_scale: Vec::new(),
            merged_gate_up: false,
            expert_scales: false,
        };
        if shared > 0 {
            // A sharing layer reads the last KV layer of its kind: the last
            // two KV layers must be one of each.
            let ok = kv_layers >= 2 && g.sliding[kv_layers - 2] && !g.sliding[kv_layers - 1];
            if !ok {
                return bad(format!(
                    "attention.shared_kv_layers {shared} of {layers} layers: the last two layers with keys and values must be a sliding and a full one"
                ));
            }
        }
        if let Some(base) = meta.get_f32(&key("rope.freq_base_swa")).optional()? {
            g.swa_rope_base = base;
        }
        g.per_layer = get("embedding_length_per_layer_input")?;
        g.final_softcap = meta.get_f32(&key("final_logit_softcapping")).optional()?.filter(|&c| c != 0.0);
        if g.final_softcap.is_some_and(|c| !(c.is_finite() && c > 0.0)) {
            return bad(format!("final_logit_softcapping {:?}", g.final_softcap));
        }
        g.full_rotated_pairs = rotated_pairs(file, head_dim, rope_dims)?;
        let has = |name: String| file.tensor(&name).is_some();
        g.values_from_keys = (0..layers).map(|l| l < kv_layers && !has(format!("blk.{l}.attn_v.weight"))).collect();
        g.output_scale = (0..layers).map(|l| has(format!("blk.{l}.layer_output_scale.weight"))).collect();
        g.merged_gate_up = has("blk.0.ffn_gate_up_exps.weight".into());
        g.expert_scales = has("blk.0.ffn_down_exps.scale".into());
        Ok(g)
    }

    /// The layer whose keys and values layer `l` attends over: its own, or
    /// for a sharing layer the last KV layer of its kind.
    pub fn kv_source(&self, l: usize) -> usize {
        match l < self.kv_layers {
            true => l,
            false if self.sliding[l] => self.kv_layers - 2,
            false => self.kv_layers - 1,
        }
    }

    /// The shapes of the weights Gemma 4 adds to the model as a whole
    /// (per-layer embeddings and the full layers' RoPE factors), for a
    /// model of `dim`, `vocab` and `layers`, full heads of `head_dim`.
    pub fn model_shapes(
        &self,
        (dim, vocab, layers, head_dim): (usize, usize, usize, usize),
    ) -> Vec<(String, Vec<usize>)> {
        let mut out = Vec::new();
        if self.per_layer > 0 {
            out.push(("per_layer_token_embd.weight".to_string(), vec![vocab, self.per_layer * layers]));
            out.push(("per_layer_model_proj.weight".to_string(), vec![self.per_layer * layers, dim]));
            out.push(("per_layer_proj_norm.weight".to_string(), vec![self.per_layer]));
        }
        if self.full_rotated_pairs.is_some() {
            out.push(("rope_freqs.weight".to_string(), vec![head_dim / 2]));
        }
        out
    }
}

/// Pairs of a full layer's RoPE that rotate: from `rope_freqs.weight`
/// (`[head_dim / 2]` f32: 1.0 for each rotated pair, then 1e30), `None`
/// where the file has none (every pair of `rope_dims` rotates).
fn rotated_pairs(file: &GgufFile, head_dim: usize, rope_dims: usize) -> Result<Option<usize>, ModelError> {
    let Some(tensor) = file.tensor("rope_freqs.weight") else { return Ok(None) };
    let bad = |what: String| Err(ModelError::Config(format!("gemma4 rope_freqs.weight {what}")));
    if tensor.ggml_type() != baton_gguf::GgmlType::F32 || tensor.dims() != [rope_dims as u64 / 2] {
        return bad(format!(
            "is {:?} {:?}, not F32 [{}] (half the full layers' rope.dimension_count)",
            tensor.ggml_type(),
            tensor.dims(),
            rope_dims / 2
        ));
    }
    if rope_dims != head_dim {
        return bad(format!(
            "with rope.dimension_count {rope_dims} for heads of {head_dim} (Gemma 4 rotates whole heads)"
        ));
    }
    let factors: Vec<f32> =
        tensor.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    let rotated = factors.iter().take_while(|&&f| f == 1.0).count();
    if factors[rotated..].iter().any(|&f| f < UNROTATED_FACTOR) {
        return bad("holds factors other than 1 and 1e30 (only Gemma 4's proportional RoPE is supported)".into());
    }
    Ok(Some(rotated))
}

/// A per-layer bool array, or one period (`true` for all but every
/// `period`-th layer), of at least `layers` values.
fn per_layer_flags(meta: &Metadata, key: &str, layers: usize) -> Result<Vec<bool>, ModelError> {
    if matches!(meta.get(key), Some(baton_gguf::Value::Array(_))) {
        let flags = meta.get_bool_array(key)?;
        if flags.len() < layers {
            return Err(ModelError::Config(format!("{key}: {} flags for {layers} layers", flags.len())));
        }
        return Ok(flags[..layers].to_vec());
    }
    let period = meta.get_usize(key)?;
    if period == 0 {
        return Err(ModelError::Config(format!("{key}: a period of 0")));
    }
    Ok((0..layers).map(|l| (l + 1) % period != 0).collect())
}

/// A per-layer count array, or one count for every layer.
fn per_layer_counts(meta: &Metadata, key: &str, layers: usize) -> Result<Vec<usize>, ModelError> {
    if matches!(meta.get(key), Some(baton_gguf::Value::Array(_))) {
        let counts = meta.get_u32_array(key)?;
        if counts.len() < layers {
            return Err(ModelError::Config(format!("{key}: {} values for {layers} layers", counts.len())));
        }
        return Ok(counts[..layers].iter().map(|&c| c as usize).collect());
    }
    Ok(vec![meta.get_usize(key)?; layers])
}

impl Gemma4 {
    /// The shapes of layer `l`'s weights in a model of `dim` and `heads`
    /// (its dense block as wide as `ffn_widths` says), with `experts`
    /// (count and width) where it has them, attending as `layer` says.
    pub fn layer_shapes(
        &self,
        l: usize,
        (d, heads): (usize, usize),
        experts: Option<(usize, usize)>,
        layer: LayerAttention,
    ) -> Vec<(String, Vec<usize>)> {
        let (hd, f) = (layer.head_dim, self.ffn_widths[l]);
        let kv = layer.kv_heads * hd;
        let p = |n: &str| format!("blk.{l}.{n}.weight");
        let mut out = vec![(p("attn_norm"), vec![d]), (p("attn_q"), vec![heads * hd, d]), (p("attn_q_norm"), vec![hd])];
        if l < self.kv_layers {
            out.push((p("attn_k"), vec![kv, d]));
            if !self.values_from_keys[l] {
                out.push((p("attn_v"), vec![kv, d]));
            }
            out.push((p("attn_k_norm"), vec![hd]));
        }
        out.push((p("attn_output"), vec![d, heads * hd]));
        out.push((p("post_attention_norm"), vec![d]));
        if self.output_scale[l] {
            out.push((p("layer_output_scale"), vec![1]));
        }
        out.extend([(p("ffn_norm"), vec![d]), (p("ffn_gate"), vec![f, d]), (p("ffn_up"), vec![f, d])]);
        out.extend([(p("ffn_down"), vec![d, f]), (p("post_ffw_norm"), vec![d])]);
        if let Some((count, width)) = experts {
            out.push((p("ffn_gate_inp"), vec![count, d]));
            out.push((format!("blk.{l}.ffn_gate_inp.scale"), vec![d]));
            for norm in ["pre_ffw_norm_2", "post_ffw_norm_1", "post_ffw_norm_2"] {
                out.push((p(norm), vec![d]));
            }
            match self.merged_gate_up {
                true => out.push((p("ffn_gate_up_exps"), vec![count, 2 * width, d])),
                false => {
                    out.push((p("ffn_gate_exps"), vec![count, width, d]));
                    out.push((p("ffn_up_exps"), vec![count, width, d]));
                }
            }
            out.push((p("ffn_down_exps"), vec![count, d, width]));
            if self.expert_scales {
                out.push((format!("blk.{l}.ffn_down_exps.scale"), vec![count]));
            }
        }
        if self.per_layer > 0 {
            out.push((p("inp_gate"), vec![self.per_layer, d]));
            out.push((p("proj"), vec![d, self.per_layer]));
            out.push((p("post_norm"), vec![d]));
        }
        out
    }
}
