//! Cross-check with the independent Python `gguf` package (feature
//! `reference-tests`): a file written here must read the same there.
//!
//! Needs `BATON_PYTHON`: the interpreter `bash scripts/setup-python.sh` prints.
#![cfg(feature = "reference-tests")]

use std::process::Command;

use baton_gguf::{Array, GgmlType, GgufFile, GgufWriter, Value};
use baton_testkit::env::{python, reference_script};
use baton_testkit::TempDir;

use crate::support;
use crate::support::json::Json;

/// gguf-py's name of a value type.
fn py_type_name(ty: baton_gguf::ValueType) -> &'static str {
    use baton_gguf::ValueType as T;
    match ty {
        T::U8 => "UINT8",
        T::I8 => "INT8",
        T::U16 => "UINT16",
        T::I16 => "INT16",
        T::U32 => "UINT32",
        T::I32 => "INT32",
        T::F32 => "FLOAT32",
        T::Bool => "BOOL",
        T::String => "STRING",
        T::Array => "ARRAY",
        T::U64 => "UINT64",
        T::I64 => "INT64",
        T::F64 => "FLOAT64",
    }
}

fn assert_value_matches(key: &str, ours: &Value, theirs: &Json) {
    let close = |a: f64, b: f64| a == b || (a - b).abs() <= 1e-6 * a.abs().max(b.abs());
    match ours {
        Value::String(s) => assert_eq!(theirs.str(), s, "{key}"),
        Value::Bool(b) => assert_eq!(theirs, &Json::Bool(*b), "{key}"),
        Value::F32(_) | Value::F64(_) => {
            let want = ours.as_float().expect("float");
            assert!(close(theirs.float(), want), "{key}: {theirs:?} vs {want}");
        }
        Value::Array(Array::String(v)) => {
            let got: Vec<&str> = theirs.items().iter().map(Json::str).collect();
            assert_eq!(got, *v, "{key}");
        }
        Value::Array(Array::F32(v)) => {
            assert_eq!(theirs.items().len(), v.len(), "{key}");
            for (t, &o) in theirs.items().iter().zip(v) {
                assert!(close(t.float(), o.into()), "{key}: {t:?} vs {o}");
            }
        }
        Value::Array(Array::Array(_)) => assert_eq!(theirs, &Json::Null, "{key}"),
        Value::Array(a) => {
            let want = a.integers().expect("integer array in this test");
            let got: Vec<i128> = theirs.items().iter().map(Json::int).collect();
            assert_eq!(got, want, "{key}");
        }
        scalar => {
            let want = scalar.as_integer().expect("integer scalar");
            assert_eq!(theirs.int(), want, "{key}");
        }
    }
}

