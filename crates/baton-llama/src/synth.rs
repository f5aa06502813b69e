//! Random-weight llama GGUF files for tests and benchmarks.

mod metadata;
mod rng;
mod tensors;

use std::path::{Path, PathBuf};

use baton_core::DType;
use baton_gguf::{GgmlType, GgufWriter, WriteError};

use crate::arch::Architecture;

/// The model shapes [`write_synth_model`] can generate.
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
}

impl ShapeParams {
    /// Width of one attention head (`head_width`, else `dim / n_heads`),
    /// also the RoPE dimension count.
    pub fn head_dim(&self) -> usize {
        self.head_width.unwrap_or(self.dim / self.n_heads)
    }

    /// The number of tensors in the file: the embedding, those of every
    /// block (nine, plus the architecture's biases and extra norms), the
    /// output norm and, unless tied, the output projection.
    pub fn tensor_count(&self) -> usize {
        tensors::plan(self, DType::F32).len()
    }

    /// The number of weights in the file (every tensor's element count).
    pub fn n_params(&self) -> u64 {
        tensors::plan(self, DType::F32).iter().map(tensors::TensorPlan::elements).sum()
    }
}

impl SynthShape {
    /// Every shape, smallest first.
    pub const ALL: [SynthShape; 8] = [
        Self::Tiny,
        Self::Gemma3,
        Self::Qwen2,
        Self::Qwen3,
        Self::Tiny256,
        Self::Stories15M,
        Self::Stories110M,
        Self::Smol135M,
    ];

    /// The shape's name: `tiny`, `tiny256`, `stories15M`, `stories110M`,
    /// `smol135M`, `gemma3`, `qwen2` or `qwen3`.
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
        };
        match self {
            Self::Gemma3 => ShapeParams {
                arch: Architecture::Gemma3,
                head_width: Some(32),
                sliding_window: Some(8),
                n_layers: 6,
                n_kv_heads: 1,
                ffn: 128,
                tied_embeddings: true,
                ..TOY
            },
            Self::Qwen2 => ShapeParams { arch: Architecture::Qwen2, ..TOY },
            Self::Qwen3 => {
                ShapeParams { arch: Architecture::Qwen3, head_width: Some(32), ffn: 192, tied_embeddings: true, ..TOY }
            }
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
    /// llama.cpp file type to name them by (not BF16, whose files Baton
    /// does not write yet, nor Q8_K, an activation type only).
    pub const SUPPORTED_DTYPES: [DType; 12] = [
        DType::F32,
        DType::F16,
        DType::Q8_0,
        DType::Q4_0,
        DType::Q4_1,
        DType::Q5_0,
        DType::Q5_1,
        DType::Q2_K,
        DType::Q3_K,
        DType::Q4_K,
        DType::Q5_K,
        DType::Q6_K,
    ];
}

/// What [`write_synth_model`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SynthSummary {
    /// The file written.
    pub path: PathBuf,
    /// The number of weights (every tensor's element count).
    pub n_params: u64,
    /// The file's size in bytes.
    pub bytes: u64,
    /// The matrices stored in another type than the requested one, with the
    /// type used (Q8_0 or F16), because their rows are not whole blocks of
    /// the requested type. Empty for F32 and F16 files.
    pub fallbacks: Vec<(String, DType)>,
}

/// Why a synthetic model could not be written.
#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    /// The requested matrix type is not one synthetic models offer.
    #[error("synthetic models are written in f32, f16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k or q6_k, not {dtype}")]
    UnsupportedDType {
        /// The type asked for.
        dtype: DType,
    },
    /// Building or writing the GGUF file failed (the file may be left partly
    /// written).
    #[error("cannot write synthetic model {path}")]
    Write {
        /// The file being written.
        path: PathBuf,
        /// What the GGUF writer reported.
        #[source]
        source: WriteError,
    },
}

