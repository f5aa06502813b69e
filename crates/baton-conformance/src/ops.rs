//! Every op against the f64 reference, with guard bytes around every bound
//! tensor that must come back untouched.
//!
//! Bounds (NMSE = Σ(a-b)²/Σb²): plain float types `<= 1e-7` (f32 sums of
//! f32 products; f16 and bf16 weights decode exactly), quantized weights
//! `<= 2e-4`, because the CPU backend quantizes activations to 8 bits per
//! block of 32 (256 for K-quants) before its integer dot products (the
//! errors it gives are in docs/measurements.md).

use baton_core::graph::{Flags, Graph, NodeId, Op, RopeMode};
use baton_core::DType;

use crate::reference as r;

pub use crate::attention_ops::{
    op_attention_f16, op_attention_in_blocks, op_attention_in_slots, op_attention_long, op_attention_q4_0_keys,
    op_attention_q8_0, op_attention_ring, op_attention_window, op_scatter_rows_q8_0,
};
pub use crate::expert_ops::{op_matmul_id, op_matmul_id_share, op_sum_rows, op_top_k_and_take_columns};
use crate::op_harness::{check, encode, f32s, f64s, input_f32, input_i32, run, Input};
pub use crate::op_harness::{FLOAT_NMSE, QUANT_NMSE};
pub use crate::oss_ops::{op_attention_sinks, op_rope_rotated_pairs, op_rope_yarn, op_swiglu_clamped};
pub use crate::recurrent_ops::{
    op_gated_delta_net, op_recurrent_kept_states, op_sigmoid_softplus_l2_norm, op_ssm_conv,
};
use crate::util::{random, Fixture};

fn unary_case(
    f: &Fixture,
    dims: &[usize],
    build: impl Fn(&mut Graph, NodeId) -> NodeId,
    reference: impl Fn(&[f64]) -> Vec<f64>,
) {
    let n: usize = dims.iter().product();
    let x = random(n, n as u64);
    let mut g = Graph::new();
    let leaf = g.leaf("x", DType::F32, dims, Flags::INPUT).expect("leaf");
    let y = build(&mut g, leaf);
    g.mark(y, Flags::OUTPUT).expect("mark");
    g.set_name(y, "y").expect("name");
    let out = run(f, g, vec![input_f32("x", &x)]);
    check("unary", &f32s(&out["y"]), &reference(&f64s(&x)), FLOAT_NMSE);
}

/// Row lookup from tables of every weight type the devices declare.
pub fn op_get_rows(f: &Fixture) {
    for dtype in f.weight_types() {
        let (vocab, width) = (7, if dtype.is_k_quant() { 512 } else { 64 });
        let table = encode(dtype, &random(vocab * width, 3));
        let ids = [6, 0, 3, 3, 1];
        let mut g = Graph::new();
        let t = g.leaf("table", dtype, &[vocab, width], Flags::WEIGHT).expect("leaf");
        let i = g.leaf("ids", DType::I32, &[ids.len()], Flags::INPUT).expect("leaf");
        let y = g.get_rows(t, i).expect("get_rows");
        g.mark(y, Flags::OUTPUT).expect("mark");
        g.set_name(y, "y").expect("name");
        let row_bytes = dtype.row_bytes(width).expect("row");
        let expected: Vec<f64> = ids
            .iter()
            .flat_map(|&id| r::decode_row(dtype, &table[id as usize * row_bytes..][..row_bytes], width))
            .collect();
        let out = run(f, g, vec![Input { name: "table", bytes: table }, input_i32("ids", &ids)]);
        check(&format!("get_rows {dtype}"), &f32s(&out["y"]), &expected, 1e-12);
    }
}