#[test]
fn python_gguf_reads_what_the_writer_wrote() {
    let python = python();
    let f32_values: Vec<f32> = (0..12).map(|i| i as f32 * 0.5 - 2.0).collect();
    let f32_data = support::f32_bytes(&f32_values);
    let f16_values = [1.0f32, -2.0, 0.5, 0.25, 3.0, -0.125, 8.0, 0.0];
    let f16_data: Vec<u8> = f16_values.iter().flat_map(|&v| support::f16_bits(v).to_le_bytes()).collect();
    let q8_data: Vec<u8> = (0..68u8).collect();
    // Blocks of 32 (Q5, MXFP4) and K-quant super-blocks of 256 (Q2_K..Q8_K): arbitrary bytes of
    // the right size.
    let block_data = |ty: GgmlType, dims: [u64; 2]| -> Vec<u8> {
        let blocks = dims[0] / ty.block_elems().expect("known type") * dims[1];
        let bytes = ty.block_bytes().expect("known type") * blocks;
        (0..bytes).map(|i| (i * 7 % 251) as u8).collect()
    };
    let block_tensors = [
        ("blk.0.attn_q.weight", GgmlType::Q5_0, [64u64, 3]),
        ("blk.0.attn_k.weight", GgmlType::Q5_1, [32, 2]),
        ("blk.1.ffn_up.weight", GgmlType::Q2_K, [256, 2]),
        ("blk.1.attn_output.weight", GgmlType::Q3_K, [512, 1]),
        ("blk.0.ffn_down.weight", GgmlType::Q4_K, [256, 2]),
        ("blk.0.ffn_gate.weight", GgmlType::Q5_K, [512, 1]),
        ("blk.0.attn_v.weight", GgmlType::Q6_K, [256, 3]),
        ("t.q8_k", GgmlType::Q8_K, [256, 1]),
        ("blk.0.ffn_up_exps.weight", GgmlType::MXFP4, [64, 3]),
    ];
    let block_data: Vec<Vec<u8>> = block_tensors.iter().map(|(_, ty, dims)| block_data(*ty, *dims)).collect();

    let mut writer = GgufWriter::new();
    let metadata: Vec<(&str, Value)> = vec![
        ("general.architecture", "llama".into()),
        ("general.name", "tiny é ✓".into()),
        ("llama.block_count", Value::U32(2)),
        ("llama.context_length", Value::U64(1 << 40)),
        ("t.i32", Value::I32(-7)),
        ("t.u8", Value::U8(255)),
        ("t.i8", Value::I8(-128)),
        ("t.u16", Value::U16(65535)),
        ("t.i16", Value::I16(-32768)),
        ("t.i64", Value::I64(i64::MIN)),
        ("t.u64", Value::U64(u64::MAX)),
        ("t.f32", Value::F32(1e-5)),
        ("t.f64", Value::F64(-2.5e100)),
        ("t.bool", Value::Bool(true)),
        ("tokenizer.ggml.tokens", vec!["<s>", "</s>", "a b", "\"q\"", "é"].into()),
        ("tokenizer.ggml.scores", vec![0.0f32, -1.5, 2.25].into()),
        ("tokenizer.ggml.token_type", vec![1i32, 3, -1].into()),
        ("t.u64s", vec![0u64, u64::MAX].into()),
        ("t.nested", Value::Array(Array::Array(vec![Array::U8(vec![1])]))),
    ];
    for (key, value) in &metadata {
        writer.add_metadata(*key, value.clone()).expect("valid metadata");
    }
    writer.add_tensor("token_embd.weight", &[4, 3], GgmlType::F32, &f32_data).expect("f32");
    writer.add_tensor("blk.0.attn_norm.weight", &[8], GgmlType::F16, &f16_data).expect("f16");
    writer.add_tensor("blk.0.ffn_up.weight", &[32, 2], GgmlType::Q8_0, &q8_data).expect("q8_0");
    for ((name, ty, dims), data) in block_tensors.iter().zip(&block_data) {
        writer.add_tensor(*name, dims, *ty, data).expect("block tensor");
    }

    let dir = TempDir::new("gguf-ref");
    let path = dir.file("reference.gguf");
    writer.write_to_path(&path).expect("write file");
    let ours = GgufFile::open(&path).expect("our reader reads our file");

    let script = reference_script("gguf_check.py");
    let output = Command::new(&python)
        .arg(&script)
        .arg(&path)
        .output()
        .unwrap_or_else(|e| panic!("running {python} {script:?}: {e}"));
    assert!(output.status.success(), "gguf_check.py failed: {}", String::from_utf8_lossy(&output.stderr));
    let summary = Json::parse(&String::from_utf8_lossy(&output.stdout));

    assert_eq!(summary.get("version").int(), 3);
    assert_eq!(summary.get("alignment").int(), 32);
    let theirs = summary.get("metadata").items();
    assert_eq!(theirs.len(), metadata.len(), "metadata count");
    for ((key, value), entry) in metadata.iter().zip(theirs) {
        assert_eq!(entry.get("key").str(), *key);
        assert_eq!(entry.get("type").str(), py_type_name(value.value_type()), "{key}");
        if let Value::Array(a) = value {
            assert_eq!(entry.get("element_type").str(), py_type_name(a.element_type()), "{key}");
        }
        assert_value_matches(key, value, entry.get("value"));
    }

    let tensors = summary.get("tensors").items();
    assert_eq!(tensors.len(), ours.tensor_count());
    for (tensor, entry) in ours.tensors().zip(tensors) {
        let name = tensor.name();
        assert_eq!(entry.get("name").str(), name);
        let shape: Vec<i128> = entry.get("shape").items().iter().map(Json::int).collect();
        let dims: Vec<i128> = tensor.dims().iter().map(|&d| d.into()).collect();
        assert_eq!(shape, dims, "{name} shape (ggml order)");
        assert_eq!(Some(entry.get("type").str()), tensor.ggml_type().name(), "{name}");
        assert_eq!(entry.get("type_id").int(), tensor.ggml_type().id().into(), "{name}");
        assert_eq!(entry.get("n_bytes").int(), tensor.data().len() as i128, "{name}");
        assert_eq!(entry.get("data_offset").int(), tensor.info().file_offset().into(), "{name}");
    }
    let checksum = |name: &str| {
        let entry = tensors.iter().find(|t| t.get("name").str() == name).expect("tensor listed");
        entry.get("checksum").float()
    };
    let f32_sum: f64 = f32_values.iter().map(|&v| f64::from(v)).sum();
    let f16_sum: f64 = f16_values.iter().map(|&v| f64::from(v)).sum();
    assert!((checksum("token_embd.weight") - f32_sum).abs() < 1e-9, "f32 checksum");
    assert!((checksum("blk.0.attn_norm.weight") - f16_sum).abs() < 1e-9, "f16 checksum");
    assert_eq!(tensors.iter().find(|t| t.get("type").str() == "Q8_0").map(|t| t.get("checksum")), Some(&Json::Null));
}
