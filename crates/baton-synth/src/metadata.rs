//! The metadata of a synthetic model: llama hyper-parameters and the
//! synthetic BPE tokenizer, under the keys llama.cpp writes.

use baton_core::DType;
use baton_gguf::{GgufWriter, WriteError};
use baton_tokenizer::TokenizerConfig;

use super::shape::{ShapeParams, SynthGemma4, SynthSpec};

/// llama.cpp's `general.file_type` (`enum llama_ftype`) of a file whose
/// matrices are mostly `dtype`; `None` for types synthetic models do not
/// offer. BF16 maps to `MOSTLY_BF16` (32); the K-quants map to `MOSTLY_Q2_K` (10), `MOSTLY_Q3_K_S` (11),
/// `MOSTLY_Q4_K_M` (15), `MOSTLY_Q5_K_M` (17) and `MOSTLY_Q6_K` (18);
/// llama.cpp's mixes put some matrices in other types (Q6_K, Q4_K), which a
/// synthetic file does not (every matrix is the requested type, or its
/// fallback).
pub(crate) fn file_type(dtype: DType) -> Option<u32> {
    match dtype {
        DType::F32 => Some(0),
        DType::F16 => Some(1),
        DType::BF16 => Some(32),
        DType::Q4_0 => Some(2),
        DType::Q4_1 => Some(3),
        DType::Q8_0 => Some(7),
        DType::Q5_0 => Some(8),
        DType::Q5_1 => Some(9),
        DType::Q2_K => Some(10),
        DType::Q3_K => Some(11),
        DType::Q4_K => Some(15),
        DType::Q5_K => Some(17),
        DType::Q6_K => Some(18),
        // LLAMA_FTYPE_MOSTLY_MXFP4_MOE.
        DType::MXFP4 => Some(38),
        DType::Q8_K | DType::I32 => None,
    }
}

/// Adds the `general.*` keys and the architecture's own (`llama.*`,
/// `gemma3.*`, …).
pub(crate) fn add_model_keys(
    writer: &mut GgufWriter<'_>,
    spec: &SynthSpec,
    p: &ShapeParams,
    file_type: u32,
) -> Result<(), WriteError> {
    let layers = match p.n_layers == spec.shape.params().n_layers {
        true => String::new(),
        false => format!(" at {} layers", p.n_layers),
    };
    let name = format!("baton synthetic {}{layers} {} (seed {})", spec.shape.name(), spec.dtype, spec.seed);
    // The shapes are built-in constants, all far below u32::MAX.
    let as_u32 = |n: usize| n as u32;
    let arch = p.arch.name();
    let key = |k: &str| format!("{arch}.{k}");
    writer.add_metadata("general.architecture", arch)?;
    writer.add_metadata("general.type", "model")?;
    writer.add_metadata("general.name", name)?;
    writer.add_metadata("general.file_type", file_type)?;
    if spec.dtype.is_quantized() {
        // ggml's GGML_QNT_VERSION, written by llama.cpp for quantized files.
        writer.add_metadata("general.quantization_version", 2u32)?;
    }
    writer.add_metadata(key("context_length"), as_u32(p.context))?;
    writer.add_metadata(key("embedding_length"), as_u32(p.dim))?;
    writer.add_metadata(key("block_count"), as_u32(p.n_layers + p.mtp_layers))?;
    if p.mtp_layers > 0 {
        writer.add_metadata(key("nextn_predict_layers"), as_u32(p.mtp_layers))?;
    }
    match p.gemma4.filter(|g| g.double_wide_shared) {
        Some(g) => {
            let widths: Vec<u32> = (0..p.n_layers).map(|l| as_u32(g.ffn_width(l, p.n_layers, p.ffn))).collect();
            writer.add_metadata(key("feed_forward_length"), widths)?;
        }
        None => {
            writer.add_metadata(key("feed_forward_length"), as_u32(p.ffn))?;
        }
    }
    writer.add_metadata(key("attention.head_count"), as_u32(p.n_heads))?;
    match p.gemma4 {
        Some(g) => add_gemma4_keys(writer, p, g)?,
        None => {
            writer.add_metadata(key("attention.head_count_kv"), as_u32(p.n_kv_heads))?;
        }
    }
    writer.add_metadata(key("attention.layer_norm_rms_epsilon"), p.rms_eps)?;
    writer.add_metadata(key("rope.freq_base"), p.rope_freq_base)?;
    writer.add_metadata(key("rope.dimension_count"), as_u32(p.rope_dims()))?;
    writer.add_metadata(key("vocab_size"), as_u32(p.vocab))?;
    if let Some(width) = p.head_width {
        writer.add_metadata(key("attention.key_length"), as_u32(width))?;
        writer.add_metadata(key("attention.value_length"), as_u32(width))?;
    }
    if let Some((factor, orig)) = p.yarn {
        writer.add_metadata(key("rope.scaling.type"), "yarn")?;
        writer.add_metadata(key("rope.scaling.factor"), factor)?;
        writer.add_metadata(key("rope.scaling.original_context_length"), as_u32(orig))?;
    }
    if let Some(e) = p.experts {
        writer.add_metadata(key("expert_count"), as_u32(e.count))?;
        writer.add_metadata(key("expert_used_count"), as_u32(e.used))?;
        writer.add_metadata(key("expert_feed_forward_length"), as_u32(e.ffn_dim))?;
        if let Some(shared) = e.shared {
            writer.add_metadata(key("expert_shared_feed_forward_length"), as_u32(shared))?;
        }
    }
    if let Some(r) = p.recurrent {
        writer.add_metadata(key("ssm.conv_kernel"), as_u32(r.conv_kernel))?;
        writer.add_metadata(key("ssm.state_size"), as_u32(r.head_dim))?;
        writer.add_metadata(key("ssm.group_count"), as_u32(r.key_heads))?;
        writer.add_metadata(key("ssm.time_step_rank"), as_u32(r.value_heads))?;
        writer.add_metadata(key("ssm.inner_size"), as_u32(r.value_heads * r.head_dim))?;
        writer.add_metadata(key("full_attention_interval"), as_u32(r.interval))?;
        // Qwen 3.5's multimodal RoPE sections (llama.cpp requires them): a
        // text token's position in every section, so it is NeoX RoPE over
        // the rotated elements. The pairs split as Qwen 3.5's [11, 11, 10].
        let pairs = as_u32(p.rope_dims() / 2);
        let first = pairs.div_ceil(3);
        let sections = vec![first, first.min(pairs - first), pairs - first - first.min(pairs - first), 0];
        writer.add_metadata(key("rope.dimension_sections"), sections)?;
    }
    if let Some(window) = p.sliding_window {
        writer.add_metadata(key("attention.sliding_window"), as_u32(window))?;
    }
    Ok(())
}

