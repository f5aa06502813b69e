//! Products by experts on sealed (packed) weights: each token's row by its
//! chosen expert has the bits of that expert's own product of the row,
//! whoever else chose the expert (batch invariance), and the packed
//! experts are packed once.

use std::sync::Arc;

use baton_core::backend::{Bindings, Device, TensorRef};
use baton_core::graph::{Flags, Graph};
use baton_core::DType;
use baton_cpu::CpuDevice;
use baton_kernels::quantize_row;

use crate::packed::{matmul_graph, run, values, TIMEOUT};

fn matmul_id_graph(
    dtype: DType,
    (tokens, picks): (usize, usize),
    (experts, n, k): (usize, usize, usize),
) -> Arc<Graph> {
    let mut g = Graph::new();
    let x = g.leaf("x", DType::F32, &[tokens, 1, k], Flags::INPUT).expect("x");
    let w = g.leaf("w", dtype, &[experts, n, k], Flags::WEIGHT).expect("w");
    let ids = g.leaf("ids", DType::I32, &[tokens, picks], Flags::INPUT).expect("ids");
    let y = g.matmul_id(x, w, ids).expect("matmul_id");
    g.mark(y, Flags::OUTPUT).expect("mark");
    g.set_name(y, "y").expect("name");
    Arc::new(g)
}

#[test]
fn each_row_by_a_packed_expert_has_the_bits_of_that_experts_own_product() {
    let device = CpuDevice::new("cpu", Vec::new(), 2, 1.0).expect("device");
    let stream = device.new_stream().expect("stream");
    let (tokens, picks, experts, n) = (7, 3, 5, 40);
    // Expert 3 is chosen by no token; expert 0 by most.
    let ids: Vec<i32> = vec![0, 2, 4, 1, 0, 2, 0, 4, 1, 2, 0, 1, 4, 0, 2, 1, 2, 0, 0, 4, 2];
    for (dtype, k) in [(DType::Q8_0, 64), (DType::Q4_K, 256), (DType::F16, 48), (DType::Q4_0, 96)] {
        let row = dtype.row_bytes(k).expect("whole blocks");
        let mut bytes = vec![0u8; experts * n * row];
        for (r, out) in bytes.chunks_exact_mut(row).enumerate() {
            quantize_row(dtype, &values(k, r as u32 + 7), out).expect("quantize");
        }
        let sealed = |dims: &[usize], data: &[u8]| {
            let t = device.alloc_tensor(dtype, dims).expect("weights");
            t.buffer().declare_weights();
            stream.write_async(&t, data.to_vec()).expect("write").wait_within(TIMEOUT).expect("written");
            t
        };
        let all = sealed(&[experts, n, k], &bytes);
        let x = device.alloc_tensor(DType::F32, &[tokens, 1, k]).expect("x");
        stream.write_async(&x, values(tokens * k, 5)).expect("write").wait_within(TIMEOUT).expect("x");
        let id_tensor = device.alloc_tensor(DType::I32, &[tokens, picks]).expect("ids");
        stream.write_async(&id_tensor, ids.clone()).expect("write").wait_within(TIMEOUT).expect("ids");
        let y = device.alloc_tensor(DType::F32, &[tokens, picks, n]).expect("y");
        let graph = matmul_id_graph(dtype, (tokens, picks), (experts, n, k));
        let compute = |x: &TensorRef, ids: &TensorRef, y: &TensorRef| {
            let mut b = Bindings::new(&graph);
            b.bind_name("x", x.clone()).expect("x");
            b.bind_name("w", all.clone()).expect("w");
            b.bind_name("ids", ids.clone()).expect("ids");
            b.bind_name("y", y.clone()).expect("y");
            stream.compute(b).expect("compute").wait_timeout(TIMEOUT).expect("computed");
            stream.read_into_async(y, vec![0f32; y.bytes() / 4]).expect("read").wait_within(TIMEOUT).expect("read")
        };
        let before = device.packed_bytes();
        let out = compute(&x, &id_tensor, &y);
        let packed = device.packed_bytes() - before;
        assert_eq!(out, compute(&x, &id_tensor, &y), "{dtype}: the same bits every time");
        assert_eq!(device.packed_bytes() - before, packed, "{dtype}: packed once, not per step");
        if baton_kernels::packed::packable(dtype) {
            // Four experts were chosen, and the first step packs all five,
            // so no later step stops to pack one chosen for the first time.
            assert!(packed as usize >= 5 * n * row, "{dtype}: packed {packed}");
        }
        // Each expert alone, sealed in a buffer of its own, over every token.
        let plain_graph = matmul_graph(dtype, tokens, n, k);
        let x2 = device.alloc_tensor(DType::F32, &[tokens, k]).expect("x");
        stream.write_async(&x2, values(tokens * k, 5)).expect("write").wait_within(TIMEOUT).expect("x");
        let y2 = device.alloc_tensor(DType::F32, &[tokens, n]).expect("y");
        for e in 0..experts {
            let alone = sealed(&[n, k], &bytes[e * n * row..(e + 1) * n * row]);
            let own = run(&stream, &plain_graph, &x2, &alone, &y2);
            for (r, _) in ids.iter().enumerate().filter(|&(_, &id)| id as usize == e) {
                let t = r / picks;
                assert_eq!(&out[r * n..(r + 1) * n], &own[t * n..(t + 1) * n], "{dtype}: token {t} by expert {e}");
            }
        }
        // One token alone gets the bits it gets among the seven.
        let single = matmul_id_graph(dtype, (1, picks), (experts, n, k));
        for t in [0, 4, 6] {
            let x1 = device.alloc_tensor(DType::F32, &[1, 1, k]).expect("x");
            stream
                .write_async(&x1, values(tokens * k, 5)[t * k..(t + 1) * k].to_vec())
                .expect("w")
                .wait_within(TIMEOUT)
                .expect("x");
            let i1 = device.alloc_tensor(DType::I32, &[1, picks]).expect("ids");
            stream
                .write_async(&i1, ids[t * picks..(t + 1) * picks].to_vec())
                .expect("w")
                .wait_within(TIMEOUT)
                .expect("i");
            let y1 = device.alloc_tensor(DType::F32, &[1, picks, n]).expect("y");
            let mut b = Bindings::new(&single);
            b.bind_name("x", x1).expect("x");
            b.bind_name("w", all.clone()).expect("w");
            b.bind_name("ids", i1).expect("ids");
            b.bind_name("y", y1.clone()).expect("y");
            stream.compute(b).expect("compute").wait_timeout(TIMEOUT).expect("computed");
            let alone =
                stream.read_into_async(&y1, vec![0f32; picks * n]).expect("read").wait_within(TIMEOUT).expect("r");
            assert_eq!(alone, out[t * picks * n..(t + 1) * picks * n], "{dtype}: token {t} alone");
        }
    }
}

