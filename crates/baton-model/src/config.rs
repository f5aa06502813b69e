//! Hyper-parameters of a llama-family model, from GGUF metadata.

use baton_core::graph::RopeMode;
use baton_core::graph::Yarn;
use baton_gguf::{GgufFile, Metadata, OptionalKey};

use crate::arch::{ArchTraits, Architecture, LayerAttention};
use crate::error::ModelError;
use crate::gemma4::Gemma4;
use crate::hybrid::Recurrent;

/// The shape and constants of a llama-family model (any
/// [`Architecture`]).
#[derive(Clone, Debug, PartialEq)]
pub struct LlamaConfig {
    /// `general.architecture`.
    pub arch: Architecture,
    /// `general.name`, if any.
    pub name: Option<String>,
    /// Embedding width.
    pub dim: usize,
    /// Transformer blocks.
    pub layers: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (grouped-query attention).
    pub kv_heads: usize,
    /// Elements per head (`attention.key_length`, else `dim / heads`).
    pub head_dim: usize,
    /// Feed-forward width (the widest layer's where widths differ by layer:
    /// see [`LlamaConfig::layer_ffn_dim`]).
    pub ffn_dim: usize,
    /// Vocabulary size.
    pub vocab: usize,
    /// Training context length.
    pub context: usize,
    /// RMS norm epsilon.
    pub rms_eps: f32,
    /// RoPE frequency base.
    pub rope_base: f32,
    /// Linear RoPE position scale (1 / factor).
    pub rope_scale: f32,
    /// Rotated elements per head.
    pub rope_dims: usize,
    /// RoPE pairing (normal for llama, NeoX for Qwen and Gemma).
    pub rope_mode: RopeMode,
    /// Multiplies the attention scores before the softmax.
    pub attn_scale: f32,
    /// Keys a sliding-window layer sees (`attention.sliding_window`), for
    /// architectures with such layers.
    pub sliding_window: Option<usize>,
    /// Whether the output projection reuses the token embedding.
    pub tied_output: bool,
    /// YaRN's scaling of RoPE (`rope.scaling.type` `yarn`).
    pub yarn: Option<Yarn>,
    /// Multi-token-prediction blocks after the model's own
    /// (`nextn_predict_layers`, counted in `block_count`): never run by the
    /// model's steps; [`MtpHead`](crate::MtpHead) computes Qwen 3.5's.
    pub prediction_layers: usize,
    /// The mixture of experts of each feed-forward block, for
    /// architectures that have one.
    pub experts: Option<Experts>,
    /// The recurrent layers of a hybrid architecture (`qwen35`,
    /// `qwen35moe`).
    pub recurrent: Option<Recurrent>,
    /// Gemma 4's per-layer structure (`gemma4`). Its `kv_heads` is then the
    /// most of any layer, and `head_dim` the full layers'.
    pub gemma4: Option<Gemma4>,
}

/// A mixture of experts in place of each feed-forward block: the router
/// (`ffn_gate_inp`, `[count, dim]`) scores every expert for each token,
/// the `used` best are run (`ffn_{gate,up,down}_exps`, one SwiGLU block of
/// width `ffn_dim` each, stacked `[count, ..]`), and their outputs are
/// summed weighted by the softmax of their scores (the router's softmax
/// over all experts, renormalised over those chosen: the same values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Experts {
    /// Experts per layer (`expert_count`).
    pub count: usize,
    /// Experts each token runs (`expert_used_count`).
    pub used: usize,
    /// Width of one expert's feed-forward block
    /// (`expert_feed_forward_length`).
    pub ffn_dim: usize,
    /// Width of the shared expert every token runs besides its chosen
    /// ones, where the architecture has one
    /// (`expert_shared_feed_forward_length`).
    pub shared: Option<usize>,
}

/// The most experts a layer may have (the reference engine's bound).
pub const MAX_EXPERTS: usize = 512;

