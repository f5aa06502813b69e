//! What differs between the llama-family architectures, as data.
//!
//! One graph builder ([`crate::graph`]) serves every architecture; it asks
//! [`ArchTraits`] where they differ. The conventions were checked against
//! the GGUF converter and the reference engine's model definitions
//! (`/work/shared/research/llama-family-architectures.md` has the notes):
//!
//! | | llama | qwen2 | qwen3 | gemma3 |
//! |---|---|---|---|---|
//! | RoPE pairing | adjacent (normal) | NeoX | NeoX | NeoX |
//! | Q/K/V biases | no | yes | no | no |
//! | per-head Q/K RMS norm (before RoPE) | no | no | yes | yes |
//! | norms after attention and FFN | no | no | no | yes |
//! | FFN gate | SiLU | SiLU | SiLU | GELU (tanh) |
//! | embedding × √dim | no | no | no | yes |
//! | sliding-window layers | no | no | no | 5 of every 6 |
//!
//! `qwen3moe` is `qwen3` with a mixture of experts in place of each
//! feed-forward block (see [`crate::config::Experts`]). `gpt-oss` has
//! biases on every attention projection and on the router and experts,
//! one learned sink logit per head in each softmax, sliding-window (even)
//! and full (odd) layers with the same RoPE (YaRN-scaled) on both, the
//! FFN's norm named `post_attention_norm`, and experts whose SwiGLU is
//! clamped (`x = min(gate, 7)`, `y = clamp(up, ±7)`, `x σ(1.702 x) (y + 1)`),
//! routed by the softmax of the top-k router logits.
//!
//! `qwen35` and `qwen35moe` (Qwen 3.5 and 3.6) are hybrids: three of every
//! four layers are recurrent (Gated DeltaNet, see [`crate::hybrid`]); the
//! fourth attends with a query that carries an output gate per head
//! (`attn_q` projects to `[q | gate]` head by head, and the attention's
//! output is multiplied by `σ(gate)`), RoPE on the first quarter of each
//! head. `qwen35moe` has experts with a shared expert beside them, gated
//! per token by `σ(ffn_gate_inp_shexp · x)`. The FFN's norm is
//! `post_attention_norm` in both.
//!
//! `gemma4` (Gemma 4) is Gemma 3's block with sliding and full layers of
//! different head sizes, unscaled scores, values RMS-normed without a
//! weight, keys and values shared by the last layers, per-layer
//! embeddings, a soft-cap on the logits and, in its mixture-of-experts
//! shape, a dense block beside the experts: [`crate::gemma4`] holds it.
//! Its norm weights are stored as trained (no `+ 1`).
//!
//! Gemma's norm weights are stored with the `+ 1` of its `(1 + w)` already
//! added by the converter, so every architecture multiplies by the stored
//! weight. Gemma 3's local (sliding-window) layers use RoPE base 10,000 and
//! no position scaling; its global layers (every sixth: `l % 6 == 5`) use
//! the file's base and scaling.

use baton_core::graph::RopeMode;

/// The feed-forward gate's activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Activation {
    /// `x σ(x)` (SwiGLU: llama, Qwen).
    Silu,
    /// GELU in its tanh form (GeGLU: Gemma).
    GeluTanh,
    /// gpt-oss's clamped SwiGLU, `x σ(1.702 x) (y + 1)` with `x = min(gate,
    /// 7)` and `y = clamp(up, -7, 7)`.
    SwiGluClamped,
}

/// The slope and clamp of gpt-oss's SwiGLU (llama.cpp's constants).
pub const SWIGLU_CLAMPED: (f32, f32) = (1.702, 7.0);

/// How an architecture's blocks differ from llama's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ArchTraits {
    /// RoPE pairing.
    pub rope_mode: RopeMode,
    /// The FFN gate's activation.
    pub activation: Activation,
    /// `attn_q`, `attn_k` and `attn_v` have biases (`attn_q.bias`, …).
    pub qkv_bias: bool,
    /// Each query and key head is RMS-normalised (`attn_q_norm`,
    /// `attn_k_norm`, one weight per head element) before RoPE.
    pub qk_norm: bool,
    /// The attention and FFN outputs are RMS-normalised before they join
    /// the residual (`post_attention_norm`, `post_ffw_norm`).
    pub post_norms: bool,
    /// The token embedding is multiplied by `√dim`.
    pub embed_scale: bool,
    /// Layers come in groups of this many, all but the last of each group
    /// attending a sliding window (`None`: every layer is global).
    pub swa_period: Option<usize>,
    /// RoPE base of the sliding-window layers, with no position scaling
    /// (`None`: the file's RoPE constants, as the full layers').
    pub swa_rope_base: Option<f32>,
    /// `attn_output` has a bias.
    pub attn_output_bias: bool,
    /// Each layer has `attn_sinks` (a sink logit per query head).
    pub attn_sinks: bool,
    /// The router and each expert have biases (`ffn_gate_inp.bias`,
    /// `ffn_{gate,up,down}_exps.bias`).
    pub expert_biases: bool,
    /// The name of the norm before the feed-forward block.
    pub ffn_norm: &'static str,
    /// Each feed-forward block is a mixture of experts: a router picks
    /// `expert_used_count` of `expert_count` SwiGLU experts per token,
    /// weighted by the softmax of their router logits.
    pub experts: bool,
    /// Besides the experts, a shared expert every token runs
    /// (`ffn_{gate,up,down}_shexp`), weighted by `σ(ffn_gate_inp_shexp ·
    /// x)`.
    pub shared_expert: bool,
    /// Some layers are recurrent (Gated DeltaNet; see
    /// [`crate::hybrid::Recurrent`]).
    pub hybrid: bool,
    /// `attn_q` projects each head to its query and an output gate:
    /// the attention's output is multiplied by `σ(gate)`.
    pub gated_attention: bool,
}