/// Matmul with weights of `dtype`, if the devices declare it a weight type;
/// if not, they must refuse it (`Device::supports`), not run it halfway.
fn matmul_case(f: &Fixture, dtype: DType) {
    if !f.weight_types().contains(&dtype) {
        for device in &f.devices {
            let name = &device.info().name;
            assert!(!device.supports(&Op::MatMul, dtype), "{name} supports {dtype} weights but does not declare them");
        }
        return;
    }
    let bound = if dtype.is_quantized() { QUANT_NMSE } else { FLOAT_NMSE };
    let ks: &[usize] = if dtype.is_k_quant() {
        &[256, 768]
    } else if dtype.is_quantized() {
        &[32, 96, 256]
    } else {
        &[1, 37, 64, 301]
    };
    for &k in ks {
        for (m, n) in [(1, 19), (5, 16), (8, 33), (13, 8)] {
            let x = random(m * k, (k * 31 + m) as u64);
            let w_values = random(n * k, (k + n) as u64);
            let w = encode(dtype, &w_values);
            let w_decoded = r::decode_row(dtype, &w, n * k);
            let mut g = Graph::new();
            let xl = g.leaf("x", DType::F32, &[m, k], Flags::INPUT).expect("leaf");
            let wl = g.leaf("w", dtype, &[n, k], Flags::WEIGHT).expect("leaf");
            let y = g.matmul(xl, wl).expect("matmul");
            g.mark(y, Flags::OUTPUT).expect("mark");
            g.set_name(y, "y").expect("name");
            let out = run(f, g, vec![input_f32("x", &x), Input { name: "w", bytes: w }]);
            let expected = r::matmul(&r::matmul_activations(dtype, &x, k), &w_decoded, m, n, k);
            check(&format!("matmul {dtype} m={m} n={n} k={k}"), &f32s(&out["y"]), &expected, bound);
        }
    }
}

/// Defines one matmul case per weight type: `$case` runs [`matmul_case`]
/// with `DType::$dtype` weights.
macro_rules! matmul_cases {
    ($($case:ident: $dtype:ident),* $(,)?) => {
        $(
            #[doc = concat!("Matmul with ", stringify!($dtype), " weights.")]
            pub fn $case(f: &Fixture) {
                matmul_case(f, DType::$dtype)
            }
        )*
    };
}

matmul_cases! {
    op_matmul_f32: F32, op_matmul_f16: F16, op_matmul_bf16: BF16, op_matmul_q8_0: Q8_0,
    op_matmul_q4_0: Q4_0, op_matmul_q4_1: Q4_1, op_matmul_q5_0: Q5_0, op_matmul_q5_1: Q5_1,
    op_matmul_q2_k: Q2_K, op_matmul_q3_k: Q3_K, op_matmul_q4_k: Q4_K, op_matmul_q5_k: Q5_K,
    op_matmul_q6_k: Q6_K, op_matmul_q8_k: Q8_K, op_matmul_mxfp4: MXFP4,
}

/// Batched matmul whose weight batches are shared by groups of x batches.
pub fn op_matmul_batched_broadcast(f: &Fixture) {
    // Three rows, and six (a backend may take rows in groups: one whole, one partial).
    for m in [3, 6] {
        let (heads, kv, n, k) = (6, 2, 5, 16);
        let x = random(heads * m * k, 1);
        let w = random(kv * n * k, 2);
        let mut g = Graph::new();
        let xl = g.leaf("x", DType::F32, &[heads, m, k], Flags::INPUT).expect("leaf");
        let wl = g.leaf("w", DType::F32, &[kv, n, k], Flags::WEIGHT).expect("leaf");
        let y = g.matmul(xl, wl).expect("matmul");
        g.mark(y, Flags::OUTPUT).expect("mark");
        g.set_name(y, "y").expect("name");
        let out = run(f, g, vec![input_f32("x", &x), input_f32("w", &w)]);
        let (xd, wd) = (f64s(&x), f64s(&w));
        let expected: Vec<f64> = (0..heads)
            .flat_map(|h| {
                let wb = h / (heads / kv);
                r::matmul(&xd[h * m * k..][..m * k], &wd[wb * n * k..][..n * k], m, n, k)
            })
            .collect();
        check(&format!("batched matmul m={m}"), &f32s(&out["y"]), &expected, FLOAT_NMSE);
    }
}

