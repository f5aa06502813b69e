//! The shapes synthetic models come in ([`SynthShape::ALL`], the one list
//! of them that `baton model synth` and the README show) and what to
//! generate ([`SynthSpec`]).

use baton_core::DType;

use baton_model::Architecture;

/// The model shapes [`write_synth_model`](super::write_synth_model) can generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SynthShape {
    /// A toy for unit tests: dim 64, 5 layers, 8 heads (4 KV heads, so
    /// grouped-query attention), FFN 172 (not a multiple of 32, so quantized
    /// files exercise the F16 fallback), vocabulary 512, context 512.
    Tiny,
    /// A toy whose rows are all multiples of 256, for K-quant tests: dim
    /// 256, 2 layers, 4 heads (2 KV heads), FFN 512, vocabulary 512,
    /// context 512.
    Tiny256,
    /// llama2.c's `stories15M`: dim 288, 6 layers, 6 heads, FFN 768,
    /// vocabulary 32000, context 256; untied output.
    Stories15M,
    /// llama2.c's `stories110M`: dim 768, 12 layers, 12 heads, FFN 2048,
    /// vocabulary 32000, context 1024; output tied to the token embedding,
    /// as in llama2.c (109.5M weights). Every row is a multiple of 256, so
    /// K-quant files hold no fallback.
    Stories110M,
    /// SmolLM2-135M: dim 576, 30 layers, 9 heads, 3 KV heads, FFN 1536,
    /// vocabulary 49152, context 8192 (as in its GGUF), RoPE base 100000,
    /// output tied to the token embedding.
    Smol135M,
    /// A Gemma 3 toy with every Gemma trait in play: dim 64, 6 layers
    /// (layers 0–4 attend a sliding window of 8 positions, layer 5 is
    /// global), 4 heads of 32 (wider than `dim / heads`) sharing 1 KV head,
    /// FFN 128 (GELU), vocabulary 512, context 512, RoPE base 1,000,000
    /// (10,000 in the local layers), tied output.
    Gemma3,
    /// A Qwen 2 toy: dim 64, 3 layers, 4 heads, 2 KV heads, biases on Q, K
    /// and V, FFN 160, vocabulary 512, context 512, RoPE base 1,000,000,
    /// untied output.
    Qwen2,
    /// A Qwen 3 toy: dim 64, 3 layers, 4 heads of 32 with per-head Q/K
    /// norms, 2 KV heads, FFN 192, vocabulary 512, context 512, RoPE base
    /// 1,000,000, tied output.
    Qwen3,
    /// A Qwen 3 mixture-of-experts toy: the Qwen 3 toy's attention (dim 64,
    /// 3 layers, 4 heads of 32, 2 KV heads, per-head Q/K norms), each
    /// feed-forward block 16 experts of width 64 of which 4 run per token,
    /// untied output.
    Qwen3Moe,
    /// A gpt-oss toy with every gpt-oss trait in play: dim 64, 4 layers
    /// (0 and 2 attend a sliding window of 8 positions, 1 and 3 every
    /// position), 4 heads of 32 (wider than `dim / heads`) sharing 2 KV
    /// heads, biases on every projection, a sink logit per head, 16 experts
    /// of width 64 of which 4 run (router and expert biases, the clamped
    /// SwiGLU), YaRN (factor 4 over a trained context of 64), RoPE base
    /// 150,000, vocabulary 512, context 512, untied output.
    GptOss,
    /// gpt-oss-20b's layers (dim 2880, 64 heads of 64, 8 KV heads, 32
    /// experts of width 2880 of which 4 run, sliding window 128 on even
    /// layers, YaRN factor 32 over 4,096, RoPE base 150,000, vocabulary
    /// 201,088, context 131,072), 8 of its 24 layers: for speed and memory
    /// at the real shapes (`--type mxfp4_moe`, as its files come).
    GptOss20b8L,
    /// Qwen3-30B-A3B's layers (dim 2048, 32 heads of 128, 4 KV heads, 128
    /// experts of width 768 of which 8 run, vocabulary 151,936, context
    /// 40,960, RoPE base 1,000,000), 8 of its 48 layers: for speed and
    /// memory figures at the real shapes (3.3 GiB in Q4_K_M).
    Qwen3MoeA3b8L,
    /// A Qwen 3.5 toy (hybrid): dim 64, 4 layers of which 0–2 are
    /// recurrent (Gated DeltaNet: a convolution of 4 taps, 2 key heads and 4
    /// value heads of 16) and 3 attends (4 query heads of 32 with an output
    /// gate, 2 KV heads, per-head Q/K norms, RoPE on the first 8 of each
    /// head), FFN 160, vocabulary 512, context 512, RoPE base 10,000,000,
    /// untied output; then one multi-token-prediction block (block 4: an
    /// attending block with `nextn.*` tensors, as Qwen 3.5's files hold it).
    Qwen35,
    /// The Qwen 3.5 toy with experts in place of each feed-forward block:
    /// 16 experts of width 64 of which 4 run, and a shared expert of width
    /// 96 every token runs (its multi-token-prediction block too).
    Qwen35Moe,
    /// Qwen3.6-35B-A3B's layers (dim 2048; 16 query heads of 256 with an
    /// output gate, 2 KV heads, RoPE on 64 of each head, base 10,000,000;
    /// recurrent layers of 16 key and 32 value heads of 128, convolution of
    /// 4; 256 experts of width 512 of which 8 run, a shared expert of 512;
    /// vocabulary 248,320, context 262,144), 8 of its 40 layers (6
    /// recurrent, 2 attending), and its multi-token-prediction block (an
    /// attending block of the same shape): for speed and memory at the
    /// real shapes.
    Qwen35MoeA3b8L,
    /// A Gemma 4 toy (dense) with every Gemma 4 trait in play: dim 64, 8
    /// layers in groups of four (three attend a sliding window of 8
    /// positions with 4 heads of 32 over 2 KV heads, RoPE base 10,000;
    /// the fourth every position with 4 heads of 64 over 1 KV head, no
    /// `attn_v` (values are the keys' projection), RoPE base 1,000,000 on
    /// the first quarter of its pairs); the last 4 layers share the keys
    /// and values of layers 2 and 3; per-layer embeddings of 16; a
    /// `layer_output_scale` per layer; FFN 128 (GELU), 256 on the 4 sharing
    /// layers (E2B's double-wide blocks: `feed_forward_length` per layer);
    /// logits soft-capped at 30; vocabulary 512 (Gemma 4's tokenizer kind),
    /// context 512, tied output.
    Gemma4,
    /// The Gemma 4 toy with experts as 26B-A4B has them (and neither shared
    /// keys and values nor per-layer embeddings): 6 layers (2 and 5 full),
    /// beside a dense FFN of 64 16 experts of width 32 (gate and up in one
    /// tensor) of which 4 run, each scaled by its `ffn_down_exps.scale`.
    Gemma4Moe,
    /// Llama 3.2 1B's dimensions: dim 2048, 16 layers, 32 heads of 64, 8 KV
    /// heads, FFN 8192, vocabulary 128,256, context 131,072, RoPE base
    /// 500,000, tied output (1.24B weights).
    Llama1B,
    /// Llama 3.2 3B's dimensions: dim 3072, 28 layers, 24 heads of 128, 8
    /// KV heads, FFN 8192, vocabulary 128,256, context 131,072, RoPE base
    /// 500,000, tied output (3.2B weights).
    Llama3B,
    /// Llama 3.1 8B's dimensions: dim 4096, 32 layers, 32 heads of 128, 8
    /// KV heads, FFN 14,336, vocabulary 128,256, context 131,072, RoPE base
    /// 500,000, untied output (8.0B weights).
    Llama8B,
}

