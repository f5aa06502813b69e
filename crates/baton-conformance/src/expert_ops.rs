//! A mixture of experts' op cases: the router's top-k picks and the values
//! at them, each token's product by its chosen experts, and the sum of
//! rows. A device that does not run them must say so
//! ([`Device::supports`](baton_core::backend::Device::supports)); the
//! cases then check nothing else on it (a model places the experts'
//! layers on a device that runs them).

use baton_core::graph::{Flags, Graph, Op};
use baton_core::DType;

use crate::op_harness::{check, encode, f32s, input_f32, input_i32, run, Input, FLOAT_NMSE, QUANT_NMSE};
use crate::reference as r;
use crate::util::{random, Fixture};

fn runs(f: &Fixture, op: &Op, dtype: DType) -> bool {
    f.devices.iter().all(|d| d.supports(op, dtype))
}

fn i32s(bytes: &[u8]) -> Vec<i32> {
    bytes.chunks_exact(4).map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

/// Top-k of rows with ties (the lower index first) and NaN (last), then
/// the values at the picks.
pub fn op_top_k_and_take_columns(f: &Fixture) {
    if !runs(f, &Op::TopK { k: 3 }, DType::F32) || !runs(f, &Op::TakeColumns, DType::F32) {
        return;
    }
    let (rows, n, k) = (6, 37, 3);
    let mut x = random(rows * n, 71);
    // Row 1: a tie for first place; row 2: NaNs among the values; row 3:
    // every value equal.
    x[n + 5] = 3.0;
    x[n + 30] = 3.0;
    x[2 * n + 1] = f32::NAN;
    x[2 * n + 9] = f32::NAN;
    x[3 * n..4 * n].fill(0.25);
    let mut g = Graph::new();
    let xl = g.leaf("x", DType::F32, &[rows, n], Flags::INPUT).expect("leaf");
    let ids = g.top_k(xl, k).expect("top_k");
    let picked = g.take_columns(xl, ids).expect("take_columns");
    g.mark(ids, Flags::OUTPUT).expect("mark");
    g.set_name(ids, "ids").expect("name");
    g.mark(picked, Flags::OUTPUT).expect("mark");
    g.set_name(picked, "picked").expect("name");
    let out = run(f, g, vec![input_f32("x", &x)]);
    let (ids, picked) = (i32s(&out["ids"]), f32s(&out["picked"]));
    for row in 0..rows {
        let values = &x[row * n..(row + 1) * n];
        let mut order: Vec<usize> = (0..n).collect();
        // Larger first, NaN last, ties by index (a stable sort keeps them).
        order.sort_by(|&a, &b| {
            let key = |i: usize| if values[i].is_nan() { f32::NEG_INFINITY } else { values[i] };
            key(b).total_cmp(&key(a)).then((values[a].is_nan()).cmp(&values[b].is_nan()))
        });
        let expected: Vec<i32> = order[..k].iter().map(|&i| i as i32).collect();
        assert_eq!(&ids[row * k..(row + 1) * k], &expected[..], "top {k} of row {row}");
        for j in 0..k {
            assert_eq!(picked[row * k + j].to_bits(), values[expected[j] as usize].to_bits(), "value at pick {j}");
        }
    }
    assert_eq!(&ids[k..2 * k], &[5, 30, ids[k + 2]], "a tie goes to the lower index");
    assert_eq!(&ids[3 * k..4 * k], &[0, 1, 2], "equal values in order of index");
}

/// The sum of each matrix's rows, in order.
pub fn op_sum_rows(f: &Fixture) {
    if !runs(f, &Op::SumRows, DType::F32) {
        return;
    }
    let (m, rows, cols) = (5, 8, 33);
    let x = random(m * rows * cols, 72);
    let mut g = Graph::new();
    let xl = g.leaf("x", DType::F32, &[m, rows, cols], Flags::INPUT).expect("leaf");
    let y = g.sum_rows(xl).expect("sum_rows");
    g.mark(y, Flags::OUTPUT).expect("mark");
    g.set_name(y, "y").expect("name");
    let out = f32s(&run(f, g, vec![input_f32("x", &x)])["y"]);
    for i in 0..m {
        for c in 0..cols {
            // The stated order, in f32: the same bits on every device.
            let mut sum = x[i * rows * cols + c];
            for r in 1..rows {
                sum += x[(i * rows + r) * cols + c];
            }
            assert_eq!(out[i * cols + c].to_bits(), sum.to_bits(), "matrix {i} column {c}");
        }
    }
}

/// Each token times its chosen experts, with one input row per token (`S
/// = 1`) and one per pick (`S = k`), for `dtype` experts; an expert chosen
/// by no token and one chosen by several.
fn matmul_id_case(f: &Fixture, dtype: DType) {
    if !f.weight_types().contains(&dtype) || !runs(f, &Op::MatMulId, dtype) {
        return;
    }
    let bound = if dtype.is_quantized() { QUANT_NMSE } else { FLOAT_NMSE };
    let k_dim = if dtype.is_k_quant() { 256 } else { 64 };
    let (tokens, picks, experts, n) = (5, 3, 6, 40);
    // Expert 4 is chosen by no token, expert 1 by four.
    let ids: Vec<i32> = vec![1, 0, 5, 2, 1, 3, 1, 5, 0, 3, 2, 1, 0, 5, 2];
    let w_values = random(experts * n * k_dim, 73);
    let w = encode(dtype, &w_values);
    let w_decoded = r::decode_row(dtype, &w, experts * n * k_dim);
    for s in [1, picks] {
        let x = random(tokens * s * k_dim, 74 + s as u64);
        let mut g = Graph::new();
        let xl = g.leaf("x", DType::F32, &[tokens, s, k_dim], Flags::INPUT).expect("leaf");
        let wl = g.leaf("w", dtype, &[experts, n, k_dim], Flags::WEIGHT).expect("leaf");
        let il = g.leaf("ids", DType::I32, &[tokens, picks], Flags::INPUT).expect("leaf");
        let y = g.matmul_id(xl, wl, il).expect("matmul_id");
        g.mark(y, Flags::OUTPUT).expect("mark");
        g.set_name(y, "y").expect("name");
        let inputs = vec![input_f32("x", &x), Input { name: "w", bytes: w.clone() }, input_i32("ids", &ids)];
        let out = f32s(&run(f, g, inputs)["y"]);
        let mut expected = Vec::with_capacity(tokens * picks * n);
        for (row, &e) in ids.iter().enumerate() {
            let (t, j) = (row / picks, row % picks);
            let xr = &x[(t * s + if s == 1 { 0 } else { j }) * k_dim..][..k_dim];
            let we = &w_decoded[e as usize * n * k_dim..][..n * k_dim];
            expected.extend(r::matmul(&r::matmul_activations(dtype, xr, k_dim), we, 1, n, k_dim));
        }
        check(&format!("matmul_id {dtype} S={s}"), &out, &expected, bound);
    }
}

/// Products by experts of f32, f16, Q8_0, Q4_0 and Q4_K weights.
pub fn op_matmul_id(f: &Fixture) {
    for dtype in [DType::F32, DType::F16, DType::Q8_0, DType::Q4_0, DType::Q4_K] {
        matmul_id_case(f, dtype);
    }
}

/// A share of the experts (`first..first + E`): each row whose expert it
/// holds has the bits of the product by every expert, each other row is
/// `-0.0`; the rows of a token choosing several experts of the share, one
/// of none.
pub fn op_matmul_id_share(f: &Fixture) {
    for dtype in [DType::F32, DType::Q8_0, DType::Q4_K] {
        if !f.weight_types().contains(&dtype) || !runs(f, &Op::MatMulIdShare { first: 2 }, dtype) {
            continue;
        }
        let k_dim = if dtype.is_k_quant() { 256 } else { 64 };
        let (tokens, picks, experts, n, first, held) = (5, 3, 6, 40, 2, 3);
        // Token 3 chooses none of experts 2..5, token 1 all three.
        let ids: Vec<i32> = vec![1, 0, 5, 2, 3, 4, 1, 5, 0, 0, 1, 5, 0, 4, 2];
        let w = encode(dtype, &random(experts * n * k_dim, 75));
        let per_expert = w.len() / experts;
        let share = w[first * per_expert..(first + held) * per_expert].to_vec();
        let x = random(tokens * k_dim, 76);
        let mut g = Graph::new();
        let xl = g.leaf("x", DType::F32, &[tokens, 1, k_dim], Flags::INPUT).expect("leaf");
        let wl = g.leaf("w", dtype, &[experts, n, k_dim], Flags::WEIGHT).expect("leaf");
        let sl = g.leaf("share", dtype, &[held, n, k_dim], Flags::WEIGHT).expect("leaf");
        let il = g.leaf("ids", DType::I32, &[tokens, picks], Flags::INPUT).expect("leaf");
        let every = g.matmul_id(xl, wl, il).expect("matmul_id");
        let part = g.matmul_id_share(xl, sl, il, first).expect("matmul_id_share");
        for (node, name) in [(every, "every"), (part, "part")] {
            g.mark(node, Flags::OUTPUT).expect("mark");
            g.set_name(node, name).expect("name");
        }
        let inputs = vec![
            input_f32("x", &x),
            Input { name: "w", bytes: w.clone() },
            Input { name: "share", bytes: share },
            input_i32("ids", &ids),
        ];
        let out = run(f, g, inputs);
        let (every, part) = (f32s(&out["every"]), f32s(&out["part"]));
        for (row, &e) in ids.iter().enumerate() {
            let held_here = (first..first + held).contains(&(e as usize));
            for c in 0..n {
                let got = part[row * n + c].to_bits();
                let want = if held_here { every[row * n + c].to_bits() } else { (-0.0f32).to_bits() };
                assert_eq!(
                    got, want,
                    "{dtype} row {row} (expert {e}) column {c}: share bits {got:#x}, expected {want:#x}"
                );
            }
        }
    }
}