/// Matmul against a strided view of a larger weight (a KV cache window).
pub fn op_matmul_strided_weight(f: &Fixture) {
    for m in [3, 6] {
        let (batches, cap, used, k) = (2, 10, 7, 16);
        let cache = random(batches * cap * k, 4);
        let x = random(batches * m * k, 5);
        let mut g = Graph::new();
        let xl = g.leaf("x", DType::F32, &[batches, m, k], Flags::INPUT).expect("leaf");
        let cl = g.leaf("cache", DType::F32, &[batches, cap, k], Flags::STATE).expect("leaf");
        let window = g.narrow(cl, 1, 0, used).expect("narrow");
        let y = g.matmul(xl, window).expect("matmul");
        g.mark(y, Flags::OUTPUT).expect("mark");
        g.set_name(y, "y").expect("name");
        let out = run(f, g, vec![input_f32("x", &x), input_f32("cache", &cache)]);
        let (xd, cd) = (f64s(&x), f64s(&cache));
        let expected: Vec<f64> = (0..batches)
            .flat_map(|b| r::matmul(&xd[b * m * k..][..m * k], &cd[b * cap * k..][..used * k], m, used, k))
            .collect();
        check(&format!("strided matmul m={m}"), &f32s(&out["y"]), &expected, FLOAT_NMSE);
    }
}

fn broadcast_case(f: &Fixture, a_dims: &[usize], b_dims: &[usize], add: bool) {
    let (na, nb) = (a_dims.iter().product::<usize>(), b_dims.iter().product::<usize>());
    let (a, b) = (random(na, 8), random(nb, 9));
    let mut g = Graph::new();
    let al = g.leaf("a", DType::F32, a_dims, Flags::INPUT).expect("leaf");
    let bl = g.leaf("b", DType::F32, b_dims, Flags::INPUT).expect("leaf");
    let y = if add { g.add(al, bl) } else { g.mul(al, bl) }.expect("op");
    g.mark(y, Flags::OUTPUT).expect("mark");
    g.set_name(y, "y").expect("name");
    let out = run(f, g, vec![input_f32("a", &a), input_f32("b", &b)]);
    let pad = |d: &[usize]| {
        let mut p = vec![1; 4 - d.len()];
        p.extend_from_slice(d);
        p
    };
    let (ad, bd) = (pad(a_dims), pad(b_dims));
    let expected: Vec<f64> = (0..na)
        .map(|i| {
            let mut idx = [0; 4];
            let mut rest = i;
            for d in (0..4).rev() {
                idx[d] = rest % ad[d];
                rest /= ad[d];
            }
            let bi = (0..4).fold(0, |acc, d| acc * bd[d] + idx[d] % bd[d]);
            let (x, y) = (f64::from(a[i]), f64::from(b[bi]));
            if add {
                x + y
            } else {
                x * y
            }
        })
        .collect();
    check("broadcast", &f32s(&out["y"]), &expected, FLOAT_NMSE);
}

/// Add with row, column and equal-shape broadcasts.
pub fn op_add_broadcast(f: &Fixture) {
    broadcast_case(f, &[3, 4, 10], &[10], true);
    broadcast_case(f, &[3, 4, 10], &[4, 1], true);
    broadcast_case(f, &[5, 33], &[5, 33], true);
}

/// Mul with broadcasts.
pub fn op_mul_broadcast(f: &Fixture) {
    broadcast_case(f, &[5, 33], &[1, 33], false);
    broadcast_case(f, &[2, 3, 4, 9], &[3, 1, 9], false);
}

/// Scale.
pub fn op_scale(f: &Fixture) {
    unary_case(f, &[7, 13], |g, x| g.scale(x, -0.75).expect("scale"), |x| x.iter().map(|v| v * -0.75).collect());
}

/// RMS norm over odd and even rows.
pub fn op_rms_norm(f: &Fixture) {
    for cols in [45, 64] {
        unary_case(f, &[7, cols], |g, x| g.rms_norm(x, 1e-5).expect("rms"), |x| r::rms_norm(x, cols, 1e-5));
    }
}

fn rope_case(f: &Fixture, mode: RopeMode, dims: usize) {
    let (tokens, heads, head_dim) = (5, 3, 16);
    let positions = [0, 1, 2, 7, 100];
    let x = random(tokens * heads * head_dim, 12);
    let mut g = Graph::new();
    let xl = g.leaf("x", DType::F32, &[tokens, heads, head_dim], Flags::INPUT).expect("leaf");
    let pl = g.leaf("pos", DType::I32, &[tokens], Flags::INPUT).expect("leaf");
    let y = g.rope(xl, pl, mode, dims, 10000.0, 0.5).expect("rope");
    g.mark(y, Flags::OUTPUT).expect("mark");
    g.set_name(y, "y").expect("name");
    let out = run(f, g, vec![input_f32("x", &x), input_i32("pos", &positions)]);
    let params = r::Rope { heads, head_dim, dims, base: 10000.0, scale: 0.5, neox: mode == RopeMode::Neox };
    let expected = r::rope(&f64s(&x), &positions, &params);
    check("rope", &f32s(&out["y"]), &expected, FLOAT_NMSE);
}

