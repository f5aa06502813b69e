//! How a llama model is split for tensor parallelism (`--split-mode
//! tensor`).

use std::ops::Range;

use baton_composite::TensorSplit;
use baton_core::DType;

use crate::config::LlamaConfig;
use crate::error::ModelError;

/// The shares of a model over the devices of a composite device: how a
/// llama model is split for tensor parallelism (`--split-mode
/// tensor`).
///
/// Attention is split by query heads in proportion to `--tensor-split`;
/// each device holds the key-value heads of its query heads' groups, so a
/// group whose query heads fall on two devices has its key-value head on
/// both (SmolLM2's 9 heads and 3 KV heads over 2 devices: heads 0..5 with KV
/// heads 0..2, and heads 5..9 with KV heads 1..3; both compute KV head 1).
/// `attn_q`, `attn_k` and `attn_v` are split by rows (their heads, with
/// their biases, where the architecture has them; per-head Q/K norms are
/// mirrored), the KV
/// cache by KV heads, and `attn_output` by columns, giving partial sums.
/// The FFN's `ffn_gate` and `ffn_up` are split by rows and `ffn_down` by
/// columns (partial sums again), on quantization-block boundaries, in the
/// same shares. Each run of work between two gates is balanced on its own,
/// since every device waits for the others at a gate (evening out the layer
/// as a whole instead left a device waiting at every attention gate, see
/// docs/measurements.md). The output projection is split by vocabulary
/// rows and gathered; norms and the token embedding are mirrored. The
/// composite device's partitioner derives the rest and puts an all-reduce
/// after the attention and after the FFN of every layer.
#[derive(Clone, Debug)]
pub struct TensorShares {
    /// Per device, its query heads.
    pub heads: Vec<Range<usize>>,
    /// Per device, the KV heads of its query heads' groups (devices whose
    /// heads share a group both hold its KV head).
    pub kv_heads: Vec<Range<usize>>,
    /// Per device, its FFN rows.
    pub ffn_rows: Vec<Range<usize>>,
    /// Per device, its vocabulary rows of the output projection.
    pub vocab_rows: Vec<Range<usize>>,
    head_dim: usize,
    exact: bool,
}

fn single(split: TensorSplit) -> Vec<Range<usize>> {
    match split {
        TensorSplit::Split { parts, .. } => parts.into_iter().map(|p| p[0].clone()).collect(),
        _ => Vec::new(),
    }
}

fn scaled(ranges: &[Range<usize>], factor: usize) -> Vec<Vec<Range<usize>>> {
    ranges.iter().map(|r| std::iter::once(r.start * factor..r.end * factor).collect()).collect()
}

impl TensorShares {
    /// Shares for `devices` devices in proportion to `weights` (empty =
    /// even); FFN rows in whole blocks of 32 (quantized `ffn_down` columns).
    pub fn new(config: &LlamaConfig, devices: usize, weights: &[f32]) -> Result<TensorShares, ModelError> {
        if config.experts.is_some() {
            return Err(ModelError::Config(
                "a split of each layer's tensors is not written for a mixture of experts yet: split by layer".into(),
            ));
        }
        if config.recurrent.is_some() {
            return Err(ModelError::Config(
                "a split of each layer's tensors is not written for a hybrid model's recurrent layers yet: split by layer"
                    .into(),
            ));
        }
        if config.gemma4.is_some() {
            return Err(ModelError::Config(
                "a split of each layer's tensors is not written for Gemma 4's per-layer head sizes yet: split by layer"
                    .into(),
            ));
        }
        if !weights.is_empty() && (weights.len() != devices || !weights.iter().all(|w| w.is_finite() && *w > 0.0)) {
            return Err(ModelError::Config(format!(
                "tensor split {weights:?} for {devices} devices: one positive share per device (every device holds part of every weight)"
            )));
        }
        let heads = single(TensorSplit::proportional(0, config.heads, devices, weights, 1)?);
        let group = config.heads / config.kv_heads.max(1);
        let kv_heads = heads.iter().map(|h| h.start / group..h.end.div_ceil(group)).collect();
        let block = if config.ffn_dim.is_multiple_of(32 * devices) { 32 } else { 1 };
        let ffn = TensorSplit::proportional(0, config.ffn_dim, devices, weights, block)?;
        let vocab = TensorSplit::proportional(0, config.vocab, devices, weights, 1)?;
        Ok(TensorShares {
            heads,
            kv_heads,
            ffn_rows: single(ffn),
            vocab_rows: single(vocab),
            head_dim: config.head_dim,
            exact: false,
        })
    }

    /// With `exact`, the weights whose split gives partial sums
    /// (`attn_output`, `ffn_down`) are mirrored instead: their inputs are
    /// gathered and every device computes the whole product, so the result
    /// is bit for bit one device's. (Partial sums add in another order than
    /// one device's matmul; with quantized weights the matmul quantizes its
    /// activations, so a last-bit difference can move a value by a step.)
    pub fn with_exact_sums(mut self, exact: bool) -> TensorShares {
        self.exact = exact;
        self
    }

    fn split(axis: usize, parts: Vec<Vec<Range<usize>>>) -> TensorSplit {
        TensorSplit::Split { axis, parts }
    }

    /// How the weight `name` is held.
    pub fn weight(&self, name: &str) -> TensorSplit {
        let hd = self.head_dim;
        let role = name.strip_prefix("blk.").and_then(|r| r.split_once('.')).map_or(name, |(_, r)| r);
        match role {
            "attn_output.weight" | "ffn_down.weight" if self.exact => TensorSplit::Mirror,
            "attn_q.weight" | "attn_q.bias" => Self::split(0, scaled(&self.heads, hd)),
            "attn_k.weight" | "attn_v.weight" | "attn_k.bias" | "attn_v.bias" => {
                Self::split(0, scaled(&self.kv_heads, hd))
            }
            "attn_output.weight" => Self::split(1, scaled(&self.heads, hd)),
            "ffn_gate.weight" | "ffn_up.weight" => Self::split(0, scaled(&self.ffn_rows, 1)),
            "ffn_down.weight" => Self::split(1, scaled(&self.ffn_rows, 1)),
            "output.weight" => Self::split(0, scaled(&self.vocab_rows, 1)),
            _ => TensorSplit::Mirror,
        }
    }

    /// How each layer's key and value caches are held: by KV heads (a KV
    /// head of a group shared by two devices on both).
    pub fn cache(&self) -> TensorSplit {
        Self::split(0, scaled(&self.kv_heads, 1))
    }

    /// The split of a layer's attention rows scratch (`[batch, heads ×
    /// head_dim]`, several sequences): by heads, as the output projection's
    /// input.
    pub fn attention_rows(&self) -> TensorSplit {
        Self::split(1, scaled(&self.heads, self.head_dim))
    }

    /// Whether `split` cuts `dims` of `dtype` on whole blocks (quantized
    /// columns split by heads need whole blocks per head).
    pub fn fits(split: &TensorSplit, dtype: DType, dims: &[usize]) -> bool {
        match split {
            TensorSplit::Split { axis, parts } if axis + 1 == dims.len() => {
                parts.iter().flatten().all(|r| dtype.row_bytes(r.start).is_some() && dtype.row_bytes(r.end).is_some())
            }
            _ => true,
        }
    }
}