/// Adds Gemma 4's keys: the per-layer pattern and KV heads, the sliding
/// layers' head size and RoPE, shared layers, per-layer embeddings and the
/// logits' soft-cap.
fn add_gemma4_keys(writer: &mut GgufWriter<'_>, params: &ShapeParams, g: SynthGemma4) -> Result<(), WriteError> {
    let key = |k: &str| format!("gemma4.{k}");
    let as_u32 = |n: usize| n as u32;
    let layers = 0..params.n_layers;
    let sliding: Vec<bool> = layers.clone().map(|l| g.is_sliding(l)).collect();
    let kv_heads: Vec<u32> =
        layers.map(|l| as_u32(if g.is_sliding(l) { g.swa_heads.1 } else { g.full_kv_heads })).collect();
    writer.add_metadata(key("attention.sliding_window_pattern"), sliding)?;
    writer.add_metadata(key("attention.head_count_kv"), kv_heads)?;
    writer.add_metadata(key("attention.key_length_swa"), as_u32(g.swa_heads.0))?;
    writer.add_metadata(key("attention.value_length_swa"), as_u32(g.swa_heads.0))?;
    writer.add_metadata(key("rope.dimension_count_swa"), as_u32(g.swa_heads.0))?;
    writer.add_metadata(key("rope.freq_base_swa"), 10_000.0f32)?;
    writer.add_metadata(key("attention.shared_kv_layers"), as_u32(g.shared_kv_layers))?;
    writer.add_metadata(key("embedding_length_per_layer_input"), as_u32(g.per_layer))?;
    writer.add_metadata(key("final_logit_softcapping"), 30.0f32)?;
    Ok(())
}

/// Adds the `tokenizer.ggml.*` keys of `config`: every field that is set.
pub(crate) fn add_tokenizer_keys(writer: &mut GgufWriter<'_>, config: TokenizerConfig) -> Result<(), WriteError> {
    writer.add_metadata("tokenizer.ggml.model", config.model)?;
    if let Some(pre) = config.pre {
        writer.add_metadata("tokenizer.ggml.pre", pre)?;
    }
    writer.add_metadata("tokenizer.ggml.tokens", config.tokens)?;
    if let Some(scores) = config.scores {
        writer.add_metadata("tokenizer.ggml.scores", scores)?;
    }
    if let Some(types) = config.token_types {
        writer.add_metadata("tokenizer.ggml.token_type", types)?;
    }
    if let Some(merges) = config.merges {
        writer.add_metadata("tokenizer.ggml.merges", merges)?;
    }
    let ids = [
        ("tokenizer.ggml.bos_token_id", config.bos_id),
        ("tokenizer.ggml.eos_token_id", config.eos_id),
        ("tokenizer.ggml.unknown_token_id", config.unk_id),
        ("tokenizer.ggml.padding_token_id", config.pad_id),
    ];
    for (key, id) in ids {
        if let Some(id) = id {
            writer.add_metadata(key, id)?;
        }
    }
    let flags = [
        ("tokenizer.ggml.add_bos_token", config.add_bos),
        ("tokenizer.ggml.add_eos_token", config.add_eos),
        ("tokenizer.ggml.add_space_prefix", config.add_space_prefix),
    ];
    for (key, flag) in flags {
        if let Some(flag) = flag {
            writer.add_metadata(key, flag)?;
        }
    }
    Ok(())
}