#[test]
fn an_expert_id_outside_the_experts_is_an_error_not_a_read() {
    let device = CpuDevice::new("cpu", Vec::new(), 2, 1.0).expect("device");
    let graph = matmul_id_graph(DType::F32, (2, 2), (3, 8, 16));
    for (bad, named) in [(vec![0, 1, 2, 3], "expert 3 outside 0..3"), (vec![-1, 0, 1, 2], "expert -1 outside 0..3")] {
        // A fresh stream each time: a failed computation's error sticks.
        let stream = device.new_stream().expect("stream");
        let mut b = Bindings::new(&graph);
        let t = |dims: &[usize], dtype| device.alloc_tensor(dtype, dims).expect("tensor");
        let id_tensor = t(&[2, 2], DType::I32);
        stream.write_async(&id_tensor, bad.clone()).expect("write").wait_within(TIMEOUT).expect("ids");
        b.bind_name("x", t(&[2, 1, 16], DType::F32)).expect("x");
        b.bind_name("w", t(&[3, 8, 16], DType::F32)).expect("w");
        b.bind_name("ids", id_tensor).expect("ids");
        b.bind_name("y", t(&[2, 2, 8], DType::F32)).expect("y");
        let result = stream.compute(b).expect("submitted").wait_timeout(TIMEOUT);
        let message = format!("{:?}", result.expect_err("an expert id outside 0..3 is refused"));
        assert!(message.contains(named), "{bad:?}: {message}");
    }
}