/// The Qwen 3.5 toys' recurrent layers.
const QWEN35_RECURRENT: SynthRecurrent =
    SynthRecurrent { conv_kernel: 4, head_dim: 16, key_heads: 2, value_heads: 4, interval: 4 };

/// What Gemma 4 shapes add: its per-layer structure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SynthGemma4 {
    /// Layers come in groups of this many, the last of each full
    /// (`attention.sliding_window_pattern`, written per layer).
    pub period: usize,
    /// Head size and KV heads of the sliding layers
    /// (`attention.key_length_swa`; `attention.head_count_kv` per layer).
    pub swa_heads: (usize, usize),
    /// KV heads of the full layers (whose heads are `head_width`).
    pub full_kv_heads: usize,
    /// The last layers that share keys and values
    /// (`attention.shared_kv_layers`).
    pub shared_kv_layers: usize,
    /// Width of each layer's per-layer embedding (0: none).
    pub per_layer: usize,
    /// Of the full layers' RoPE pairs, those that rotate (`rope_freqs`).
    pub full_rotated_pairs: usize,
    /// The KV-sharing layers' feed-forward blocks are twice as wide, as
    /// E2B's (`use_double_wide_mlp`): `feed_forward_length` is then written
    /// per layer.
    pub double_wide_shared: bool,
}

