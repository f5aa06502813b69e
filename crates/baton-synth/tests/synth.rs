//! `baton_synth::write_synth_model`: the files it writes load with baton-gguf, carry the
//! llama keys, tensors and tokenizer, are deterministic in the seed and hold
//! sane weights.

use baton_model::EncodeOptions;
use std::path::Path;

use baton_core::DType;
use baton_gguf::{GgmlType, GgufFile, Metadata};
use baton_kernels::dequantize_row;
use baton_synth::{write_synth_model, SynthError, SynthShape, SynthSpec, SynthSummary};
use baton_testkit::TempDir;
use baton_tokenizer::{Tokenizer, TokenizerConfig};

fn tiny(dtype: DType, seed: u64) -> SynthSpec {
    SynthSpec { shape: SynthShape::Tiny, dtype, seed }
}

fn write(spec: &SynthSpec, path: &Path) -> (SynthSummary, GgufFile) {
    let summary = write_synth_model(spec, path).expect("write synthetic model");
    let file = GgufFile::open_in_memory(path).expect("read synthetic model back");
    (summary, file)
}

/// The tensor names, ggml dims and whether it is a norm, for a tiny model.
fn expected_tiny_tensors() -> Vec<(String, Vec<u64>, bool)> {
    let (dim, q, kv, ffn, vocab) = (64, 64, 32, 172, 512);
    let mut tensors = vec![("token_embd.weight".to_string(), vec![dim, vocab], false)];
    for layer in 0..5 {
        let name = |s: &str| format!("blk.{layer}.{s}.weight");
        tensors.extend([
            (name("attn_norm"), vec![dim], true),
            (name("attn_q"), vec![dim, q], false),
            (name("attn_k"), vec![dim, kv], false),
            (name("attn_v"), vec![dim, kv], false),
            (name("attn_output"), vec![q, dim], false),
            (name("ffn_norm"), vec![dim], true),
            (name("ffn_gate"), vec![dim, ffn], false),
            (name("ffn_up"), vec![dim, ffn], false),
            (name("ffn_down"), vec![ffn, dim], false),
        ]);
    }
    tensors.push(("output_norm.weight".to_string(), vec![dim], true));
    tensors.push(("output.weight".to_string(), vec![dim, vocab], false));
    tensors
}

#[test]
fn every_synthetic_type_is_a_type_the_loader_accepts() {
    for dtype in SynthSpec::SUPPORTED_DTYPES {
        assert!(baton_kernels::WEIGHT_TYPES.contains(&dtype), "{dtype}");
    }
}