impl Experts {
    /// The experts of an architecture `arch` file, from its metadata;
    /// `ffn_dim` is the file's `feed_forward_length`.
    fn from_meta(meta: &Metadata, arch: Architecture, ffn_dim: usize) -> Result<Experts, ModelError> {
        let key = |k: &str| format!("{arch}.{k}");
        let count = get_usize(meta, &key("expert_count"))?;
        let used = get_usize(meta, &key("expert_used_count"))?;
        if count == 0 || count > MAX_EXPERTS {
            return Err(ModelError::Config(format!("{}: {count} experts (1 to {MAX_EXPERTS})", key("expert_count"))));
        }
        if used == 0 || used > count {
            return Err(ModelError::Config(format!("{}: {used} experts used of {count}", key("expert_used_count"))));
        }
        // Qwen3-MoE files without the key size each expert at an even share.
        let shared_default = ffn_dim;
        let ffn_dim = match meta.get_usize(&key("expert_feed_forward_length")).optional()? {
            Some(f) => f,
            None => ffn_dim / used,
        };
        if ffn_dim == 0 {
            return Err(ModelError::Config(format!("{}: experts of width 0", key("expert_feed_forward_length"))));
        }
        let shared = match arch.traits().shared_expert {
            true => {
                Some(meta.get_usize(&key("expert_shared_feed_forward_length")).optional()?.unwrap_or(shared_default))
            }
            false => None,
        };
        if shared == Some(0) {
            return Err(ModelError::Config(format!("{}: 0", key("expert_shared_feed_forward_length"))));
        }
        Ok(Experts { count, used, ffn_dim, shared })
    }
}

fn get_usize(meta: &Metadata, key: &str) -> Result<usize, ModelError> {
    Ok(meta.get_usize(key)?)
}

/// The feed-forward width under `key`: one value, or for Gemma 4 a
/// per-layer array, whose widest sizes what the layers share
/// (`Gemma4::ffn_widths` holds each layer's); an array for another
/// architecture is an error naming the key. A file of experts only
/// (`experts`, Qwen 3.5 MoE) may leave it out: 0.
fn feed_forward_width(meta: &Metadata, key: &str, is_gemma4: bool, experts: bool) -> Result<usize, ModelError> {
    match meta.get(key) {
        Some(baton_gguf::Value::Array(_)) if is_gemma4 => {
            Ok(meta.get_u32_array(key)?.iter().map(|&w| w as usize).max().unwrap_or(0))
        }
        Some(baton_gguf::Value::Array(_)) => Err(ModelError::Config(format!(
            "{key} is an array: per-layer feed-forward widths are read for gemma4 only"
        ))),
        None if experts => Ok(0),
        _ => get_usize(meta, key),
    }
}

/// A count that llama.cpp reads as one value or a per-layer array
/// (`get_key_or_arr`): one value, or an array whose values are all equal
/// (Baton's layers share it); an array that differs by layer is an error
/// naming the key.
fn get_uniform_usize(meta: &Metadata, key: &str) -> Result<usize, ModelError> {
    if !matches!(meta.get(key), Some(baton_gguf::Value::Array(_))) {
        return get_usize(meta, key);
    }
    let values = meta.get_u32_array(key)?;
    match values.split_first() {
        Some((&first, rest)) if rest.iter().all(|&v| v == first) => Ok(first as usize),
        _ => Err(ModelError::Config(format!(
            "{key}: per-layer values {:?} differ (or are none); one value for every layer is supported",
            values.iter().take(8).collect::<Vec<_>>()
        ))),
    }
}

