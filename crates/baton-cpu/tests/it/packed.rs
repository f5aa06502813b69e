//! Sealed weights are packed for the matmul kernels on first use, once,
//! and give the unpacked weights' products (within the kernels' bounds).

use std::sync::Arc;

use baton_core::backend::{Bindings, Device, Stream, TensorRef};
use baton_core::graph::{Flags, Graph};
use baton_core::DType;
use baton_cpu::CpuDevice;
use baton_kernels::quantize_row;

pub(crate) const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

pub(crate) fn values(n: usize, seed: u32) -> Vec<f32> {
    let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(12345);
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            (state % 2001) as f32 / 1000.0 - 1.0
        })
        .collect()
}

pub(crate) fn matmul_graph(dtype: DType, m: usize, n: usize, k: usize) -> Arc<Graph> {
    let mut g = Graph::new();
    let x = g.leaf("x", DType::F32, &[m, k], Flags::INPUT).expect("x");
    let w = g.leaf("w", dtype, &[n, k], Flags::WEIGHT).expect("w");
    let y = g.matmul(x, w).expect("matmul");
    g.mark(y, Flags::OUTPUT).expect("mark");
    g.set_name(y, "y").expect("name");
    Arc::new(g)
}

pub(crate) fn run(stream: &Stream, graph: &Arc<Graph>, x: &TensorRef, w: &TensorRef, y: &TensorRef) -> Vec<f32> {
    let mut b = Bindings::new(graph);
    b.bind_name("x", x.clone()).expect("bind x");
    b.bind_name("w", w.clone()).expect("bind w");
    b.bind_name("y", y.clone()).expect("bind y");
    stream.compute(b).expect("compute").wait_timeout(TIMEOUT).expect("computed");
    let n = y.bytes() / 4;
    stream.read_into_async(y, vec![0f32; n]).expect("read").wait_within(TIMEOUT).expect("read back")
}

#[test]
fn sealed_weights_are_packed_once_and_match_the_plain_ones() {
    let device = CpuDevice::new("cpu", Vec::new(), 2, 1.0).expect("device");
    let stream = device.new_stream().expect("stream");
    for (dtype, k) in [(DType::Q4_1, 96), (DType::Q8_0, 64), (DType::Q4_K, 256), (DType::F32, 40)] {
        let (m, n) = (5, 19);
        let row = dtype.row_bytes(k).expect("whole blocks");
        let mut bytes = vec![0u8; n * row];
        for (r, out) in bytes.chunks_exact_mut(row).enumerate() {
            quantize_row(dtype, &values(k, r as u32 + 1), out).expect("quantize");
        }
        let graph = matmul_graph(dtype, m, n, k);
        let x = device.alloc_tensor(DType::F32, &[m, k]).expect("x");
        stream.write_async(&x, values(m * k, 99)).expect("write").wait_within(TIMEOUT).expect("x written");
        let plain = device.alloc_tensor(dtype, &[n, k]).expect("plain w");
        let sealed = device.alloc_tensor(dtype, &[n, k]).expect("sealed w");
        sealed.buffer().declare_weights();
        for w in [&plain, &sealed] {
            stream.write_async(w, bytes.clone()).expect("write").wait_within(TIMEOUT).expect("w written");
        }
        let before = device.packed_bytes();
        let y = device.alloc_tensor(DType::F32, &[m, n]).expect("y");
        let expected = run(&stream, &graph, &x, &plain, &y);
        assert_eq!(device.packed_bytes(), before, "{dtype}: plain weights are not packed");
        let packed = run(&stream, &graph, &x, &sealed, &y);
        let added = device.packed_bytes() - before;
        if baton_kernels::packed::packable(dtype) {
            assert!(added as usize >= n * row, "{dtype}: packed {added} bytes for a {}-byte matrix", n * row);
        } else {
            assert_eq!(added, 0, "{dtype} has no packed form");
        }
        let again = run(&stream, &graph, &x, &sealed, &y);
        assert_eq!(device.packed_bytes() - before, added, "{dtype}: packed once, not per use");
        assert_eq!(packed, again, "{dtype}: the packed copy gives the same bits every time");
        let scale = expected.iter().fold(0f32, |a, v| a.max(v.abs())).max(1e-3);
        for (i, (p, e)) in packed.iter().zip(&expected).enumerate() {
            assert!((p - e).abs() <= 2e-3 * scale, "{dtype}: y[{i}] packed {p}, plain {e}");
        }
    }
}

/// `Device::host_matmul` multiplies on the host by the form of the weights
/// the device's MatMul reads (the packed copy where there is one): the
/// same bits as the op; only final weights, and lengths checked.
#[test]
fn a_host_product_by_sealed_weights_gives_the_ops_bits() {
    let device = CpuDevice::new("cpu", Vec::new(), 2, 1.0).expect("device");
    let stream = device.new_stream().expect("stream");
    for (dtype, k) in [(DType::Q4_1, 96), (DType::Q6_K, 256), (DType::F32, 40)] {
        let (m, n) = (3, 21);
        let row = dtype.row_bytes(k).expect("whole blocks");
        let mut bytes = vec![0u8; n * row];
        for (r, out) in bytes.chunks_exact_mut(row).enumerate() {
            quantize_row(dtype, &values(k, r as u32 + 7), out).expect("quantize");
        }
        let host_x = values(m * k, 5);
        let x = device.alloc_tensor(DType::F32, &[m, k]).expect("x");
        stream.write_async(&x, host_x.clone()).expect("write").wait_within(TIMEOUT).expect("x written");
        let w = device.alloc_tensor(dtype, &[n, k]).expect("w");
        let mut y = vec![0f32; m * n];
        assert!(device.host_matmul(&w, &host_x, &mut y).is_none(), "{dtype}: plain memory may change");
        w.buffer().declare_weights();
        stream.write_async(&w, bytes).expect("write").wait_within(TIMEOUT).expect("w written");
        assert!(device.host_matmul(&w, &host_x, &mut y).is_none(), "{dtype}: weights not sealed yet");
        let out = device.alloc_tensor(DType::F32, &[m, n]).expect("y");
        let by_op = run(&stream, &matmul_graph(dtype, m, n, k), &x, &w, &out);
        let packed = device.packed_bytes();
        device.host_matmul(&w, &host_x, &mut y).expect("sealed weights").expect("computed");
        assert_eq!(device.packed_bytes(), packed, "{dtype}: the op's packed copy, not another");
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&y), bits(&by_op), "{dtype}: the op's bits");
        let short = device.host_matmul(&w, &host_x[1..], &mut y).expect("sealed");
        assert!(short.is_err_and(|e| e.to_string().contains("whole rows")), "{dtype}: a partial row");
        let wide = device.host_matmul(&w, &host_x, &mut vec![0f32; m * n + 1]).expect("sealed");
        assert!(wide.is_err_and(|e| e.to_string().contains("output")), "{dtype}: an output of another size");
    }
}