#[test]
fn tiny_in_every_dtype_has_llama_keys_tensors_and_fallbacks() {
    let dir = TempDir::new("synth-keys");
    for dtype in SynthSpec::SUPPORTED_DTYPES {
        let path = dir.file(&format!("tiny-{dtype}.gguf"));
        let (summary, file) = write(&tiny(dtype, 1), &path);
        assert_eq!(file.version(), 3);
        let meta = file.metadata();
        assert_eq!(meta.get_str("general.architecture").unwrap(), "llama");
        assert!(meta.get_str("general.name").unwrap().contains("tiny"));
        let file_type = match dtype {
            DType::F32 => 0,
            DType::F16 => 1,
            DType::BF16 => 32,
            DType::Q4_0 => 2,
            DType::Q4_1 => 3,
            DType::Q5_0 => 8,
            DType::Q5_1 => 9,
            DType::MXFP4 => 38,
            DType::Q2_K => 10,
            DType::Q3_K => 11,
            DType::Q4_K => 15,
            DType::Q5_K => 17,
            DType::Q6_K => 18,
            _ => 7,
        };
        assert_eq!(meta.get_u32("general.file_type").unwrap(), file_type);
        for (key, value) in [
            ("llama.context_length", 512),
            ("llama.embedding_length", 64),
            ("llama.block_count", 5),
            ("llama.feed_forward_length", 172),
            ("llama.attention.head_count", 8),
            ("llama.attention.head_count_kv", 4),
            ("llama.rope.dimension_count", 8),
            ("llama.vocab_size", 512),
        ] {
            assert_eq!(meta.get_u32(key).unwrap(), value, "{key} ({dtype})");
        }
        assert_eq!(meta.get_f32("llama.rope.freq_base").unwrap(), 10_000.0);
        assert_eq!(meta.get_f32("llama.attention.layer_norm_rms_epsilon").unwrap(), 1e-5);
        assert_eq!(meta.get_str("tokenizer.ggml.model").unwrap(), "gpt2");
        assert_eq!(meta.get_str("tokenizer.ggml.pre").unwrap(), "smollm");
        assert_eq!(meta.get_str_array("tokenizer.ggml.tokens").unwrap().len(), 512);
        assert_eq!(meta.get_u32("tokenizer.ggml.bos_token_id").unwrap(), 0);
        assert_eq!(meta.get_u32("tokenizer.ggml.eos_token_id").unwrap(), 0);
        assert!(!meta.get_bool("tokenizer.ggml.add_bos_token").unwrap());

        let expected = expected_tiny_tensors();
        assert_eq!(file.tensor_count(), 2 + 9 * 5 + 1);
        assert_eq!(file.tensor_count(), expected.len());
        let mut expected_fallbacks = Vec::new();
        for (info, (name, dims, is_norm)) in file.tensor_infos().iter().zip(&expected) {
            assert_eq!(info.name(), name);
            assert_eq!(info.dims(), &dims[..], "{name}");
            let stored = if *is_norm {
                DType::F32
            } else if dtype.is_quantized() && dims[0] % 32 != 0 {
                expected_fallbacks.push((name.clone(), DType::F16));
                DType::F16
            } else if dtype.is_k_quant() && dims[0] % 256 != 0 {
                // tiny's rows (64 values) are whole Q8_0 blocks, not K-quant ones.
                expected_fallbacks.push((name.clone(), DType::Q8_0));
                DType::Q8_0
            } else {
                dtype
            };
            assert_eq!(info.ggml_type(), GgmlType::from_id(stored.ggml_id()), "{name} in a {dtype} file");
        }
        assert_eq!(summary.fallbacks, expected_fallbacks, "{dtype}");
        if dtype.is_k_quant() {
            assert_eq!(summary.fallbacks.len(), 37, "every matrix: 7 per layer, the embedding and the output");
        } else if dtype.is_quantized() {
            assert_eq!(summary.fallbacks.len(), 5, "the five ffn_down matrices");
        }
        let elements: u64 = file.tensor_infos().iter().map(|t| t.element_count()).sum();
        assert_eq!(summary.n_params, elements);
        assert_eq!(summary.n_params, SynthShape::Tiny.params().n_params());
        assert_eq!(summary.bytes, std::fs::metadata(&path).unwrap().len());
        assert_eq!(summary.path, path);
    }
}

/// Fills a tokenizer config from `tokenizer.ggml.*`, as a model loader would.
fn tokenizer_config(meta: &Metadata) -> TokenizerConfig {
    let optional_u32 = |key: &str| meta.get(key).map(|_| meta.get_u32(key).unwrap());
    let optional_bool = |key: &str| meta.get(key).map(|_| meta.get_bool(key).unwrap());
    TokenizerConfig {
        model: meta.get_str("tokenizer.ggml.model").unwrap().to_owned(),
        pre: Some(meta.get_str("tokenizer.ggml.pre").unwrap().to_owned()),
        tokens: meta.get_str_array("tokenizer.ggml.tokens").unwrap().to_vec(),
        scores: None,
        token_types: Some(meta.get_i32_array("tokenizer.ggml.token_type").unwrap().into_owned()),
        merges: Some(meta.get_str_array("tokenizer.ggml.merges").unwrap().to_vec()),
        bos_id: optional_u32("tokenizer.ggml.bos_token_id"),
        eos_id: optional_u32("tokenizer.ggml.eos_token_id"),
        unk_id: optional_u32("tokenizer.ggml.unknown_token_id"),
        pad_id: optional_u32("tokenizer.ggml.padding_token_id"),
        add_bos: optional_bool("tokenizer.ggml.add_bos_token"),
        add_eos: optional_bool("tokenizer.ggml.add_eos_token"),
        add_space_prefix: optional_bool("tokenizer.ggml.add_space_prefix"),
    }
}

