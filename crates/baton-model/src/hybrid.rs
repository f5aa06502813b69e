//! The recurrent layers of a hybrid model (Qwen 3.5 and 3.6, `qwen35` and
//! `qwen35moe`): Gated DeltaNet layers with a full-attention layer every
//! `interval`-th, read from GGUF metadata as llama.cpp reads them
//! (`docs/hybrid-facts.md` has the facts).
//!
//! A recurrent layer projects each token to queries, keys and values of
//! its linear attention (`attn_qkv`), an output gate (`attn_gate`), a
//! decay (`ssm_alpha`, with `ssm_dt.bias` and `ssm_a`) and a write
//! strength (`ssm_beta`); runs a short causal convolution over the
//! queries, keys and values (`ssm_conv1d`, the last `conv_kernel - 1`
//! inputs kept per sequence); then the gated delta rule over a state of
//! `state × state` per value head, kept per sequence
//! ([`Op::GatedDeltaNet`](baton_core::graph::Op::GatedDeltaNet)); then an
//! RMS norm (`ssm_norm`) gated by `silu(z)` and the output projection
//! (`ssm_out`). Its state does not grow with the context: it is held per
//! sequence beside the attention layers' keys and values
//! ([`crate::state`]).

use baton_gguf::{Metadata, OptionalKey};

use crate::error::ModelError;

/// The most bytes of recurrent state one layer may hold per sequence (the
/// largest Qwen 3.5 holds 3 MiB).
const MAX_STATE_BYTES: usize = 1 << 30;

/// A hybrid model's recurrent layers: their sizes and which layers they are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recurrent {
    /// Taps of the short convolution (`ssm.conv_kernel`, 4).
    pub conv_kernel: usize,
    /// Size of a key head and of a value head (`ssm.state_size`).
    pub head_dim: usize,
    /// Query and key heads (`ssm.group_count`).
    pub key_heads: usize,
    /// Value heads (`ssm.time_step_rank`), a multiple of the key heads:
    /// value head `h` reads key head `h mod key_heads`.
    pub value_heads: usize,
    /// Per layer: whether it is recurrent (else full attention).
    pub layers: Vec<bool>,
}

impl Recurrent {
    /// The recurrent layers of an `arch` file of `layers` layers, from its
    /// metadata (the keys under `arch.`).
    pub fn from_meta(meta: &Metadata, arch: &str, layers: usize) -> Result<Recurrent, ModelError> {
        let key = |k: &str| format!("{arch}.{k}");
        let get = |k: &str| -> Result<usize, ModelError> { Ok(meta.get_usize(&key(k))?) };
        let conv_kernel = get("ssm.conv_kernel")?;
        let head_dim = get("ssm.state_size")?;
        let key_heads = get("ssm.group_count")?;
        let value_heads = get("ssm.time_step_rank")?;
        let inner = get("ssm.inner_size")?;
        let bad = |what: String| Err(ModelError::Config(format!("{arch}: {what}")));
        if !(2..=16).contains(&conv_kernel) {
            return bad(format!("a convolution of {conv_kernel} taps (ssm.conv_kernel: 2 to 16)"));
        }
        if head_dim == 0 || key_heads == 0 || value_heads == 0 || value_heads % key_heads != 0 {
            return bad(format!(
                "{value_heads} value heads over {key_heads} key heads of {head_dim} (ssm.time_step_rank, ssm.group_count, ssm.state_size)"
            ));
        }
        let state_bytes =
            head_dim.checked_mul(head_dim).and_then(|n| n.checked_mul(value_heads)).and_then(|n| n.checked_mul(4));
        if state_bytes.is_none_or(|b| b > MAX_STATE_BYTES) {
            return bad(format!(
                "a recurrent state of {value_heads} heads of {head_dim}² (ssm.state_size) is too large"
            ));
        }
        if value_heads.checked_mul(head_dim) != Some(inner) {
            return bad(format!("ssm.inner_size {inner} is not {value_heads} value heads of {head_dim}"));
        }
        let layers = match meta.get_bool_array(&key("attention.recurrent_layers")).optional()? {
            Some(flags) if flags.len() >= layers => flags[..layers].to_vec(),
            Some(flags) => return bad(format!("{} recurrent-layer flags for {layers} layers", flags.len())),
            None => {
                let interval = meta.get_usize(&key("full_attention_interval")).optional()?.unwrap_or(4);
                if interval == 0 {
                    return bad("full_attention_interval 0".into());
                }
                (0..layers).map(|l| (l + 1) % interval != 0).collect()
            }
        };
        Ok(Recurrent { conv_kernel, head_dim, key_heads, value_heads, layers })
    }

    /// Whether layer `l` is recurrent.
    pub fn is_recurrent(&self, l: usize) -> bool {
        self.layers.get(l).copied().unwrap_or(false)
    }

    /// Width of the queries, and of the keys (`key_heads × head_dim`).
    pub fn key_dim(&self) -> usize {
        self.key_heads * self.head_dim
    }

    /// Width of the values and of the output gate (`value_heads ×
    /// head_dim`).
    pub fn value_dim(&self) -> usize {
        self.value_heads * self.head_dim
    }

    /// Channels of the convolution: queries, keys and values.
    pub fn conv_dim(&self) -> usize {
        2 * self.key_dim() + self.value_dim()
    }

    /// Dimensions of a layer's convolution state for `slots` sequences:
    /// `[slots, conv_dim, conv_kernel - 1]`.
    pub fn conv_state_dims(&self, slots: usize) -> [usize; 3] {
        [slots, self.conv_dim(), self.conv_kernel - 1]
    }

    /// Dimensions of a layer's delta-rule state for `slots` sequences:
    /// `[slots, value_heads, head_dim, head_dim]`.
    pub fn delta_state_dims(&self, slots: usize) -> [usize; 4] {
        [slots, self.value_heads, self.head_dim, self.head_dim]
    }

    /// Bytes of one sequence's state in one recurrent layer (f32).
    pub fn slot_bytes(&self) -> usize {
        4 * (self.conv_dim() * (self.conv_kernel - 1) + self.value_heads * self.head_dim * self.head_dim)
    }

    /// The shape of every weight of recurrent layer `l` (`dim` wide), by
    /// GGUF name, outermost first.
    pub fn weight_shapes(&self, l: usize, dim: usize) -> Vec<(String, Vec<usize>)> {
        let p = |n: &str| format!("blk.{l}.{n}");
        let (hv, inner, conv) = (self.value_heads, self.value_dim(), self.conv_dim());
        vec![
            (p("attn_qkv.weight"), vec![conv, dim]),
            (p("attn_gate.weight"), vec![inner, dim]),
            (p("ssm_conv1d.weight"), vec![conv, self.conv_kernel]),
            (p("ssm_dt.bias"), vec![hv]),
            (p("ssm_a"), vec![hv]),
            (p("ssm_beta.weight"), vec![hv, dim]),
            (p("ssm_alpha.weight"), vec![hv, dim]),
            (p("ssm_norm.weight"), vec![self.head_dim]),
            (p("ssm_out.weight"), vec![dim, inner]),
        ]
    }
}
