//! Truncating a valid file anywhere before the end of its tensor data gives
//! an error; corrupting any byte never panics.

use baton_gguf::GgufFile;

use crate::support;

#[test]
fn truncating_at_every_offset_gives_an_error() {
    let bytes = support::sample_file();
    let file = GgufFile::from_slice(&bytes).expect("sample file is valid");
    let data_end =
        file.tensor_infos().iter().map(|t| t.file_offset() + t.size_bytes()).max().expect("sample has tensors")
            as usize;
    for len in 0..bytes.len() {
        let result = GgufFile::from_slice(&bytes[..len]);
        if len < data_end {
            assert!(result.is_err(), "prefix of {len} bytes (data ends at {data_end}) parsed");
        } else {
            // Only trailing alignment padding was cut.
            let file = result.unwrap_or_else(|e| panic!("prefix {len} past data end: {e}"));
            assert_eq!(file.tensor_count(), 3);
        }
    }
}

#[test]
fn flipping_any_byte_never_panics() {
    let bytes = support::sample_file();
    for i in 0..bytes.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut corrupt = bytes.clone();
            corrupt[i] ^= flip;
            if let Ok(file) = GgufFile::from_slice(&corrupt) {
                for tensor in file.tensors() {
                    assert_eq!(tensor.data().len() as u64, tensor.info().size_bytes());
                }
            }
        }
    }
}