#[test]
fn tokenizer_metadata_builds_a_tokenizer_that_round_trips() {
    let dir = TempDir::new("synth-tokenizer");
    let (_, file) = write(&tiny(DType::Q8_0, 3), &dir.file("tiny.gguf"));
    let config = tokenizer_config(file.metadata());
    assert_eq!(config, baton_tokenizer::synthetic_bpe(512));
    let tokenizer = Tokenizer::from_config(&config).expect("tokenizer from GGUF metadata");
    let text = "The robot checked the garden after the storm, then wrote 40 notes.";
    let ids = tokenizer.encode(text, EncodeOptions { add_special: true, parse_special: false }).unwrap();
    assert!(ids.len() < text.len(), "merges apply: {} ids for {} bytes", ids.len(), text.len());
    assert!(ids.iter().all(|&id| (id as usize) < 512));
    assert_eq!(tokenizer.decode(&ids).unwrap(), text);
}

#[test]
fn same_seed_gives_identical_bytes_and_another_seed_differs() {
    let dir = TempDir::new("synth-determinism");
    for dtype in [DType::F32, DType::Q4_1] {
        let a = dir.file("a.gguf");
        let b = dir.file("b.gguf");
        let c = dir.file("c.gguf");
        write_synth_model(&tiny(dtype, 11), &a).unwrap();
        write_synth_model(&tiny(dtype, 11), &b).unwrap();
        write_synth_model(&tiny(dtype, 12), &c).unwrap();
        let (a, b, c) = (std::fs::read(a).unwrap(), std::fs::read(b).unwrap(), std::fs::read(c).unwrap());
        assert!(a == b, "seed 11 twice gave different {dtype} files");
        assert_eq!(a.len(), c.len());
        let file_a = GgufFile::from_bytes(a).unwrap();
        let file_c = GgufFile::from_bytes(c).unwrap();
        for (ta, tc) in file_a.tensors().zip(file_c.tensors()) {
            assert_ne!(ta.data(), tc.data(), "{} equal across seeds", ta.name());
        }
    }
}

fn dequantize(tensor: &baton_gguf::Tensor<'_>) -> Vec<f32> {
    let dtype = DType::from_ggml_id(tensor.ggml_type().id()).expect("a Baton dtype");
    let row = tensor.dims()[0] as usize;
    let row_bytes = dtype.row_bytes(row).expect("whole blocks");
    let mut values = vec![0.0; tensor.info().element_count() as usize];
    for (bytes, out) in tensor.data().chunks_exact(row_bytes).zip(values.chunks_exact_mut(row)) {
        dequantize_row(dtype, bytes, out).unwrap();
    }
    values
}