/// RoPE on adjacent pairs, all dims.
pub fn op_rope_normal(f: &Fixture) {
    rope_case(f, RopeMode::Normal, 16)
}

/// RoPE on half-split pairs, partial dims.
pub fn op_rope_neox(f: &Fixture) {
    rope_case(f, RopeMode::Neox, 8)
}

/// Causal softmax with queries at the end of the keys.
pub fn op_softmax_causal(f: &Fixture) {
    let (h, t, s) = (2, 3, 7);
    unary_case(f, &[h, t, s], |g, x| g.softmax(x, 0.5, true).expect("softmax"), |x| r::softmax(x, t, s, 0.5, true));
}

/// Plain softmax.
pub fn op_softmax_plain(f: &Fixture) {
    unary_case(f, &[4, 9], |g, x| g.softmax(x, 1.5, false).expect("softmax"), |x| r::softmax(x, 4, 9, 1.5, false));
}

/// SiLU.
pub fn op_silu(f: &Fixture) {
    unary_case(f, &[101], |g, x| g.silu(x).expect("silu"), |x| x.iter().map(|&v| r::silu(v)).collect());
}

/// GELU (tanh form), over inputs wide enough to reach both tails.
pub fn op_gelu(f: &Fixture) {
    unary_case(f, &[101], |g, x| g.gelu(x).expect("gelu"), |x| x.iter().map(|&v| r::gelu(v)).collect());
}

/// Writing tokens into a transposed f16 cache window (the V cache).
pub fn op_copy_into_f16_strided(f: &Fixture) {
    let (head_dim, cap, at, tokens) = (4, 10, 5, 3);
    let src = random(tokens * head_dim, 13);
    let cache: Vec<f32> = (0..head_dim * cap).map(|i| i as f32).collect();
    let mut g = Graph::new();
    let c = g.leaf("cache", DType::F16, &[head_dim, cap], Flags::STATE).expect("leaf");
    let s = g.leaf("src", DType::F32, &[tokens, head_dim], Flags::INPUT).expect("leaf");
    let window = g.narrow(c, 1, at, tokens).expect("narrow");
    let transposed = g.permute(window, &[1, 0]).expect("permute");
    g.copy_into(transposed, s).expect("copy_into");
    let out = run(
        f,
        g,
        vec![input_f32("src", &src), Input { name: "cache", bytes: r::encode_float_row(DType::F16, &cache) }],
    );
    let got = r::decode_row(DType::F16, &out["cache"], head_dim * cap);
    for d in 0..head_dim {
        for j in 0..cap {
            let expected = if (at..at + tokens).contains(&j) {
                f64::from(half::f16::from_f32(src[(j - at) * head_dim + d]).to_f32())
            } else {
                (d * cap + j) as f64
            };
            assert_eq!(got[d * cap + j], expected, "cache[{d}][{j}]");
        }
    }
}

/// Writing rows into the middle of an f32 leaf.
pub fn op_copy_into_f32(f: &Fixture) {
    let src = random(3 * 6, 14);
    let mut g = Graph::new();
    let c = g.leaf("cache", DType::F32, &[8, 6], Flags::STATE).expect("leaf");
    let s = g.leaf("src", DType::F32, &[3, 6], Flags::INPUT).expect("leaf");
    let rows = g.narrow(c, 0, 2, 3).expect("narrow");
    g.copy_into(rows, s).expect("copy_into");
    let out = run(f, g, vec![input_f32("src", &src), input_f32("cache", &[0.5; 48])]);
    let got = f32s(&out["cache"]);
    assert!(got[..12].iter().chain(&got[30..]).all(|&v| v == 0.5), "rows outside the window changed");
    assert_eq!(&got[12..30], &src[..]);
}