impl LlamaConfig {
    /// Reads the hyper-parameters of `file`, checking they are consistent.
    pub fn from_gguf(file: &GgufFile) -> Result<LlamaConfig, ModelError> {
        let meta = file.metadata();
        let name = meta.get_str("general.architecture")?;
        let arch = Architecture::from_name(name).ok_or_else(|| ModelError::Architecture(name.to_string()))?;
        let key = |k: &str| format!("{arch}.{k}");
        let dim = get_usize(meta, &key("embedding_length"))?;
        let heads = get_uniform_usize(meta, &key("attention.head_count"))?;
        let is_gemma4 = arch == Architecture::Gemma4;
        let kv_heads = match is_gemma4 {
            // A per-layer array: checked per layer by `Gemma4`.
            true => heads,
            false => meta.get_usize(&key("attention.head_count_kv")).optional()?.unwrap_or(heads),
        };
        if heads == 0 || kv_heads == 0 || heads % kv_heads != 0 {
            return Err(ModelError::Config(format!("{heads} heads and {kv_heads} kv heads do not divide")));
        }
        let head_dim = match meta.get_usize(&key("attention.key_length")).optional()? {
            Some(k) => k,
            None if dim % heads == 0 => dim / heads,
            None => return Err(ModelError::Config(format!("dim {dim} is not a multiple of {heads} heads"))),
        };
        let value_dim = meta.get_usize(&key("attention.value_length")).optional()?.unwrap_or(head_dim);
        if head_dim == 0 || value_dim != head_dim {
            return Err(ModelError::Config(format!("heads of {head_dim} keys and {value_dim} values")));
        }
        let vocab = match meta.get_usize(&key("vocab_size")).optional()? {
            Some(v) => v,
            None => meta.get_str_array("tokenizer.ggml.tokens")?.len(),
        };
        let scaling = meta.get_str(&key("rope.scaling.type")).optional()?;
        let (rope_scale, yarn) = match scaling {
            None | Some("none") => (1.0, None),
            Some("linear") => (1.0 / meta.get_f32(&key("rope.scaling.factor"))?, None),
            Some("yarn") => {
                let factor = meta.get_f32(&key("rope.scaling.factor"))?;
                let orig = meta.get_usize(&key("rope.scaling.original_context_length")).optional()?;
                let attn_factor = meta.get_f32(&key("rope.scaling.attn_factor")).optional()?.unwrap_or(1.0);
                if !(factor >= 1.0 && factor.is_finite()) {
                    return Err(ModelError::Config(format!("{}: {factor}", key("rope.scaling.factor"))));
                }
                let orig_context = match orig {
                    Some(o) => o,
                    None => get_usize(meta, &key("context_length"))?,
                };
                // llama.cpp's defaults (the beta keys are not read for these
                // architectures): ext_factor 1, beta_fast 32, beta_slow 1.
                let yarn = Yarn { orig_context, ext_factor: 1.0, attn_factor, beta_fast: 32.0, beta_slow: 1.0 };
                (1.0 / factor, Some(yarn))
            }
            Some(other) => return Err(ModelError::Config(format!("RoPE scaling {other:?} is not supported"))),
        };
        let rope_dims = meta.get_usize(&key("rope.dimension_count")).optional()?.unwrap_or(head_dim);
        if rope_dims > head_dim || rope_dims % 2 != 0 {
            return Err(ModelError::Config(format!("rope dims {rope_dims} for heads of {head_dim}")));
        }
        let traits = arch.traits();
        let sliding_window = match traits.swa_period.is_some() || is_gemma4 {
            true => Some(get_usize(meta, &key("attention.sliding_window"))?),
            false => None,
        };
        if sliding_window == Some(0) {
            return Err(ModelError::Config("a sliding window of 0 positions".into()));
        }
        // Multi-token-prediction blocks (Qwen 3.5) come after the model's
        // own and are counted in `block_count`; they are left unused.
        let blocks = get_usize(meta, &key("block_count"))?;
        let predict = meta.get_usize(&key("nextn_predict_layers")).optional()?.unwrap_or(0);
        if predict >= blocks && blocks > 0 {
            return Err(ModelError::Config(format!("{predict} prediction layers of {blocks} blocks")));
        }
        let layers = blocks - predict;
        let ffn_dim = feed_forward_width(meta, &key("feed_forward_length"), is_gemma4, traits.experts)?;
        // Gemma 4's experts are per file (26B-A4B has them, 31B not).
        let has_experts =
            traits.experts || (is_gemma4 && meta.get_usize(&key("expert_count")).optional()?.is_some_and(|n| n > 0));
        let experts = if has_experts { Some(Experts::from_meta(meta, arch, ffn_dim)?) } else { None };
        let gemma4 = match is_gemma4 {
            true => Some(Gemma4::from_file(file, layers, (head_dim, rope_dims))?),
            false => None,
        };
        let kv_heads = gemma4.as_ref().and_then(|g| g.kv_heads.iter().copied().max()).unwrap_or(kv_heads);
        let recurrent = match traits.hybrid {
            true => Some(Recurrent::from_meta(meta, arch.name(), layers)?),
            false => None,
        };
        let config = LlamaConfig {
            name: meta.get_str("general.name").optional()?.map(str::to_string),
            dim,
            layers,
            heads,
            kv_heads,
            head_dim,
            ffn_dim,
            vocab,
            context: get_usize(meta, &key("context_length"))?,
            rms_eps: meta.get_f32(&key("attention.layer_norm_rms_epsilon"))?,
            rope_base: meta.get_f32(&key("rope.freq_base")).optional()?.unwrap_or(10000.0),
            rope_scale,
            rope_dims,
            rope_mode: traits.rope_mode,
            attn_scale: attention_scale(arch, dim, heads, head_dim, layers),
            sliding_window,
            tied_output: file.tensor("output.weight").is_none(),
            experts,
            recurrent,
            gemma4,
            yarn,
            prediction_layers: predict,
            arch,
        };
        if config.layers == 0 || config.vocab == 0 || config.context == 0 {
            return Err(ModelError::Config("zero layers, vocabulary or context".into()));
        }
        Ok(config)
    }