fn mean_std(values: &[f32]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
    let var = values.iter().map(|&x| (f64::from(x) - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt())
}

#[test]
fn dequantized_weights_are_finite_with_plausible_std() {
    let dir = TempDir::new("synth-weights");
    for dtype in SynthSpec::SUPPORTED_DTYPES {
        let (_, file) = write(&tiny(dtype, 5), &dir.file(&format!("{dtype}.gguf")));
        for tensor in file.tensors() {
            let name = tensor.name();
            let values = dequantize(&tensor);
            assert!(values.iter().all(|x| x.is_finite()), "{name} ({dtype})");
            let (mean, std) = mean_std(&values);
            if name.ends_with("norm.weight") {
                assert!((mean - 1.0).abs() < 0.05, "{name} mean {mean}");
                assert!((std - 0.1).abs() < 0.03, "{name} std {std}");
            } else {
                let want = 1.0 / (tensor.dims()[0] as f64).sqrt();
                assert!(mean.abs() < 0.1 * want, "{name} ({dtype}) mean {mean}");
                assert!((std / want - 1.0).abs() < 0.1, "{name} ({dtype}) std {std}, expected about {want}");
            }
        }
    }
}

#[test]
fn unsupported_dtypes_are_rejected_before_writing() {
    let dir = TempDir::new("synth-unsupported");
    for dtype in [DType::Q8_K, DType::I32] {
        let path = dir.file("never.gguf");
        match write_synth_model(&tiny(dtype, 0), &path) {
            Err(SynthError::UnsupportedDType { dtype: found }) => assert_eq!(found, dtype),
            other => panic!("expected UnsupportedDType for {dtype}, got {other:?}"),
        }
        assert!(!path.exists());
    }
}

#[test]
fn unwritable_path_reports_the_path() {
    let dir = TempDir::new("synth-unwritable");
    let path = dir.file("missing-dir/model.gguf");
    match write_synth_model(&tiny(DType::F32, 0), &path) {
        Err(SynthError::Write { path: found, .. }) => assert_eq!(found, path),
        other => panic!("expected a write error, got {other:?}"),
    }
}

#[test]
fn shapes_parse_by_name_and_match_their_reference_models() {
    assert_eq!(SynthShape::from_name("tiny"), Some(SynthShape::Tiny));
    assert_eq!(SynthShape::from_name("stories15m"), Some(SynthShape::Stories15M));
    assert_eq!(SynthShape::from_name("Stories15M"), Some(SynthShape::Stories15M));
    assert_eq!(SynthShape::from_name("SMOL135M"), Some(SynthShape::Smol135M));
    assert_eq!(SynthShape::from_name("llama7b"), None);
    for shape in SynthShape::ALL {
        assert_eq!(SynthShape::from_name(shape.name()), Some(shape));
        let p = shape.params();
        assert_eq!(p.dim % p.n_heads, 0, "{shape}");
        assert_eq!(p.n_heads % p.n_kv_heads, 0, "{shape}");
    }
    let smol = SynthShape::Smol135M.params();
    assert_eq!(smol.tensor_count(), 272, "as in SmolLM2-135M's GGUF");
    assert_eq!(smol.head_dim(), 64);
    assert_eq!(smol.n_params(), 134_515_008, "SmolLM2-135M's weight count");
    assert_eq!(SynthShape::Stories15M.params().tensor_count(), 57);
    assert_eq!(SynthShape::Tiny.params().tensor_count(), 48);
    let stories = SynthShape::Stories110M.params();
    assert_eq!(stories.n_params(), 109_529_856, "llama2.c's stories110M (tied output)");
    assert_eq!(stories.tensor_count(), 110);
    assert_eq!(SynthShape::from_name("stories110m"), Some(SynthShape::Stories110M));
    // Llama 3.2 1B and 3B (tied) and Llama 3.1 8B: their published
    // weight counts, 292 tensors for 32 layers untied (9 per layer + 3).
    let counts = [(SynthShape::Llama1B, 1_235_814_400), (SynthShape::Llama3B, 3_212_749_824)];
    for (shape, n) in counts.into_iter().chain([(SynthShape::Llama8B, 8_030_261_248)]) {
        assert_eq!(shape.params().n_params(), n, "{shape}");
        assert_eq!(shape.params().vocab, 128_256, "{shape}");
    }
    assert_eq!(SynthShape::Llama8B.params().tensor_count(), 291);
    assert_eq!(SynthShape::from_name("LLAMA8b"), Some(SynthShape::Llama8B));
    // Qwen3-30B-A3B's layers: 12 tensors each (579 in its 48-layer GGUF),
    // 623.1M weights a layer, 30.5B for all 48 with the untied embedding.
    let a3b = SynthShape::Qwen3MoeA3b8L.params();
    assert_eq!(a3b.tensor_count(), 8 * 12 + 3);
    let per_layer = (a3b.n_params() - 2 * 151_936 * 2048 - 2048) / 8;
    assert_eq!(per_layer, 623_120_640);
    assert_eq!(48 * per_layer + 2 * 151_936 * 2048 + 2048, 30_532_122_624, "Qwen3-30B-A3B's weight count");
    // gpt-oss-20b's layers: 19 tensors each (459 in its 24-layer GGUF),
    // 20.9B weights for all 24.
    let oss = SynthShape::GptOss20b8L.params();
    assert_eq!(oss.tensor_count(), 8 * 19 + 3);
    let oss_layer = (oss.n_params() - 2 * 201_088 * 2880 - 2880) / 8;
    let all = 24 * oss_layer + 2 * 201_088 * 2880 + 2880;
    assert!((20.85e9..20.95e9).contains(&(all as f64)), "gpt-oss-20b's weight count: {all}");
    // Qwen3.6-35B-A3B's layers: 19 tensors a recurrent layer (norm, 9 of
    // Gated DeltaNet, FFN norm, router and 3 expert stacks, 4 of the shared
    // expert), 16 an attending one; 6 and 2 of them in 8 layers, and the
    // multi-token-prediction block (an attending one and its 4 nextn).
    let hybrid = SynthShape::Qwen35MoeA3b8L.params();
    assert_eq!(hybrid.tensor_count(), 6 * 19 + 2 * 16 + 20 + 3);
    let tiny256 = SynthShape::Tiny256.params();
    assert_eq!((tiny256.tensor_count(), tiny256.n_params()), (21, 1_443_072));
    for shape in
        [SynthShape::Tiny256, SynthShape::Stories110M, SynthShape::Llama1B, SynthShape::Llama3B, SynthShape::Llama8B]
    {
        let p = shape.params();
        // Row lengths (input widths) of every matrix: the embedding, Q/K/V,
        // gate and up read `dim`; the attention output reads the heads; down reads the FFN.
        for width in [p.dim, p.ffn, p.n_heads * p.head_dim()] {
            assert_eq!(width % 256, 0, "{shape}: every row a whole K-quant super-block");
        }
    }
}

/// Every Baton type has the size the GGUF reader's table gives its ggml id,
/// so files of any type Baton writes or reads agree on tensor sizes.
#[test]
fn every_dtype_has_the_gguf_table_size() {
    for dtype in DType::ALL {
        let ggml = GgmlType::from_id(dtype.ggml_id());
        assert_eq!(ggml.block_elems(), Some(dtype.block_elems() as u64), "{dtype}");
        assert_eq!(ggml.block_bytes(), Some(dtype.block_bytes() as u64), "{dtype}");
        assert!(ggml.name().is_some_and(|n| n.eq_ignore_ascii_case(dtype.name())), "{dtype} is {ggml}");
    }
}

#[test]
fn tiny256_k_quant_files_hold_every_matrix_in_the_k_quant() {
    let dir = TempDir::new("synth-tiny256");
    for dtype in SynthSpec::SUPPORTED_DTYPES.into_iter().filter(|t| t.is_k_quant()) {
        let spec = SynthSpec { shape: SynthShape::Tiny256, dtype, seed: 4 };
        let (summary, file) = write(&spec, &dir.file(&format!("tiny256-{dtype}.gguf")));
        assert!(summary.fallbacks.is_empty(), "{dtype}: {:?}", summary.fallbacks);
        for tensor in file.tensors() {
            let expected = if tensor.name().ends_with("norm.weight") { DType::F32 } else { dtype };
            assert_eq!(tensor.ggml_type(), GgmlType::from_id(expected.ggml_id()), "{}", tensor.name());
            let values = dequantize(&tensor);
            let (mean, std) = mean_std(&values);
            if !tensor.name().ends_with("norm.weight") {
                let want = 1.0 / (tensor.dims()[0] as f64).sqrt();
                assert!(mean.abs() < 0.1 * want, "{} ({dtype}) mean {mean}", tensor.name());
                assert!((std / want - 1.0).abs() < 0.1, "{} ({dtype}) std {std}, expected {want}", tensor.name());
            }
        }
    }
}

#[test]
fn stories15m_quantizes_every_matrix_without_fallback() {
    let dir = TempDir::new("synth-stories");
    let spec = SynthSpec { shape: SynthShape::Stories15M, dtype: DType::Q4_0, seed: 9 };
    let (summary, file) = write(&spec, &dir.file("stories15M-q4_0.gguf"));
    assert!(summary.fallbacks.is_empty(), "{:?}", summary.fallbacks);
    assert_eq!(file.tensor_count(), 57);
    let output = file.tensor("output.weight").expect("untied output");
    assert_eq!(output.dims(), &[288, 32_000]);
    assert_eq!(output.ggml_type(), GgmlType::Q4_0);
    assert_eq!(file.metadata().get_str_array("tokenizer.ggml.tokens").unwrap().len(), 32_000);
}
