//! Property tests: whatever the writer accepts, the reader gives back
//! unchanged; arbitrary bytes never panic the reader.

use std::collections::BTreeMap;

use baton_gguf::{Array, GgmlType, GgufFile, GgufWriter, Value, KNOWN_TYPES};
use proptest::prelude::*;

/// Finite floats (NaN would not compare equal to itself).
fn f32s() -> impl Strategy<Value = f32> {
    prop::num::f32::NORMAL | prop::num::f32::ZERO | prop::num::f32::SUBNORMAL
}

fn f64s() -> impl Strategy<Value = f64> {
    prop::num::f64::NORMAL | prop::num::f64::ZERO | prop::num::f64::INFINITE
}

fn flat_array() -> impl Strategy<Value = Array> {
    const N: usize = 6;
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..N).prop_map(Array::U8),
        prop::collection::vec(any::<i8>(), 0..N).prop_map(Array::I8),
        prop::collection::vec(any::<u16>(), 0..N).prop_map(Array::U16),
        prop::collection::vec(any::<i16>(), 0..N).prop_map(Array::I16),
        prop::collection::vec(any::<u32>(), 0..N).prop_map(Array::U32),
        prop::collection::vec(any::<i32>(), 0..N).prop_map(Array::I32),
        prop::collection::vec(f32s(), 0..N).prop_map(Array::F32),
        prop::collection::vec(any::<bool>(), 0..N).prop_map(Array::Bool),
        prop::collection::vec(".{0,8}", 0..N).prop_map(Array::String),
        prop::collection::vec(any::<u64>(), 0..N).prop_map(Array::U64),
        prop::collection::vec(any::<i64>(), 0..N).prop_map(Array::I64),
        prop::collection::vec(f64s(), 0..N).prop_map(Array::F64),
    ]
}

fn array() -> impl Strategy<Value = Array> {
    flat_array().prop_recursive(3, 24, 4, |inner| prop::collection::vec(inner, 0..4).prop_map(Array::Array))
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<u8>().prop_map(Value::U8),
        any::<i8>().prop_map(Value::I8),
        any::<u16>().prop_map(Value::U16),
        any::<i16>().prop_map(Value::I16),
        any::<u32>().prop_map(Value::U32),
        any::<i32>().prop_map(Value::I32),
        f32s().prop_map(Value::F32),
        any::<bool>().prop_map(Value::Bool),
        ".{0,16}".prop_map(Value::String),
        array().prop_map(Value::Array),
        any::<u64>().prop_map(Value::U64),
        any::<i64>().prop_map(Value::I64),
        f64s().prop_map(Value::F64),
    ]
}

/// A tensor: a known type, 1-4 small dims with dim 0 a whole number of blocks,
/// and random bytes of exactly the implied size.
fn tensor() -> impl Strategy<Value = (Vec<u64>, GgmlType, Vec<u8>)> {
    (0..KNOWN_TYPES.len(), prop::collection::vec(0u64..4, 1..=4)).prop_flat_map(|(t, mut dims)| {
        let layout = KNOWN_TYPES[t];
        dims[0] *= layout.block_elems;
        let ty = GgmlType::from_id(layout.id);
        let bytes = ty.tensor_bytes(&dims).expect("generated shapes are valid") as usize;
        (Just(dims), Just(ty), prop::collection::vec(any::<u8>(), bytes))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn written_files_read_back_equal(
        metadata in prop::collection::btree_map("[a-z.]{1,12}", value(), 0..8),
        tensors in prop::collection::btree_map("[a-z_.0-9]{1,10}", tensor(), 0..5),
        alignment_log2 in prop::option::of(0u32..8),
    ) {
        let metadata: BTreeMap<String, Value> = metadata
            .into_iter()
            .filter(|(k, _)| k != "general.alignment")
            .collect();
        let mut writer = GgufWriter::new();
        if let Some(log2) = alignment_log2 {
            writer.set_alignment(1 << log2).expect("power of two");
        }
        for (key, value) in &metadata {
            writer.add_metadata(key.clone(), value.clone()).expect("unique keys");
        }
        for (name, (dims, ty, data)) in &tensors {
            writer.add_tensor(name.clone(), dims, *ty, data).expect("valid tensor");
        }
        let mut bytes = Vec::new();
        let written = writer.write_to(&mut bytes).expect("write to Vec");
        prop_assert_eq!(written, bytes.len() as u64);

        let file = GgufFile::from_bytes(bytes).expect("written file must read back");
        let alignment = 1u64 << alignment_log2.unwrap_or(5);
        prop_assert_eq!(file.alignment(), alignment);
        let read: Vec<(&str, &Value)> = file
            .metadata()
            .iter()
            .filter(|(k, _)| *k != "general.alignment")
            .collect();
        let want: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
        prop_assert_eq!(read, want);

        prop_assert_eq!(file.tensor_count(), tensors.len());
        for (tensor, (name, (dims, ty, data))) in file.tensors().zip(&tensors) {
            prop_assert_eq!(tensor.name(), name.as_str());
            prop_assert_eq!(tensor.dims(), &dims[..]);
            prop_assert_eq!(tensor.ggml_type(), *ty);
            prop_assert_eq!(tensor.data(), &data[..]);
            prop_assert_eq!(tensor.info().file_offset() % alignment, 0);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = GgufFile::from_slice(&bytes);
    }

    #[test]
    fn arbitrary_bytes_after_a_valid_header_never_panic(
        counts in (0u64..4, 0u64..4),
        version in 2u32..4,
        tail in prop::collection::vec(any::<u8>(), 0..512),
    ) {
        let mut bytes = b"GGUF".to_vec();
        bytes.extend_from_slice(&version.to_le_bytes());
        bytes.extend_from_slice(&counts.0.to_le_bytes());
        bytes.extend_from_slice(&counts.1.to_le_bytes());
        bytes.extend_from_slice(&tail);
        if let Ok(file) = GgufFile::from_slice(&bytes) {
            for tensor in file.tensors() {
                prop_assert_eq!(tensor.data().len() as u64, tensor.info().size_bytes());
            }
        }
    }
}
