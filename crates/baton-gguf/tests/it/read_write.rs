//! Reading each value type and tensor type, and the writer's output format
//! and validation.

use baton_gguf::{Array, GgmlType, GgufFile, GgufWriter, MetadataError, ReadError, ShapeError, Value, WriteError};
use baton_testkit::TempDir;

use crate::support;
use crate::support::Raw;

fn single_kv(tag: u32, value: &[u8]) -> Vec<u8> {
    let mut raw = Raw::header(3, 0, 1);
    raw.kv_raw("k", tag, value);
    raw.build()
}

#[test]
fn each_value_type_decodes_from_hand_built_bytes() {
    let nested = {
        let mut r = Raw::default();
        r.u32(9).u64(2); // array of 2 arrays
        r.u32(5).u64(1).u32((-7i32) as u32); // [i32: -7]
        r.u32(8).u64(1).string(b"x"); // [string: "x"]
        r.build()
    };
    let cases: Vec<(u32, Vec<u8>, Value)> = vec![
        (0, vec![0xfe], Value::U8(0xfe)),
        (1, vec![0xfe], Value::I8(-2)),
        (2, 0xfedcu16.to_le_bytes().to_vec(), Value::U16(0xfedc)),
        (3, (-300i16).to_le_bytes().to_vec(), Value::I16(-300)),
        (4, 0xdead_beefu32.to_le_bytes().to_vec(), Value::U32(0xdead_beef)),
        (5, (-5i32).to_le_bytes().to_vec(), Value::I32(-5)),
        (6, 1.5f32.to_le_bytes().to_vec(), Value::F32(1.5)),
        (7, vec![1], Value::Bool(true)),
        (7, vec![0], Value::Bool(false)),
        (8, [&3u64.to_le_bytes()[..], b"abc"].concat(), "abc".into()),
        (10, u64::MAX.to_le_bytes().to_vec(), Value::U64(u64::MAX)),
        (11, i64::MIN.to_le_bytes().to_vec(), Value::I64(i64::MIN)),
        (12, 0.1f64.to_le_bytes().to_vec(), Value::F64(0.1)),
        (9, nested, Value::Array(Array::Array(vec![Array::I32(vec![-7]), Array::String(vec!["x".into()])]))),
        (9, [&7u32.to_le_bytes()[..], &2u64.to_le_bytes(), &[1, 0]].concat(), vec![true, false].into()),
    ];
    for (tag, bytes, expected) in cases {
        let file = GgufFile::from_bytes(single_kv(tag, &bytes)).unwrap_or_else(|e| panic!("type {tag}: {e}"));
        assert_eq!(file.metadata().get("k"), Some(&expected), "type {tag}");
        // The writer encodes the value to exactly the same bytes.
        let mut writer = GgufWriter::new();
        writer.add_metadata("k", expected.clone()).expect("valid pair");
        let mut out = Vec::new();
        writer.write_to(&mut out).expect("write to Vec");
        let expected_len = 24 + 8 + 1 + 4 + bytes.len();
        assert_eq!(&out[..expected_len], &single_kv(tag, &bytes)[..], "type {tag} encoding");
        assert!(out[expected_len..].iter().all(|&b| b == 0), "only padding follows");
        assert_eq!(out.len() % 32, 0, "padded to the alignment");
    }
}

#[test]
fn version_2_files_are_read() {
    let mut raw = Raw::header(2, 1, 1);
    raw.kv_u32("general.alignment", 8).tensor_info("w", &[2], 0, 0).pad(8).bytes(&support::f32_bytes(&[1.0, 2.0]));
    let file = GgufFile::from_bytes(raw.build()).expect("valid v2 file");
    assert_eq!(file.version(), 2);
    assert_eq!(file.alignment(), 8);
    assert_eq!(file.data_offset() % 8, 0);
    let tensor = file.tensor("w").expect("tensor w");
    assert_eq!(tensor.data(), &support::f32_bytes(&[1.0, 2.0])[..]);
}

#[test]
fn a_file_without_tensors_needs_no_data_section() {
    let bytes = Raw::header(3, 0, 1).kv_u32("a", 1).build();
    let file = GgufFile::from_slice(&bytes).expect("metadata-only file");
    assert_eq!(file.metadata().get_u32("a"), Ok(1));
    assert_eq!(file.tensor_count(), 0);
}

