//! Reads the real default model (feature `model-tests`): SmolLM2-135M-Instruct
//! Q4_1, fetched by `scripts/fetch-smollm2.sh`.
#![cfg(feature = "model-tests")]

use std::path::PathBuf;

use baton_gguf::{GgmlType, GgufFile};

fn model_path() -> PathBuf {
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
    PathBuf::from(home).join(".cache/baton/models/SmolLM2-135M-Instruct.Q4_1.gguf")
}

#[test]
fn smollm2_q4_1_reads_and_validates() {
    let path = model_path();
    assert!(path.exists(), "{} is missing: run scripts/fetch-smollm2.sh first", path.display());
    let file = GgufFile::open(&path).unwrap_or_else(|e| panic!("{e}"));
    let md = file.metadata();
    assert_eq!(md.get_str("general.architecture"), Ok("llama"));
    let tokens = md.get_str_array("tokenizer.ggml.tokens").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(tokens.len(), 49152, "vocabulary size");
    let block_count = md.get_u32("llama.block_count").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(block_count, 30);
    let n = file.tensor_count();
    assert!((270..=280).contains(&n), "{n} tensors, expected about 272");
    assert!(file.tensors().any(|t| t.ggml_type() == GgmlType::Q4_1), "some Q4_1 tensors");
    let embd = file.tensor("token_embd.weight").expect("token_embd.weight present");
    assert_eq!(embd.dims().last(), Some(&49152), "embedding rows = vocab");
    let total: u64 = file.tensor_infos().iter().map(|t| t.size_bytes()).sum();
    assert!(total > 50_000_000 && total < file.as_bytes().len() as u64, "{total} tensor bytes");
}