/// A llama-family architecture Baton loads (`general.architecture`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Architecture {
    /// Llama 1–3, SmolLM, TinyLlama, Mistral without sliding windows.
    Llama,
    /// Qwen 2 and 2.5.
    Qwen2,
    /// Qwen 3 (dense).
    Qwen3,
    /// Gemma 3 (text).
    Gemma3,
    /// Qwen 3 mixture of experts (Qwen3-30B-A3B, Qwen3-235B-A22B).
    Qwen3Moe,
    /// OpenAI's gpt-oss (20b, 120b).
    GptOss,
    /// Qwen 3.5 and 3.6, dense (hybrid: Gated DeltaNet and gated attention).
    Qwen35,
    /// Qwen 3.5 and 3.6 mixture of experts (Qwen3.6-35B-A3B).
    Qwen35Moe,
    /// Gemma 4: dense (31B, E2B, E4B) or with experts (26B-A4B).
    Gemma4,
}

impl Architecture {
    /// Every architecture.
    pub const ALL: [Architecture; 9] = [
        Self::Llama,
        Self::Qwen2,
        Self::Qwen3,
        Self::Gemma3,
        Self::Qwen3Moe,
        Self::GptOss,
        Self::Qwen35,
        Self::Qwen35Moe,
        Self::Gemma4,
    ];

    /// The name GGUF files give it in `general.architecture` (and the
    /// prefix of its metadata keys).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Llama => "llama",
            Self::Qwen2 => "qwen2",
            Self::Qwen3 => "qwen3",
            Self::Gemma3 => "gemma3",
            Self::Qwen3Moe => "qwen3moe",
            Self::GptOss => "gpt-oss",
            Self::Qwen35 => "qwen35",
            Self::Qwen35Moe => "qwen35moe",
            Self::Gemma4 => "gemma4",
        }
    }

    /// The architecture named `name` (as in `general.architecture`).
    pub fn from_name(name: &str) -> Option<Architecture> {
        Self::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Where its blocks differ from llama's.
    pub const fn traits(self) -> ArchTraits {
        let llama = ArchTraits {
            rope_mode: RopeMode::Normal,
            activation: Activation::Silu,
            qkv_bias: false,
            qk_norm: false,
            post_norms: false,
            embed_scale: false,
            swa_period: None,
            swa_rope_base: Some(10_000.0),
            experts: false,
            attn_output_bias: false,
            attn_sinks: false,
            expert_biases: false,
            ffn_norm: "ffn_norm",
            shared_expert: false,
            hybrid: false,
            gated_attention: false,
        };
        let qwen35 = ArchTraits {
            rope_mode: RopeMode::Neox,
            qk_norm: true,
            ffn_norm: "post_attention_norm",
            hybrid: true,
            gated_attention: true,
            ..llama
        };
        match self {
            Self::Llama => llama,
            Self::Qwen2 => ArchTraits { rope_mode: RopeMode::Neox, qkv_bias: true, ..llama },
            Self::Qwen3 => ArchTraits { rope_mode: RopeMode::Neox, qk_norm: true, ..llama },
            Self::Qwen3Moe => ArchTraits { rope_mode: RopeMode::Neox, qk_norm: true, experts: true, ..llama },
            Self::GptOss => ArchTraits {
                rope_mode: RopeMode::Neox,
                activation: Activation::SwiGluClamped,
                qkv_bias: true,
                swa_period: Some(2),
                swa_rope_base: None,
                experts: true,
                attn_output_bias: true,
                attn_sinks: true,
                expert_biases: true,
                ffn_norm: "post_attention_norm",
                ..llama
            },
            Self::Qwen35 => qwen35,
            Self::Qwen35Moe => ArchTraits { experts: true, shared_expert: true, ..qwen35 },
            Self::Gemma3 => ArchTraits {
                rope_mode: RopeMode::Neox,
                activation: Activation::GeluTanh,
                qk_norm: true,
                post_norms: true,
                embed_scale: true,
                swa_period: Some(6),
                ..llama
            },
            // Its sliding pattern, RoPE and experts are per file (see
            // `crate::gemma4`).
            Self::Gemma4 => ArchTraits {
                rope_mode: RopeMode::Neox,
                activation: Activation::GeluTanh,
                qk_norm: true,
                post_norms: true,
                embed_scale: true,
                ..llama
            },
        }
    }
}

impl std::fmt::Display for Architecture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How one layer attends: its window and RoPE constants.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LayerAttention {
    /// Keys a query sees at most, ending at its own position (`None`: all).
    pub window: Option<usize>,
    /// RoPE frequency base.
    pub rope_base: f32,
    /// Linear RoPE position scale.
    pub rope_scale: f32,
    /// YaRN's scaling of the angles, where the file asks for it.
    pub yarn: Option<baton_core::graph::Yarn>,
    /// Elements of each head that RoPE pairs (`rope.dimension_count`).
    pub rope_dims: usize,
    /// Of those pairs, the first ones that rotate (`None`: all).
    pub rotated_pairs: Option<usize>,
    /// Elements per head of its queries, keys and values.
    pub head_dim: usize,
    /// Its key-value heads.
    pub kv_heads: usize,
}