/// Writes the model `spec` describes to `path` (created or truncated) as a
/// GGUF v3 file; see the module docs for its contents.
///
/// # Errors
/// [`SynthError::UnsupportedDType`] for a type outside
/// [`SynthSpec::SUPPORTED_DTYPES`]; [`SynthError::Write`] when the file cannot
/// be created or written.
///
/// Random-weight llama GGUF files for tests and benchmarks.
///
/// [`write_synth_model`] writes a GGUF v3 file that any GGUF reader
/// (llama.cpp, the Python `gguf` package, [`baton_gguf`]) loads as an
/// ordinary `llama` model: the standard `general.*`, `llama.*` and
/// `tokenizer.ggml.*` keys, the standard tensor names in llama.cpp's order,
/// ggml-order dims. The shapes ([`SynthShape`]) mirror models Baton is
/// measured on, from a 5-layer toy to SmolLM2-135M, plus two whose rows are
/// all multiples of 256 for the K-quants (`tiny256`, `stories110M`).
///
/// # What the file holds
///
/// - The tokenizer is [`baton_tokenizer::synthetic_bpe`] at the shape's
///   vocabulary size (byte-level BPE, `tokenizer.ggml.model = gpt2`,
///   pre-tokenizer `smollm`, BOS = EOS = 0, no BOS added).
/// - Weight matrices hold normal-ish noise (see the PRNG notes below) with
///   standard deviation `1/sqrt(d)`, `d` the row length (the input width):
///   against RMS-normalised activations every projection, attention score and
///   logit is then of order one, so a forward pass is finite, its softmaxes
///   are neither one-hot nor uniform, and greedy decoding depends on the
///   prompt.
/// - Norm weights (`attn_norm`, `ffn_norm`, `output_norm`) are
///   `1 + 0.1 · noise`, always F32, as llama.cpp stores them.
/// - Matrices use the requested [`DType`]. A block type (Q8_0, Q4_0, Q4_1,
///   Q5_0, Q5_1: 32 values a block; Q2_K .. Q6_K: 256) needs rows of whole blocks;
///   a matrix whose rows are not falls back, as llama.cpp's quantizer does:
///   a K-quant to Q8_0 when the rows are whole blocks of 32, anything else
///   to F16. `tiny`'s `ffn_down` (rows of 172 values) is F16 in every
///   quantized file; in `tiny`, `stories15M` and `smol135M` every K-quant
///   matrix falls back (their widths are not multiples of 256). The
///   [`SynthSummary`] lists every fallback.
///
/// # Determinism and speed
///
/// The bytes depend only on the [`SynthSpec`]: each tensor draws from its own
/// SplitMix64 stream seeded by the model seed and the tensor's name (see
/// `synth/rng.rs`). Tensors are generated a row at a time while the file is
/// written (through [`baton_gguf::GgufWriter::add_tensor_from_reader`]), so
/// memory use is a few rows whatever the model's size.
///
/// ```no_run
/// use baton_core::DType;
/// use baton_llama::{write_synth_model, SynthShape, SynthSpec};
///
/// let spec = SynthSpec { shape: SynthShape::Tiny, dtype: DType::Q4_1, seed: 42 };
/// let summary = write_synth_model(&spec, "/tmp/tiny-q4_1.gguf")?;
/// println!("{} parameters, {} bytes", summary.n_params, summary.bytes);
/// # Ok::<(), baton_llama::SynthError>(())
/// ```
pub fn write_synth_model(spec: &SynthSpec, path: impl AsRef<Path>) -> Result<SynthSummary, SynthError> {
    let path = path.as_ref();
    let file_type = metadata::file_type(spec.dtype).ok_or(SynthError::UnsupportedDType { dtype: spec.dtype })?;
    let write_error = |source| SynthError::Write { path: path.to_path_buf(), source };
    let params = spec.shape.params();
    let plan = tensors::plan(&params, spec.dtype);

    let mut writer = GgufWriter::new();
    metadata::add_model_keys(&mut writer, spec, file_type).map_err(write_error)?;
    let tokenizer = baton_tokenizer::synthetic_bpe(params.vocab);
    metadata::add_tokenizer_keys(&mut writer, tokenizer).map_err(write_error)?;
    for tensor in &plan {
        let ggml_type = GgmlType::from_id(tensor.dtype.ggml_id());
        writer
            .add_tensor_from_reader(tensor.name.as_str(), &tensor.dims, ggml_type, tensor.source(spec.seed))
            .map_err(write_error)?;
    }
    let bytes = writer.write_to_path(path).map_err(write_error)?;

    let summary = SynthSummary {
        path: path.to_path_buf(),
        n_params: plan.iter().map(tensors::TensorPlan::elements).sum(),
        bytes,
        fallbacks: plan.iter().filter(|t| t.fell_back).map(|t| (t.name.clone(), t.dtype)).collect(),
    };
    tracing::debug!(
        path = %path.display(),
        shape = %spec.shape,
        dtype = %spec.dtype,
        seed = spec.seed,
        n_params = summary.n_params,
        bytes,
        fallbacks = summary.fallbacks.len(),
        "wrote synthetic model"
    );
    Ok(summary)
}