#[test]
fn sample_file_reads_back_metadata_and_tensors_in_order() {
    let bytes = support::sample_file();
    let file = GgufFile::from_slice(&bytes).expect("sample file is valid");
    assert_eq!(file.version(), 3);
    assert_eq!(file.alignment(), 32);
    let expected = support::sample_metadata();
    let read: Vec<(&str, &Value)> = file.metadata().iter().collect();
    assert_eq!(read.len(), expected.len());
    for ((key, value), (want_key, want_value)) in read.iter().zip(&expected) {
        assert_eq!((*key, *value), (*want_key, want_value));
    }
    let md = file.metadata();
    assert_eq!(md.get_str("general.architecture"), Ok("llama"));
    assert_eq!(md.get_u32("t.u16"), Ok(60000));
    assert_eq!(md.get_i64("t.i8"), Ok(-100));
    assert_eq!(md.get_str_array("t.strings").map(|s| s.to_vec()), Ok(vec!["<s>".into(), "é".into(), String::new()]));
    assert_eq!(md.get_f32_array("t.scores").as_deref(), Ok(&[0.5f32, -1.5][..]));
    assert_eq!(
        md.get_u32("t.i32"),
        Err(MetadataError::OutOfRange { key: "t.i32".into(), expected: "u32", value: -2_000_000_000 })
    );

    let want = support::sample_tensors();
    assert_eq!(file.tensors().len(), want.len());
    for (tensor, (name, dims, ty, data)) in file.tensors().zip(&want) {
        assert_eq!(tensor.name(), *name);
        assert_eq!(tensor.dims(), &dims[..]);
        assert_eq!(tensor.ggml_type(), *ty);
        assert_eq!(tensor.data(), &data[..]);
        assert_eq!(tensor.info().file_offset() % 32, 0, "{name} aligned");
        assert_eq!(tensor.info().file_offset(), file.data_offset() + tensor.info().data_offset());
        assert_eq!(file.tensor(name).map(|t| t.data().as_ptr()), Some(tensor.data().as_ptr()));
    }
    assert_eq!(file.tensor_infos()[0].element_count(), 6);
    assert!(file.tensor("absent").is_none());
}

#[test]
fn open_memory_maps_and_writer_writes_to_path() {
    let dir = TempDir::new("gguf-test");
    let path = dir.file("sample.gguf");
    let data = support::f32_bytes(&[1.0; 8]);
    let mut writer = GgufWriter::new();
    writer.set_alignment(64).expect("64 is a power of two");
    writer.add_metadata("name", "x").expect("valid");
    writer.add_tensor("a", &[8], GgmlType::F32, &data).expect("valid");
    writer.add_tensor_from_reader("b", &[8], GgmlType::F32, &data[..]).expect("valid");
    let written = writer.write_to_path(&path).expect("write file");
    assert_eq!(written, std::fs::metadata(&path).expect("stat").len());

    let file = GgufFile::open(&path).expect("open written file");
    assert!(file.is_memory_mapped());
    assert_eq!(file.alignment(), 64);
    assert_eq!(file.tensor("b").map(|t| t.data()), Some(&data[..]));
    assert_eq!(file.tensor("b").map(|t| t.info().file_offset() % 64), Some(0));
}

#[test]
fn open_reports_missing_files_with_their_path() {
    let err = GgufFile::open("/nonexistent/model.gguf").expect_err("missing file");
    assert!(matches!(err, ReadError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("/nonexistent/model.gguf"), "{err}");
    assert_eq!(err.offset(), None);
}

#[test]
fn writer_rejects_invalid_input() {
    let data = [0u8; 16];
    let mut w = GgufWriter::new();
    w.add_metadata("k", 1u32).expect("first key");
    assert!(matches!(w.add_metadata("k", 2u32), Err(WriteError::DuplicateKey { key }) if key == "k"));
    assert!(matches!(w.add_metadata("general.alignment", 3u32), Err(WriteError::BadAlignment { .. })));
    assert!(matches!(w.add_metadata("general.alignment", 32i32), Err(WriteError::BadAlignment { .. })));
    let mut deep = Array::U8(vec![]);
    for _ in 0..8 {
        deep = Array::Array(vec![deep]);
    }
    assert!(matches!(w.add_metadata("deep", deep), Err(WriteError::NestingTooDeep { depth: 9, .. })));

    w.add_tensor("t", &[4], GgmlType::F32, &data).expect("16 bytes for 4 f32");
    let long = "n".repeat(64);
    assert!(matches!(
        w.add_tensor(long, &[4], GgmlType::F32, &data),
        Err(WriteError::TensorNameTooLong { max_bytes: 63, .. })
    ));
    assert!(matches!(w.add_tensor("t", &[4], GgmlType::F32, &data), Err(WriteError::DuplicateTensor { .. })));
    assert!(matches!(
        w.add_tensor("u", &[2], GgmlType::F32, &data),
        Err(WriteError::TensorSizeMismatch { expected: 8, found: 16, .. })
    ));
    assert!(matches!(
        w.add_tensor("u", &[4], GgmlType::from_id(99), &data),
        Err(WriteError::Shape { source: ShapeError::UnknownType(99), .. })
    ));
    assert!(matches!(
        w.add_tensor("u", &[], GgmlType::F32, &data),
        Err(WriteError::Shape { source: ShapeError::BadDimCount(0), .. })
    ));
    assert!(matches!(
        w.add_tensor("u", &[16], GgmlType::Q8_0, &data),
        Err(WriteError::Shape { source: ShapeError::NotBlockAligned { .. }, .. })
    ));
}

#[test]
fn writer_rejects_reader_sources_of_the_wrong_length() {
    for (len, found) in [(15usize, 15u64), (17, 17)] {
        let data = vec![0u8; len];
        let mut w = GgufWriter::new();
        w.add_tensor_from_reader("t", &[4], GgmlType::F32, &data[..]).expect("shape valid");
        let err = w.write_to(Vec::new()).expect_err("wrong length");
        assert!(
            matches!(err, WriteError::TensorSizeMismatch { expected: 16, found: f, .. } if f == found.min(16) || f == 17),
            "{err:?}"
        );
    }
}