    /// Where the architecture's blocks differ from llama's.
    pub fn traits(&self) -> ArchTraits {
        self.arch.traits()
    }

    /// The width of layer `l`'s dense feed-forward block: Gemma 4's may
    /// differ by layer (`feed_forward_length` as an array).
    pub fn layer_ffn_dim(&self, l: usize) -> usize {
        self.gemma4.as_ref().and_then(|g| g.ffn_widths.get(l).copied()).unwrap_or(self.ffn_dim)
    }

    /// How layer `l` attends: Gemma 3's sliding-window layers see the last
    /// `sliding_window` positions with the local RoPE base and no position
    /// scaling; every other layer sees every position with the file's RoPE
    /// constants.
    pub fn layer_attention(&self, l: usize) -> LayerAttention {
        if let Some(g) = &self.gemma4 {
            let kv_heads = g.kv_heads.get(l).copied().unwrap_or(self.kv_heads);
            return match (g.sliding.get(l).copied().unwrap_or(false), self.sliding_window) {
                (true, Some(window)) => LayerAttention {
                    window: Some(window),
                    rope_base: g.swa_rope_base,
                    rope_scale: 1.0,
                    yarn: None,
                    rope_dims: g.swa_rope_dims,
                    rotated_pairs: None,
                    head_dim: g.swa_head_dim,
                    kv_heads,
                },
                _ => LayerAttention { rotated_pairs: g.full_rotated_pairs, kv_heads, ..self.full_attention() },
            };
        }
        let traits = self.traits();
        match (traits.swa_period, self.sliding_window) {
            (Some(period), Some(window)) if l % period != period - 1 => match traits.swa_rope_base {
                Some(base) => LayerAttention {
                    window: Some(window),
                    rope_base: base,
                    rope_scale: 1.0,
                    yarn: None,
                    ..self.full_attention()
                },
                None => LayerAttention { window: Some(window), ..self.full_attention() },
            },
            _ => self.full_attention(),
        }
    }

    /// How a full (not sliding-window) layer attends: every position, the
    /// file's RoPE constants.
    fn full_attention(&self) -> LayerAttention {
        LayerAttention {
            window: None,
            rope_base: self.rope_base,
            rope_scale: self.rope_scale,
            yarn: self.yarn,
            rope_dims: self.rope_dims,
            rotated_pairs: None,
            head_dim: self.head_dim,
            kv_heads: self.kv_heads,
        }
    }

    /// The layer whose keys and values layer `l` attends over: its own,
    /// or an earlier one's (Gemma 4's layers that share them).
    pub fn kv_source(&self, l: usize) -> usize {
        self.gemma4.as_ref().map_or(l, |g| g.kv_source(l))
    }

    /// Width of the queries (and of the attention output): `heads × head_dim`.
    pub fn q_dim(&self) -> usize {
        self.heads * self.head_dim
    }

    /// Width of the keys and of the values: `kv_heads × head_dim`.
    pub fn kv_dim(&self) -> usize {
        self.kv_heads * self.head_dim
    }

    /// Parameters of the model (weights only).
    pub fn n_params(&self) -> u64 {
        self.weight_shapes().iter().map(|(_, dims)| dims.iter().product::<usize>() as u64).sum()
    }

