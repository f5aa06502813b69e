//! Parses arbitrary bytes as GGUF and touches everything a valid parse yields.
#![no_main]

use baton_gguf::{GgufFile, Value};
use libfuzzer_sys::fuzz_target;

fn touch(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len(),
        Value::Array(a) => a.len() + a.integers().map_or(0, |v| v.len()),
        other => other.as_integer().map_or(0, |v| v as usize & 1),
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(file) = GgufFile::from_slice(data) else {
        return;
    };
    let mut sink = 0usize;
    for (key, value) in file.metadata() {
        sink = sink.wrapping_add(key.len()).wrapping_add(touch(value));
    }
    for tensor in file.tensors() {
        let bytes = tensor.data();
        assert_eq!(bytes.len() as u64, tensor.info().size_bytes());
        sink = sink.wrapping_add(bytes.iter().map(|&b| b as usize).sum::<usize>());
        assert!(file.tensor(tensor.name()).is_some());
    }
    std::hint::black_box(sink);
});