impl SynthGemma4 {
    /// Whether layer `l` attends a sliding window.
    pub fn is_sliding(&self, l: usize) -> bool {
        !(l + 1).is_multiple_of(self.period)
    }

    /// The feed-forward width of layer `l` of `layers`, the shape's being
    /// `ffn`.
    pub fn ffn_width(&self, l: usize, layers: usize, ffn: usize) -> usize {
        match self.double_wide_shared && l >= layers - self.shared_kv_layers {
            true => 2 * ffn,
            false => ffn,
        }
    }
}

/// The hyper-parameters of a [`SynthShape`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShapeParams {
    /// The architecture (`general.architecture`, the key prefix).
    pub arch: Architecture,
    /// Width of a head when it is not `dim / n_heads`
    /// (`attention.key_length` and `value_length`).
    pub head_width: Option<usize>,
    /// Keys a sliding-window layer sees (`attention.sliding_window`), for
    /// architectures with such layers.
    pub sliding_window: Option<usize>,
    /// Embedding width (`llama.embedding_length`).
    pub dim: usize,
    /// Transformer blocks (`llama.block_count`).
    pub n_layers: usize,
    /// Query heads (`llama.attention.head_count`).
    pub n_heads: usize,
    /// Key/value heads (`llama.attention.head_count_kv`).
    pub n_kv_heads: usize,
    /// FFN hidden width (`llama.feed_forward_length`).
    pub ffn: usize,
    /// Vocabulary size (`llama.vocab_size`).
    pub vocab: usize,
    /// Training context (`llama.context_length`).
    pub context: usize,
    /// RoPE base frequency (`llama.rope.freq_base`).
    pub rope_freq_base: f32,
    /// RMS-norm epsilon (`llama.attention.layer_norm_rms_epsilon`).
    pub rms_eps: f32,
    /// Whether the output projection reuses `token_embd.weight` (the file
    /// then has no `output.weight`).
    pub tied_embeddings: bool,
    /// The mixture of experts in place of each feed-forward block
    /// (architectures with experts).
    pub experts: Option<baton_model::Experts>,
    /// YaRN's factor and the trained context before it
    /// (`rope.scaling.{factor,original_context_length}`), if any.
    pub yarn: Option<(f32, usize)>,
    /// A hybrid architecture's recurrent layers.
    pub recurrent: Option<SynthRecurrent>,
    /// Elements of each head that RoPE rotates, when not all.
    pub rope_dims: Option<usize>,
    /// Gemma 4's per-layer structure.
    pub gemma4: Option<SynthGemma4>,
    /// Multi-token-prediction blocks written after the model's own
    /// (`nextn_predict_layers`, counted in `block_count`), as Qwen 3.5's
    /// files hold them: a full-attention block with `nextn.*` tensors.
    pub mtp_layers: usize,
}

/// The recurrent (Gated DeltaNet) layers of a hybrid shape, under the
/// `ssm.*` keys llama.cpp reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SynthRecurrent {
    /// Taps of the convolution (`ssm.conv_kernel`).
    pub conv_kernel: usize,
    /// Width of a key and of a value head (`ssm.state_size`).
    pub head_dim: usize,
    /// Key heads (`ssm.group_count`).
    pub key_heads: usize,
    /// Value heads (`ssm.time_step_rank`).
    pub value_heads: usize,
    /// Every this-many-th layer attends (`full_attention_interval`).
    pub interval: usize,
}

impl SynthRecurrent {
    /// Whether layer `l` is recurrent.
    pub fn is_recurrent(&self, l: usize) -> bool {
        !(l + 1).is_multiple_of(self.interval)
    }
}

impl ShapeParams {
    /// Width of one attention head (`head_width`, else `dim / n_heads`).
    pub fn head_dim(&self) -> usize {
        self.head_width.unwrap_or(self.dim / self.n_heads)
    }

    /// Elements of each head RoPE rotates (`rope.dimension_count`).
    pub fn rope_dims(&self) -> usize {
        self.rope_dims.unwrap_or(self.head_dim())
    }
}

