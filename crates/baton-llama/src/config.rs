//! Hyper-parameters of a llama-family model, from GGUF metadata.

use baton_core::graph::RopeMode;
use baton_gguf::{GgufFile, Metadata, OptionalKey};

use crate::error::ModelError;

/// The shape and constants of a llama model.
#[derive(Clone, Debug, PartialEq)]
pub struct LlamaConfig {
    /// `general.architecture`.
    pub architecture: String,
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
    /// Elements per head.
    pub head_dim: usize,
    /// Feed-forward width.
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
    /// RoPE pairing (llama GGUF files use the normal mode).
    pub rope_mode: RopeMode,
    /// Whether the output projection reuses the token embedding.
    pub tied_output: bool,
}

fn get_usize(meta: &Metadata, key: &str) -> Result<usize, ModelError> {
    Ok(meta.get_usize(key)?)
}

impl LlamaConfig {
    /// Reads the hyper-parameters of `file`, checking they are consistent.
    pub fn from_gguf(file: &GgufFile) -> Result<LlamaConfig, ModelError> {
        let meta = file.metadata();
        let arch = meta.get_str("general.architecture")?.to_string();
        if arch != "llama" {
            return Err(ModelError::Architecture(arch));
        }
        let key = |k: &str| format!("{arch}.{k}");
        let dim = get_usize(meta, &key("embedding_length"))?;
        let heads = get_usize(meta, &key("attention.head_count"))?;
        let kv_heads = meta.get_usize(&key("attention.head_count_kv")).optional()?.unwrap_or(heads);
        if heads == 0 || kv_heads == 0 || dim % heads != 0 || heads % kv_heads != 0 {
            return Err(ModelError::Config(format!("dim {dim}, {heads} heads and {kv_heads} kv heads do not divide")));
        }
        let head_dim = dim / heads;
        let vocab = match meta.get_usize(&key("vocab_size")).optional()? {
            Some(v) => v,
            None => meta.get_str_array("tokenizer.ggml.tokens")?.len(),
        };
        let scaling = meta.get_str(&key("rope.scaling.type")).optional()?;
        let rope_scale = match scaling {
            None | Some("none") => 1.0,
            Some("linear") => 1.0 / meta.get_f32(&key("rope.scaling.factor"))?,
            Some(other) => return Err(ModelError::Config(format!("RoPE scaling {other:?} is not supported"))),
        };
        let rope_dims = meta.get_usize(&key("rope.dimension_count")).optional()?.unwrap_or(head_dim);
        if rope_dims > head_dim || rope_dims % 2 != 0 {
            return Err(ModelError::Config(format!("rope dims {rope_dims} for heads of {head_dim}")));
        }
        let config = LlamaConfig {
            name: meta.get_str("general.name").optional()?.map(str::to_string),
            dim,
            layers: get_usize(meta, &key("block_count"))?,
            heads,
            kv_heads,
            head_dim,
            ffn_dim: get_usize(meta, &key("feed_forward_length"))?,
            vocab,
            context: get_usize(meta, &key("context_length"))?,
            rms_eps: meta.get_f32(&key("attention.layer_norm_rms_epsilon"))?,
            rope_base: meta.get_f32(&key("rope.freq_base")).optional()?.unwrap_or(10000.0),
            rope_scale,
            rope_dims,
            rope_mode: RopeMode::Normal,
            tied_output: file.tensor("output.weight").is_none(),
            architecture: arch,
        };
        if config.layers == 0 || config.vocab == 0 || config.context == 0 {
            return Err(ModelError::Config("zero layers, vocabulary or context".into()));
        }
        Ok(config)
    }

    /// Parameters of the model (weights only).
    pub fn n_params(&self) -> u64 {
        let (d, f, v) = (self.dim as u64, self.ffn_dim as u64, self.vocab as u64);
        let kv = (self.kv_heads * self.head_dim) as u64;
        let per_layer = 2 * d * d + 2 * d * kv + 3 * d * f + 2 * d;
        let output = if self.tied_output { 0 } else { d * v };
        self.layers as u64 * per_layer + d * v + output + d
    }

    /// The shape every weight must have, outermost first, by GGUF name.
    pub fn weight_shapes(&self) -> Vec<(String, Vec<usize>)> {
        let (d, f, v) = (self.dim, self.ffn_dim, self.vocab);
        let (q, kv) = (self.heads * self.head_dim, self.kv_heads * self.head_dim);
        let mut out = vec![("token_embd.weight".to_string(), vec![v, d])];
        for l in 0..self.layers {
            let p = |n: &str| format!("blk.{l}.{n}.weight");
            out.push((p("attn_norm"), vec![d]));
            out.push((p("attn_q"), vec![q, d]));
            out.push((p("attn_k"), vec![kv, d]));
            out.push((p("attn_v"), vec![kv, d]));
            out.push((p("attn_output"), vec![d, q]));
            out.push((p("ffn_norm"), vec![d]));
            out.push((p("ffn_gate"), vec![f, d]));
            out.push((p("ffn_up"), vec![f, d]));
            out.push((p("ffn_down"), vec![d, f]));
        }
        out.push(("output_norm.weight".to_string(), vec![d]));
        if !self.tied_output {
            out.push(("output.weight".to_string(), vec![v, d]));
        }
        out
    }

    /// The layer whose device holds a weight (the embedding goes with the
    /// first layer, the output norm and projection with the last).
    pub fn weight_layer(&self, name: &str) -> usize {
        if let Some(rest) = name.strip_prefix("blk.") {
            if let Some(l) = rest.split('.').next().and_then(|l| l.parse::<usize>().ok()) {
                return l.min(self.layers - 1);
            }
        }
        if name.starts_with("token_embd") {
            0
        } else {
            self.layers - 1
        }
    }
}