/// A permuted view made contiguous.
pub fn op_contiguous_permuted(f: &Fixture) {
    let dims = [3, 4, 5];
    let x = random(60, 15);
    let mut g = Graph::new();
    let xl = g.leaf("x", DType::F32, &dims, Flags::INPUT).expect("leaf");
    let p = g.permute(xl, &[2, 0, 1]).expect("permute");
    let y = g.contiguous(p).expect("contiguous");
    g.mark(y, Flags::OUTPUT).expect("mark");
    g.set_name(y, "y").expect("name");
    let out = run(f, g, vec![input_f32("x", &x)]);
    let mut expected = Vec::new();
    for c in 0..5 {
        for a in 0..3 {
            for b in 0..4 {
                expected.push(f64::from(x[(a * 4 + b) * 5 + c]));
            }
        }
    }
    check("contiguous", &f32s(&out["y"]), &expected, 0.0);
}

/// Rows scattered into a transposed f16 cache at positions given as input.
pub fn op_scatter_rows(f: &Fixture) {
    let (heads, head_dim, cap) = (2, 4, 9);
    let rows = [7, 2, 5];
    let src = random(rows.len() * heads * head_dim, 16);
    let cache: Vec<f32> = (0..heads * head_dim * cap).map(|i| i as f32).collect();
    let mut g = Graph::new();
    // The value cache [heads, head_dim, cap], seen as [cap, heads, head_dim].
    let c = g.leaf("cache", DType::F16, &[heads, head_dim, cap], Flags::STATE).expect("leaf");
    let s = g.leaf("src", DType::F32, &[rows.len(), heads, head_dim], Flags::INPUT).expect("leaf");
    let r = g.leaf("rows", DType::I32, &[rows.len()], Flags::INPUT).expect("leaf");
    let by_position = g.permute(c, &[2, 0, 1]).expect("permute");
    g.scatter_rows(by_position, s, r).expect("scatter_rows");
    let out = run(
        f,
        g,
        vec![
            input_f32("src", &src),
            input_i32("rows", &rows),
            Input { name: "cache", bytes: r::encode_float_row(DType::F16, &cache) },
        ],
    );
    let got = r::decode_row(DType::F16, &out["cache"], heads * head_dim * cap);
    for h in 0..heads {
        for d in 0..head_dim {
            for p in 0..cap {
                let at = (h * head_dim + d) * cap + p;
                let expected = match rows.iter().position(|&x| x as usize == p) {
                    Some(t) => f64::from(half::f16::from_f32(src[(t * heads + h) * head_dim + d]).to_f32()),
                    None => at as f64,
                };
                assert_eq!(got[at], expected, "cache[{h}][{d}][{p}]");
            }
        }
    }
}

/// Softmax masked by positions over a padded window.
pub fn op_softmax_at_positions(f: &Fixture) {
    softmax_positions_case(f, None);
}

/// Softmax masked by positions and a sliding window of 3 keys (Gemma's
/// local layers): row `t` sees keys `positions[t] - 3 < s <= positions[t]`.
pub fn op_softmax_window(f: &Fixture) {
    softmax_positions_case(f, Some(3));
}

fn softmax_positions_case(f: &Fixture, window: Option<usize>) {
    let (h, t, s) = (2, 3, 8);
    let positions = [3, 4, 5];
    let x = random(h * t * s, 17);
    let mut g = Graph::new();
    let xl = g.leaf("x", DType::F32, &[h, t, s], Flags::INPUT).expect("leaf");
    let pl = g.leaf("pos", DType::I32, &[t], Flags::INPUT).expect("leaf");
    let y = g.softmax_window(xl, 0.5, pl, window).expect("softmax");
    g.mark(y, Flags::OUTPUT).expect("mark");
    g.set_name(y, "y").expect("name");
    let out = run(f, g, vec![input_f32("x", &x), input_i32("pos", &positions)]);
    let xd = f64s(&x);
    let expected: Vec<f64> = xd
        .chunks(s)
        .enumerate()
        .flat_map(|(row, vals)| {
            let end = positions[row % t] as usize + 1;
            let start = window.map_or(0, |w| end.saturating_sub(w));
            let seen = start..end;
            let max = vals[seen.clone()].iter().map(|v| v * 0.5).fold(f64::MIN, f64::max);
            let e: Vec<f64> =
                (0..s).map(|j| if seen.contains(&j) { (vals[j] * 0.5 - max).exp() } else { 0.0 }).collect();
            let sum: f64 = e.iter().sum();
            e.into_iter().map(move |v| v / sum)
        })
        .collect();
    check("softmax_at", &f32s(&out["y"]), &expected, FLOAT_NMSE);
}