    /// The shape every weight must have, outermost first, by GGUF name.
    pub fn weight_shapes(&self) -> Vec<(String, Vec<usize>)> {
        let (d, v) = (self.dim, self.vocab);
        let traits = self.traits();
        let mut out = vec![("token_embd.weight".to_string(), vec![v, d])];
        if let Some(g) = &self.gemma4 {
            out.extend(g.model_shapes((d, v, self.layers, self.head_dim)));
            for l in 0..self.layers {
                let experts = self.experts.map(|e| (e.count, e.ffn_dim));
                out.extend(g.layer_shapes(l, (d, self.heads), experts, self.layer_attention(l)));
            }
        }
        for l in (0..self.layers).filter(|_| self.gemma4.is_none()) {
            let p = |n: &str| format!("blk.{l}.{n}.weight");
            out.push((p("attn_norm"), vec![d]));
            match self.recurrent.as_ref().filter(|r| r.is_recurrent(l)) {
                Some(r) => out.extend(r.weight_shapes(l, d)),
                None => self.attention_shapes(l, &mut out),
            }
            out.push((p(traits.ffn_norm), vec![d]));
            self.ffn_shapes(l, &mut out);
            if traits.post_norms {
                out.push((p("post_ffw_norm"), vec![d]));
            }
        }
        out.push(("output_norm.weight".to_string(), vec![d]));
        if !self.tied_output {
            out.push(("output.weight".to_string(), vec![v, d]));
        }
        out
    }

    /// The shapes of layer `l`'s attention weights (a query twice as wide
    /// where it carries an output gate).
    fn attention_shapes(&self, l: usize, out: &mut Vec<(String, Vec<usize>)>) {
        let (d, hd) = (self.dim, self.head_dim);
        let (q, kv) = (self.q_dim(), self.kv_dim());
        let traits = self.traits();
        let p = |n: &str| format!("blk.{l}.{n}.weight");
        let bias = |n: &str| format!("blk.{l}.{n}.bias");
        let q_rows = if traits.gated_attention { 2 * q } else { q };
        out.push((p("attn_q"), vec![q_rows, d]));
        out.push((p("attn_k"), vec![kv, d]));
        out.push((p("attn_v"), vec![kv, d]));
        if traits.qkv_bias {
            out.push((bias("attn_q"), vec![q]));
            out.push((bias("attn_k"), vec![kv]));
            out.push((bias("attn_v"), vec![kv]));
        }
        if traits.qk_norm {
            out.push((p("attn_q_norm"), vec![hd]));
            out.push((p("attn_k_norm"), vec![hd]));
        }
        out.push((p("attn_output"), vec![d, q]));
        if traits.attn_output_bias {
            out.push((bias("attn_output"), vec![d]));
        }
        if traits.attn_sinks {
            out.push((p("attn_sinks"), vec![self.heads]));
        }
        if traits.post_norms {
            out.push((p("post_attention_norm"), vec![d]));
        }
    }

    /// The shapes of layer `l`'s feed-forward weights: a dense block, or
    /// experts (with a shared expert where the architecture has one).
    fn ffn_shapes(&self, l: usize, out: &mut Vec<(String, Vec<usize>)>) {
        let (d, f) = (self.dim, self.ffn_dim);
        let traits = self.traits();
        let p = |n: &str| format!("blk.{l}.{n}.weight");
        let bias = |n: &str| format!("blk.{l}.{n}.bias");
        match self.experts {
            Some(e) => {
                out.push((p("ffn_gate_inp"), vec![e.count, d]));
                out.push((p("ffn_gate_exps"), vec![e.count, e.ffn_dim, d]));
                out.push((p("ffn_up_exps"), vec![e.count, e.ffn_dim, d]));
                out.push((p("ffn_down_exps"), vec![e.count, d, e.ffn_dim]));
                if traits.expert_biases {
                    out.push((bias("ffn_gate_inp"), vec![e.count]));
                    out.push((bias("ffn_gate_exps"), vec![e.count, e.ffn_dim]));
                    out.push((bias("ffn_up_exps"), vec![e.count, e.ffn_dim]));
                    out.push((bias("ffn_down_exps"), vec![e.count, d]));
                }
            }
            None => {
                out.push((p("ffn_gate"), vec![f, d]));
                out.push((p("ffn_up"), vec![f, d]));
                out.push((p("ffn_down"), vec![d, f]));
            }
        }
        if let Some(shared) = self.experts.and_then(|e| e.shared) {
            out.push((p("ffn_gate_inp_shexp"), vec![d]));
            out.push((p("ffn_gate_shexp"), vec![shared, d]));
            out.push((p("ffn_up_shexp"), vec![shared, d]));
            out.push((p("ffn_down_shexp"), vec![d, shared]));
        }
    }

