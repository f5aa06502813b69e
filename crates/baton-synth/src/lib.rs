//! Random-weight GGUF files of the architectures Baton loads, for tests
//! and benchmarks: any weight type and shape, written here and checked
//! against the reference engine on the same file.
#![deny(missing_docs)]

mod metadata;
mod rng;
mod shape;
mod tensors;

use std::path::{Path, PathBuf};

use baton_core::DType;
use baton_gguf::{GgmlType, GgufWriter, WriteError};

pub use shape::{ShapeParams, SynthGemma4, SynthRecurrent, SynthShape, SynthSpec};
pub use tensors::SynthMix;

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
    #[error("synthetic models are written in f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, mxfp4, q2_k, q3_k, q4_k, q5_k or q6_k, not {dtype}")]
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
    /// A layer count the shape cannot take: none, or a shape whose layers
    /// each have a part of their own (Gemma 4's shared keys and values,
    /// per-layer widths).
    #[error("shape {shape} cannot be written with {layers} layers")]
    Layers {
        /// The shape asked for.
        shape: SynthShape,
        /// The layers asked for.
        layers: usize,
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
///   pre-tokenizer `smollm`, BOS = EOS = 0, no BOS added), except for the
///   `gemma4` shapes: [`baton_tokenizer::synthetic_gemma4`], Gemma 4's
///   kind (`tokenizer.ggml.model = gemma4`, BOS 2 added, EOS 1).
/// - Weight matrices hold normal-ish noise (see the PRNG notes below) with
///   standard deviation `1/sqrt(d)`, `d` the row length (the input width):
///   against RMS-normalised activations every projection, attention score and
///   logit is then of order one, so a forward pass is finite, its softmaxes
///   are neither one-hot nor uniform, and greedy decoding depends on the
///   prompt.
/// - Norm weights (`attn_norm`, `ffn_norm`, `output_norm`) are
///   `1 + 0.1 · noise`, always F32, as llama.cpp stores them.
/// - Matrices use the requested [`DType`]. A block type (Q8_0, Q4_0, Q4_1,
///   Q5_0, Q5_1, MXFP4: 32 values a block; Q2_K .. Q6_K: 256) needs rows of whole blocks;
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
/// use baton_synth::{write_synth_model, SynthShape, SynthSpec};
///
/// let spec = SynthSpec { shape: SynthShape::Tiny, dtype: DType::Q4_1, seed: 42 };
/// let summary = write_synth_model(&spec, "/tmp/tiny-q4_1.gguf")?;
/// println!("{} parameters, {} bytes", summary.n_params, summary.bytes);
/// # Ok::<(), baton_synth::SynthError>(())
/// ```
pub fn write_synth_model(spec: &SynthSpec, path: impl AsRef<Path>) -> Result<SynthSummary, SynthError> {
    write_synth_model_mixed(spec, SynthMix::Uniform, path)
}

/// As [`write_synth_model`], its matrices typed as `mix` says: with
/// [`SynthMix::Q4KM`] (`spec.dtype` must then be Q4_K), llama.cpp's Q4_K_M
/// mix, and with [`SynthMix::Mxfp4Moe`] (`spec.dtype` Q8_0) its MXFP4_MOE,
/// as the files people download come.
///
/// # Errors
/// As [`write_synth_model`]; a mix over another type than its own is
/// [`SynthError::UnsupportedDType`].
pub fn write_synth_model_mixed(
    spec: &SynthSpec,
    mix: SynthMix,
    path: impl AsRef<Path>,
) -> Result<SynthSummary, SynthError> {
    write_synth_model_layers(spec, mix, None, path)
}

/// As [`write_synth_model_mixed`], with `layers` blocks in place of the
/// shape's own count where it is given: the real-shape files at as many
/// layers as a machine's memory holds (a hybrid shape keeps its pattern of
/// a full-attention layer every few).
///
/// # Errors
/// As [`write_synth_model_mixed`]; [`SynthError::Layers`] for 0 layers or a
/// Gemma 4 shape (its layers share keys and values by position).
pub fn write_synth_model_layers(
    spec: &SynthSpec,
    mix: SynthMix,
    layers: Option<usize>,
    path: impl AsRef<Path>,
) -> Result<SynthSummary, SynthError> {
    let path = path.as_ref();
    let mut file_type = metadata::file_type(spec.dtype).ok_or(SynthError::UnsupportedDType { dtype: spec.dtype })?;
    match mix {
        SynthMix::Uniform => {}
        SynthMix::Q4KM if spec.dtype == DType::Q4_K => file_type = 15, // LLAMA_FTYPE_MOSTLY_Q4_K_M
        SynthMix::Mxfp4Moe if spec.dtype == DType::Q8_0 => file_type = 38, // LLAMA_FTYPE_MOSTLY_MXFP4_MOE
        _ => return Err(SynthError::UnsupportedDType { dtype: spec.dtype }),
    }
    let write_error = |source| SynthError::Write { path: path.to_path_buf(), source };
    let mut params = spec.shape.params();
    if let Some(layers) = layers {
        if layers == 0 || params.gemma4.is_some() {
            return Err(SynthError::Layers { shape: spec.shape, layers });
        }
        params.n_layers = layers;
    }
    let mut plan = tensors::plan(&params, spec.dtype);
    tensors::apply_mix(&mut plan, mix, &params);

    let mut writer = GgufWriter::new();
    metadata::add_model_keys(&mut writer, spec, &params, file_type).map_err(write_error)?;
    let tokenizer = match params.gemma4 {
        Some(_) => baton_tokenizer::synthetic_gemma4(params.vocab),
        None => baton_tokenizer::synthetic_bpe(params.vocab),
    };
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