impl SynthShape {
    /// Every shape, smallest first.
    pub const ALL: [SynthShape; 20] = [
        Self::Tiny,
        Self::Gemma3,
        Self::Qwen2,
        Self::Qwen3,
        Self::Qwen3Moe,
        Self::GptOss,
        Self::Qwen35,
        Self::Qwen35Moe,
        Self::Gemma4,
        Self::Gemma4Moe,
        Self::Tiny256,
        Self::Stories15M,
        Self::Stories110M,
        Self::Smol135M,
        Self::Llama1B,
        Self::Llama3B,
        Self::Llama8B,
        Self::Qwen3MoeA3b8L,
        Self::GptOss20b8L,
        Self::Qwen35MoeA3b8L,
    ];

    /// The shape's name, as `baton model synth --shape` takes it.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Tiny => "tiny",
            Self::Tiny256 => "tiny256",
            Self::Stories15M => "stories15M",
            Self::Stories110M => "stories110M",
            Self::Smol135M => "smol135M",
            Self::Gemma3 => "gemma3",
            Self::Qwen2 => "qwen2",
            Self::Qwen3 => "qwen3",
            Self::Qwen3Moe => "qwen3moe",
            Self::GptOss => "gpt-oss",
            Self::Qwen35 => "qwen35",
            Self::Qwen35Moe => "qwen35moe",
            Self::Gemma4 => "gemma4",
            Self::Gemma4Moe => "gemma4moe",
            Self::Qwen3MoeA3b8L => "qwen3moe-a3b-8l",
            Self::GptOss20b8L => "gpt-oss-20b-8l",
            Self::Qwen35MoeA3b8L => "qwen35moe-a3b-8l",
            Self::Llama1B => "llama1B",
            Self::Llama3B => "llama3B",
            Self::Llama8B => "llama8B",
        }
    }

    /// Parses a name as printed by [`SynthShape::name`], ignoring case.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|shape| shape.name().eq_ignore_ascii_case(name))
    }

    /// The shape's hyper-parameters.
    pub const fn params(self) -> ShapeParams {
        // The toy every other architecture's shape starts from.
        const TOY: ShapeParams = ShapeParams {
            arch: Architecture::Llama,
            head_width: None,
            sliding_window: None,
            dim: 64,
            n_layers: 3,
            n_heads: 4,
            n_kv_heads: 2,
            ffn: 160,
            vocab: 512,
            context: 512,
            rope_freq_base: 1_000_000.0,
            rms_eps: 1e-6,
            tied_embeddings: false,
            experts: None,
            yarn: None,
            recurrent: None,
            rope_dims: None,
            gemma4: None,
            mtp_layers: 0,
        };
        // Llama 3's: the 1B, 3B and 8B shapes change only their widths.
        const LLAMA3: ShapeParams = ShapeParams {
            arch: Architecture::Llama,
            head_width: None,
            sliding_window: None,
            dim: 2048,
            n_layers: 16,
            n_heads: 32,
            n_kv_heads: 8,
            ffn: 8192,
            vocab: 128_256,
            context: 131_072,
            rope_freq_base: 500_000.0,
            rms_eps: 1e-5,
            tied_embeddings: true,
            experts: None,
            yarn: None,
            recurrent: None,
            rope_dims: None,
            gemma4: None,
            mtp_layers: 0,
        };
        match self {
            Self::Llama1B => LLAMA3,
            Self::Llama3B => ShapeParams { dim: 3072, n_layers: 28, n_heads: 24, ..LLAMA3 },
            Self::Llama8B => ShapeParams { dim: 4096, n_layers: 32, ffn: 14_336, tied_embeddings: false, ..LLAMA3 },
            Self::Gemma3 => ShapeParams {
                arch: Architecture::Gemma3,
                head_width: Some(32),
                sliding_window: Some(8),
                n_layers: 6,
                n_kv_heads: 1,
                ffn: 128,
                tied_embeddings: true,
                experts: None,
                yarn: None,
                ..TOY
            },
            Self::Qwen2 => ShapeParams { arch: Architecture::Qwen2, ..TOY },
            Self::Gemma4 => ShapeParams {
                arch: Architecture::Gemma4,
                head_width: Some(64),
                sliding_window: Some(8),
                n_layers: 8,
                n_kv_heads: 1,
                ffn: 128,
                tied_embeddings: true,
                gemma4: Some(SynthGemma4 {
                    period: 4,
                    swa_heads: (32, 2),
                    full_kv_heads: 1,
                    shared_kv_layers: 4,
                    per_layer: 16,
                    full_rotated_pairs: 8,
                    double_wide_shared: true,
                }),
                ..TOY
            },
            Self::Gemma4Moe => ShapeParams {
                arch: Architecture::Gemma4,
                head_width: Some(64),
                sliding_window: Some(8),
                n_layers: 6,
                n_kv_heads: 1,
                ffn: 64,
                tied_embeddings: true,
                experts: Some(baton_model::Experts { count: 16, used: 4, ffn_dim: 32, shared: None }),
                gemma4: Some(SynthGemma4 {
                    period: 3,
                    swa_heads: (32, 2),
                    full_kv_heads: 1,
                    shared_kv_layers: 0,
                    per_layer: 0,
                    full_rotated_pairs: 8,
                    double_wide_shared: false,
                }),
                ..TOY
            },
            Self::Qwen3 => {
                ShapeParams { arch: Architecture::Qwen3, head_width: Some(32), ffn: 192, tied_embeddings: true, ..TOY }
            }
            Self::Qwen3Moe => ShapeParams {
                arch: Architecture::Qwen3Moe,
                head_width: Some(32),
                ffn: 256,
                experts: Some(baton_model::Experts { count: 16, used: 4, ffn_dim: 64, shared: None }),
                yarn: None,
                ..TOY
            },
            Self::GptOss => ShapeParams {
                arch: Architecture::GptOss,
                head_width: Some(32),
                sliding_window: Some(8),
                n_layers: 4,
                ffn: 64,
                rope_freq_base: 150_000.0,
                rms_eps: 1e-5,
                experts: Some(baton_model::Experts { count: 16, used: 4, ffn_dim: 64, shared: None }),
                yarn: Some((4.0, 64)),
                ..TOY
            },
            Self::GptOss20b8L => ShapeParams {
                arch: Architecture::GptOss,
                head_width: Some(64),
                sliding_window: Some(128),
                dim: 2880,
                n_layers: 8,
                n_heads: 64,
                n_kv_heads: 8,
                ffn: 2880,
                vocab: 201_088,
                context: 131_072,
                rope_freq_base: 150_000.0,
                rms_eps: 1e-5,
                tied_embeddings: false,
                experts: Some(baton_model::Experts { count: 32, used: 4, ffn_dim: 2880, shared: None }),
                yarn: Some((32.0, 4096)),
                recurrent: None,
                rope_dims: None,
                gemma4: None,
                mtp_layers: 0,
            },
            Self::Qwen3MoeA3b8L => ShapeParams {
                arch: Architecture::Qwen3Moe,
                head_width: Some(128),
                sliding_window: None,
                dim: 2048,
                n_layers: 8,
                n_heads: 32,
                n_kv_heads: 4,
                ffn: 6144,
                vocab: 151_936,
                context: 40_960,
                rope_freq_base: 1_000_000.0,
                rms_eps: 1e-6,
                tied_embeddings: false,
                experts: Some(baton_model::Experts { count: 128, used: 8, ffn_dim: 768, shared: None }),
                yarn: None,
                recurrent: None,
                rope_dims: None,
                gemma4: None,
                mtp_layers: 0,
            },
            Self::Qwen35 => ShapeParams {
                arch: Architecture::Qwen35,
                head_width: Some(32),
                n_layers: 4,
                rope_freq_base: 10_000_000.0,
                recurrent: Some(QWEN35_RECURRENT),
                rope_dims: Some(8),
                mtp_layers: 1,
                ..TOY
            },
            Self::Qwen35Moe => ShapeParams {
                arch: Architecture::Qwen35Moe,
                head_width: Some(32),
                n_layers: 4,
                ffn: 256,
                rope_freq_base: 10_000_000.0,
                experts: Some(baton_model::Experts { count: 16, used: 4, ffn_dim: 64, shared: Some(96) }),
                recurrent: Some(QWEN35_RECURRENT),
                rope_dims: Some(8),
                mtp_layers: 1,
                ..TOY
            },
            Self::Qwen35MoeA3b8L => ShapeParams {
                arch: Architecture::Qwen35Moe,
                head_width: Some(256),
                sliding_window: None,
                dim: 2048,
                n_layers: 8,
                n_heads: 16,
                n_kv_heads: 2,
                ffn: 512,
                vocab: 248_320,
                context: 262_144,
                rope_freq_base: 10_000_000.0,
                rms_eps: 1e-6,
                tied_embeddings: false,
                experts: Some(baton_model::Experts { count: 256, used: 8, ffn_dim: 512, shared: Some(512) }),
                yarn: None,
                recurrent: Some(SynthRecurrent {
                    conv_kernel: 4,
                    head_dim: 128,
                    key_heads: 16,
                    value_heads: 32,
                    interval: 4,
                }),
                rope_dims: Some(64),
                gemma4: None,
                mtp_layers: 1,
            },
            Self::Tiny => ShapeParams {
                arch: Architecture::Llama,
                head_width: None,
                sliding_window: None,
                dim: 64,
                n_layers: 5,
                n_heads: 8,
                n_kv_heads: 4,
                ffn: 172,
                vocab: 512,
                context: 512,
                rope_freq_base: 10_000.0,
                rms_eps: 1e-5,
                tied_embeddings: false,
                experts: None,
                yarn: None,
                recurrent: None,
                rope_dims: None,
                gemma4: None,
                mtp_layers: 0,
            },
            Self::Tiny256 => ShapeParams {
                arch: Architecture::Llama,
                head_width: None,
                sliding_window: None,
                dim: 256,
                n_layers: 2,
                n_heads: 4,
                n_kv_heads: 2,
                ffn: 512,
                vocab: 512,
                context: 512,
                rope_freq_base: 10_000.0,
                rms_eps: 1e-5,
                tied_embeddings: false,
                experts: None,
                yarn: None,
                recurrent: None,
                rope_dims: None,
                gemma4: None,
                mtp_layers: 0,
            },
            Self::Stories110M => ShapeParams {
                arch: Architecture::Llama,
                head_width: None,
                sliding_window: None,
                dim: 768,
                n_layers: 12,
                n_heads: 12,
                n_kv_heads: 12,
                ffn: 2048,
                vocab: 32_000,
                context: 1024,
                rope_freq_base: 10_000.0,
                rms_eps: 1e-5,
                tied_embeddings: true,
                experts: None,
                yarn: None,
                recurrent: None,
                rope_dims: None,
                gemma4: None,
                mtp_layers: 0,
            },
            Self::Stories15M => ShapeParams {
                arch: Architecture::Llama,
                head_width: None,
                sliding_window: None,
                dim: 288,
                n_layers: 6,
                n_heads: 6,
                n_kv_heads: 6,
                ffn: 768,
                vocab: 32_000,
                context: 256,
                rope_freq_base: 10_000.0,
                rms_eps: 1e-5,
                tied_embeddings: false,
                experts: None,
                yarn: None,
                recurrent: None,
                rope_dims: None,
                gemma4: None,
                mtp_layers: 0,
            },
            Self::Smol135M => ShapeParams {
                arch: Architecture::Llama,
                head_width: None,
                sliding_window: None,
                dim: 576,
                n_layers: 30,
                n_heads: 9,
                n_kv_heads: 3,
                ffn: 1536,
                vocab: 49_152,
                context: 8192,
                rope_freq_base: 100_000.0,
                rms_eps: 1e-5,
                tied_embeddings: true,
                experts: None,
                yarn: None,
                recurrent: None,
                rope_dims: None,
                gemma4: None,
                mtp_layers: 0,
            },
        }
    }
}

impl std::fmt::Display for SynthShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What to generate: a shape, the storage type of its matrices and the seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SynthSpec {
    /// The model's shape.
    pub shape: SynthShape,
    /// The matrices' type, one of [`SynthSpec::SUPPORTED_DTYPES`]. Norms are
    /// F32 regardless.
    pub dtype: DType,
    /// The seed of every weight; the same spec always gives the same bytes.
    pub seed: u64,
}

impl SynthSpec {
    /// The matrix types synthetic models can be written in: the weight
    /// types the loader accepts (`baton_kernels::WEIGHT_TYPES`) that have a
    /// llama.cpp file type to name them by (not Q8_K, an activation type
    /// only). MXFP4 files hold every matrix in MXFP4, where llama.cpp's
    /// MXFP4_MOE (gpt-oss) keeps only the experts so.
    pub const SUPPORTED_DTYPES: [DType; 14] = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::Q8_0,
        DType::Q4_0,
        DType::Q4_1,
        DType::Q5_0,
        DType::Q5_1,
        DType::MXFP4,
        DType::Q2_K,
        DType::Q3_K,
        DType::Q4_K,
        DType::Q5_K,
        DType::Q6_K,
    ];
}