    /// The layer of a mixture-of-experts weight (the router's
    /// `ffn_gate_inp` and the stacked experts' `ffn_*_exps`, weights and
    /// biases), which may be placed apart from its layer; `None` for any
    /// other weight (the shared expert's included).
    pub fn expert_weight_layer(&self, name: &str) -> Option<usize> {
        let rest = name.strip_prefix("blk.")?;
        let (layer, tensor) = rest.split_once('.')?;
        let base = [".weight", ".bias", ".scale"].iter().find_map(|s| tensor.strip_suffix(s))?;
        let expert = base == "ffn_gate_inp" || (base.starts_with("ffn_") && base.ends_with("_exps"));
        expert.then(|| layer.parse::<usize>().ok()).flatten().filter(|&l| l < self.layers)
    }

    /// The layer whose device holds a weight (the embedding and Gemma 4's
    /// per-layer embeddings go with the first layer, the output norm and projection with the last).
    pub fn weight_layer(&self, name: &str) -> usize {
        if let Some(rest) = name.strip_prefix("blk.") {
            if let Some(l) = rest.split('.').next().and_then(|l| l.parse::<usize>().ok()) {
                return l.min(self.layers - 1);
            }
        }
        if name.starts_with("token_embd") || name.starts_with("per_layer_") {
            0
        } else {
            self.layers - 1
        }
    }
}

/// The factor of the attention scores: `1/√head_dim` (1 for Gemma 4), except Gemma 3 27B,
/// which scales by `1/√(dim / heads)` (its query pre-attention scalar; the
/// only Gemma 3 of 62 layers).
fn attention_scale(arch: Architecture, dim: usize, heads: usize, head_dim: usize, layers: usize) -> f32 {
    // Gemma 4's queries and keys are RMS-normed: its scores are not scaled.
    if arch == Architecture::Gemma4 {
        return 1.0;
    }
    let per = if arch == Architecture::Gemma3 && layers == 62 { dim / heads } else { head_dim };
    1.0 / (per as f32).sqrt()
}

#[cfg(test)]
mod tests {
    use baton_gguf::{Array, Metadata, Value};

    use super::{feed_forward_width, get_uniform_usize};

    #[test]
    fn a_count_given_per_layer_is_read_where_every_layer_has_the_same() {
        let mut meta = Metadata::new();
        let key = "gemma4.attention.head_count";
        meta.insert("one".into(), Value::U32(8)).expect("new key");
        meta.insert(key.into(), Value::Array(Array::U32(vec![8; 5]))).expect("new key");
        meta.insert("differ".into(), Value::Array(Array::U32(vec![8, 8, 4]))).expect("new key");
        meta.insert("empty".into(), Value::Array(Array::U32(Vec::new()))).expect("new key");
        assert_eq!(get_uniform_usize(&meta, "one").expect("one value"), 8);
        assert_eq!(get_uniform_usize(&meta, key).expect("an array of one value"), 8);
        for bad in ["differ", "empty", "absent"] {
            let err = get_uniform_usize(&meta, bad).expect_err("refused");
            assert!(err.to_string().contains(bad), "{bad}: {err}");
        }
    }

    #[test]
    fn per_layer_feed_forward_widths_are_gemma4s_only() {
        let mut meta = Metadata::new();
        meta.insert("widths".into(), Value::Array(Array::U32(vec![128, 256, 128]))).expect("new key");
        meta.insert("one".into(), Value::U32(96)).expect("new key");
        assert_eq!(feed_forward_width(&meta, "widths", true, false).expect("gemma4"), 256, "the widest");
        let err = feed_forward_width(&meta, "widths", false, false).expect_err("llama");
        assert!(err.to_string().contains("widths") && err.to_string().contains("gemma4 only"), "{err}");
        assert_eq!(feed_forward_width(&meta, "one", false, false).expect("one value"), 96);
        assert_eq!(feed_forward_width(&meta, "absent", false, true).expect("experts only"), 0);
        let err = feed_forward_width(&meta, "absent", false, false).expect_err("required");
        assert!(err.to_string().contains("absent"), "{err}");
    }
}