/// Two products of the same rows and ids in a row (a layer's gate and up)
/// gather and quantize the rows once: each output has the bits of its
/// product alone, and the next computation, with other rows in the same
/// memory, is not given the rows of the last one.
#[test]
fn gate_and_up_of_the_same_rows_match_each_product_alone_across_computations() {
    let device = CpuDevice::new("cpu", Vec::new(), 2, 1.0).expect("device");
    let stream = device.new_stream().expect("stream");
    let (tokens, picks, experts, n, k) = (6, 2, 4, 24, 256);
    let dtype = DType::Q4_K;
    let row = dtype.row_bytes(k).expect("whole blocks");
    let weights = |seed: u32| {
        let mut bytes = vec![0u8; experts * n * row];
        for (r, out) in bytes.chunks_exact_mut(row).enumerate() {
            quantize_row(dtype, &values(k, r as u32 + seed), out).expect("quantize");
        }
        let t = device.alloc_tensor(dtype, &[experts, n, k]).expect("weights");
        t.buffer().declare_weights();
        stream.write_async(&t, bytes).expect("write").wait_within(TIMEOUT).expect("written");
        t
    };
    let (gate_w, up_w) = (weights(1), weights(900));
    let mut g = Graph::new();
    let x = g.leaf("x", DType::F32, &[tokens, 1, k], Flags::INPUT).expect("x");
    let ids = g.leaf("ids", DType::I32, &[tokens, picks], Flags::INPUT).expect("ids");
    let gw = g.leaf("gate_w", dtype, &[experts, n, k], Flags::WEIGHT).expect("w");
    let uw = g.leaf("up_w", dtype, &[experts, n, k], Flags::WEIGHT).expect("w");
    let gate = g.matmul_id(x, gw, ids).expect("gate");
    let up = g.matmul_id(x, uw, ids).expect("up");
    for (node, name) in [(gate, "gate"), (up, "up")] {
        g.mark(node, Flags::OUTPUT).expect("mark");
        g.set_name(node, name).expect("name");
    }
    let both = Arc::new(g);
    let single = matmul_id_graph(dtype, (tokens, picks), (experts, n, k));
    let x_t = device.alloc_tensor(DType::F32, &[tokens, 1, k]).expect("x");
    let ids_t = device.alloc_tensor(DType::I32, &[tokens, picks]).expect("ids");
    let outs = [(); 3].map(|_| device.alloc_tensor(DType::F32, &[tokens, picks, n]).expect("y"));
    let read = |t: &TensorRef| {
        stream.read_into_async(t, vec![0f32; t.bytes() / 4]).expect("read").wait_within(TIMEOUT).expect("r")
    };
    for (seed, id_list) in [(5u32, [0, 1, 2, 3, 1, 0, 3, 2, 0, 2, 1, 3]), (77, [3, 2, 3, 1, 0, 1, 2, 0, 1, 3, 0, 2])] {
        stream.write_async(&x_t, values(tokens * k, seed)).expect("write").wait_within(TIMEOUT).expect("x");
        stream.write_async(&ids_t, id_list.to_vec()).expect("write").wait_within(TIMEOUT).expect("ids");
        let mut b = Bindings::new(&both);
        for (name, t) in
            [("x", &x_t), ("ids", &ids_t), ("gate_w", &gate_w), ("up_w", &up_w), ("gate", &outs[0]), ("up", &outs[1])]
        {
            b.bind_name(name, t.clone()).expect("bind");
        }
        stream.compute(b).expect("compute").wait_timeout(TIMEOUT).expect("computed");
        let (gate_out, up_out) = (read(&outs[0]), read(&outs[1]));
        for (w, want) in [(&gate_w, &gate_out), (&up_w, &up_out)] {
            let mut b = Bindings::new(&single);
            for (name, t) in [("x", &x_t), ("ids", &ids_t), ("w", w), ("y", &outs[2])] {
                b.bind_name(name, t.clone()).expect("bind");
            }
            stream.compute(b).expect("compute").wait_timeout(TIMEOUT).expect("computed");
            assert_eq!(&read(&outs[2]), want, "seed {seed}: the product alone");
        }
    }
}
