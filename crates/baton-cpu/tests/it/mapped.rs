//! Weights mapped from a file (`Device::map_file`): sealed from the start,
//! the file's bytes, packed like allocated weights with the same bits, and
//! their pages given back once packed while their bytes stay readable.

use std::io::Write;

use baton_core::backend::{Device, FileRange, StreamError, TensorRef};
use baton_core::DType;
use baton_cpu::CpuDevice;
use baton_kernels::quantize_row;

use super::packed::{matmul_graph, run, values, TIMEOUT};

/// Bytes before the matrix in the file: not a page multiple, so the
/// mapping starts inside a page.
const HEADER: usize = 1000;

/// A Q8_0 matrix of `n` rows of `k`, quantized from the test's values.
fn matrix(n: usize, k: usize) -> Vec<u8> {
    let row = DType::Q8_0.row_bytes(k).expect("whole blocks");
    let mut bytes = vec![0u8; n * row];
    for (r, out) in bytes.chunks_exact_mut(row).enumerate() {
        quantize_row(DType::Q8_0, &values(k, r as u32 + 7), out).expect("quantize");
    }
    bytes
}

/// Resident KiB of the mapping that holds `address`, from /proc/self/smaps.
fn resident_kib(address: usize) -> Option<u64> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let mut inside = false;
    for line in smaps.lines() {
        if let Some((range, _)) = line.split_once(' ') {
            if let Some((start, end)) = range.split_once('-') {
                if let (Ok(start), Ok(end)) = (usize::from_str_radix(start, 16), usize::from_str_radix(end, 16)) {
                    inside = (start..end).contains(&address);
                    continue;
                }
            }
        }
        if inside {
            if let Some(rss) = line.strip_prefix("Rss:") {
                return rss.trim().trim_end_matches("kB").trim().parse().ok();
            }
        }
    }
    None
}

#[test]
fn mapped_weights_are_the_files_bytes_packed_with_the_same_bits_and_their_pages_given_back() {
    let (m, n, k) = (3, 4096, 256);
    let bytes = matrix(n, k);
    let mut file = tempfile::tempfile().expect("temp file");
    file.write_all(&vec![0xAB; HEADER]).expect("header");
    file.write_all(&bytes).expect("matrix");
    file.write_all(&[0xCD; 100]).expect("trailer");
    let device = CpuDevice::new("cpu", Vec::new(), 2, 1.0).expect("device");
    let stream = device.new_stream().expect("stream");
    let range = FileRange { file: &file, offset: HEADER as u64, len: bytes.len() };
    let buffer = device.map_file(range).expect("maps").expect("the CPU maps files");
    assert!(buffer.is_sealed(), "mapped weights are sealed from the start");
    assert_eq!(device.memory().expect("counted").mapped, bytes.len() as u64);
    let mapped = TensorRef::new(&buffer, 0, DType::Q8_0, &[n, k]).expect("tensor");

    let copied = device.alloc_tensor(DType::Q8_0, &[n, k]).expect("copy");
    copied.buffer().declare_weights();
    stream.write_async(&copied, bytes.clone()).expect("write").wait_within(TIMEOUT).expect("written");
    let refused = match stream.write_async(&mapped, bytes.clone()) {
        Err(e) => e.error,
        Ok(pending) => pending.wait_within(TIMEOUT).expect_err("a write into mapped weights is refused").error,
    };
    assert!(matches!(refused, StreamError::SealedWeights { .. }), "refused as sealed weights: {refused}");

    // Every page read in: the mapping is resident.
    let read = stream.read_into_async(&mapped, vec![0u8; bytes.len()]).expect("read").wait_within(TIMEOUT);
    assert!(read.expect("read back") == bytes, "the mapping holds the file's bytes");
    let address = buffer.raw().host_ptr().expect("host memory").as_ptr() as usize;
    let before = resident_kib(address).expect("the mapping is in smaps");
    assert!(before * 1024 >= bytes.len() as u64 - 8192, "read pages are resident: {before} KiB");

    let graph = matmul_graph(DType::Q8_0, m, n, k);
    let x = device.alloc_tensor(DType::F32, &[m, k]).expect("x");
    stream.write_async(&x, values(m * k, 5)).expect("write").wait_within(TIMEOUT).expect("x written");
    let y = device.alloc_tensor(DType::F32, &[m, n]).expect("y");
    let from_copy = run(&stream, &graph, &x, &copied, &y);
    let derived = device.memory().expect("counted").derived;
    let from_map = run(&stream, &graph, &x, &mapped, &y);
    assert!(from_map.iter().zip(&from_copy).all(|(a, b)| a.to_bits() == b.to_bits()), "same bits as the copy");
    assert!(device.memory().expect("counted").derived > derived, "the mapped matrix was packed");
    let after = resident_kib(address).expect("the mapping is in smaps");
    assert!(after <= 16, "the packed matrix's pages were given back: {before} KiB resident before, {after} after");

    let read = stream.read_into_async(&mapped, vec![0u8; bytes.len()]).expect("read").wait_within(TIMEOUT);
    assert!(read.expect("read back") == bytes, "given-back pages read the file's bytes again");
    assert_eq!(run(&stream, &graph, &x, &mapped, &y), from_map, "the packed copy serves later products");

    drop((mapped, buffer));
    assert_eq!(device.memory().expect("counted").mapped, 0, "unmapped with its last handle");
}

#[test]
fn ranges_outside_the_file_or_empty_are_errors() {
    let mut file = tempfile::tempfile().expect("temp file");
    file.write_all(&[1u8; 5000]).expect("bytes");
    let device = CpuDevice::new("cpu", Vec::new(), 1, 1.0).expect("device");
    for (offset, len) in [(0, 5001), (4999, 2), (5000, 1), (u64::MAX - 1, 10), (0, 0)] {
        let result = device.map_file(FileRange { file: &file, offset, len });
        let error = result.err().unwrap_or_else(|| panic!("{offset}+{len}: mapped"));
        assert!(error.to_string().contains("map"), "{offset}+{len}: {error}");
    }
    let whole = device.map_file(FileRange { file: &file, offset: 4096, len: 904 }).expect("maps").expect("mapped");
    assert_eq!(whole.len(), 904);
}
