//! The ops of a recurrent layer (Gated DeltaNet, as Qwen 3.5's): sigmoid,
//! softplus and the L2 norm against their f64 definitions, and the two
//! ops that write their slots' state in place, the short convolution and
//! the gated delta rule, over rows of two sequences interleaved (one of
//! them restarting at position 0), in two nodes one after the other, so
//! that the second reads what the first wrote. A device that does not run
//! them must say so ([`Device::supports`](baton_core::backend::Device::supports)).

use baton_core::graph::{Flags, Graph, Op};
use baton_core::DType;

use crate::op_harness::{check, f32s, input_f32, input_i32, run, FLOAT_NMSE};
use crate::util::{random, Fixture};

fn runs(f: &Fixture, op: &Op) -> bool {
    f.devices.iter().all(|d| d.supports(op, DType::F32))
}

/// Rows of the two nodes: each row's slot and position (slot 1 goes on
/// from position 5; slot 0 starts at 0; slot 1 restarts at row 4).
const SLOTS: [[i32; 5]; 2] = [[1, 0, 1, 0, 1], [0, 1, 0, 1, 0]];
const POSITIONS: [[i32; 5]; 2] = [[5, 0, 6, 1, 0], [2, 1, 3, 2, 4]];

/// Sigmoid, softplus (both sides of its cut at 20) and the L2 norm (a row
/// of zeros among them).
pub fn op_sigmoid_softplus_l2_norm(f: &Fixture) {
    if !runs(f, &Op::Sigmoid) || !runs(f, &Op::Softplus) || !runs(f, &Op::L2Norm { eps: 1e-6 }) {
        return;
    }
    let (rows, cols) = (4, 37);
    let mut x: Vec<f32> = random(rows * cols, 61).iter().map(|v| v * 30.0).collect();
    x[cols..2 * cols].fill(0.0);
    let mut g = Graph::new();
    let xl = g.leaf("x", DType::F32, &[rows, cols], Flags::INPUT).expect("leaf");
    let outs = [g.sigmoid(xl), g.softplus(xl), g.l2_norm(xl, 1e-6)];
    for (out, name) in outs.into_iter().zip(["sigmoid", "softplus", "l2"]) {
        let out = out.expect("node");
        g.mark(out, Flags::OUTPUT).expect("mark");
        g.set_name(out, name).expect("name");
    }
    let got = run(f, g, vec![input_f32("x", &x)]);
    let xs: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
    let sigmoid: Vec<f64> = xs.iter().map(|v| 1.0 / (1.0 + (-v).exp())).collect();
    let softplus: Vec<f64> = xs.iter().map(|&v| if v > 20.0 { v } else { v.exp().ln_1p() }).collect();
    let mut l2 = Vec::with_capacity(xs.len());
    for row in xs.chunks(cols) {
        let norm = row.iter().map(|v| v * v).sum::<f64>().sqrt().max(1e-6);
        l2.extend(row.iter().map(|v| v / norm));
    }
    check("sigmoid", &f32s(&got["sigmoid"]), &sigmoid, FLOAT_NMSE);
    check("softplus", &f32s(&got["softplus"]), &softplus, FLOAT_NMSE);
    check("l2 norm", &f32s(&got["l2"]), &l2, FLOAT_NMSE);
}

/// Two nodes of the graph, each over 5 rows of `SLOTS` and `POSITIONS`,
/// named `y0` and `y1`; `build(g, state, node)` adds one node's op.
fn two_steps(
    g: &mut Graph,
    state: baton_core::graph::NodeId,
    build: &dyn Fn(&mut Graph, baton_core::graph::NodeId, usize) -> baton_core::graph::NodeId,
) {
    for step in 0..2 {
        let y = build(g, state, step);
        g.mark(y, Flags::OUTPUT).expect("mark");
        g.set_name(y, ["y0", "y1"][step]).expect("name");
    }
}

fn index_inputs() -> Vec<crate::op_harness::Input> {
    vec![
        input_i32("slots0", &SLOTS[0]),
        input_i32("slots1", &SLOTS[1]),
        input_i32("pos0", &POSITIONS[0]),
        input_i32("pos1", &POSITIONS[1]),
    ]
}

/// The short causal convolution: 2 slots, 19 channels, kernel 4.
pub fn op_ssm_conv(f: &Fixture) {
    if !runs(f, &Op::SsmConv) {
        return;
    }
    let (slots, channels, taps, rows) = (2, 19, 4, 5);
    let state = random(slots * channels * (taps - 1), 62);
    let w = random(channels * taps, 63);
    let xs = [random(rows * channels, 64), random(rows * channels, 65)];
    let mut g = Graph::new();
    let sl = g.leaf("state", DType::F32, &[slots, channels, taps - 1], Flags::STATE).expect("leaf");
    let wl = g.leaf("w", DType::F32, &[channels, taps], Flags::WEIGHT).expect("leaf");
    two_steps(&mut g, sl, &|g, sl, step| {
        let x = g.leaf(["x0", "x1"][step], DType::F32, &[rows, channels], Flags::INPUT).expect("leaf");
        let s = g.leaf(["slots0", "slots1"][step], DType::I32, &[rows], Flags::INPUT).expect("leaf");
        let p = g.leaf(["pos0", "pos1"][step], DType::I32, &[rows], Flags::INPUT).expect("leaf");
        g.ssm_conv(sl, x, wl, (s, p)).expect("ssm_conv")
    });
    let mut inputs =
        vec![input_f32("state", &state), input_f32("w", &w), input_f32("x0", &xs[0]), input_f32("x1", &xs[1])];
    inputs.extend(index_inputs());
    let got = run(f, g, inputs);
    let mut st: Vec<f64> = state.iter().map(|&v| f64::from(v)).collect();
    for step in 0..2 {
        let mut expected = Vec::with_capacity(rows * channels);
        for t in 0..rows {
            let (slot, pos) = (SLOTS[step][t] as usize, POSITIONS[step][t]);
            for c in 0..channels {
                let past = &mut st[(slot * channels + c) * (taps - 1)..][..taps - 1];
                if pos == 0 {
                    past.fill(0.0);
                }
                let x = f64::from(xs[step][t * channels + c]);
                let tap = |i: usize| f64::from(w[c * taps + i]);
                let y = past.iter().enumerate().map(|(i, p)| p * tap(i)).sum::<f64>() + x * tap(taps - 1);
                past.rotate_left(1);
                past[taps - 2] = x;
                expected.push(y);
            }
        }
        check(&format!("ssm_conv step {step}"), &f32s(&got[["y0", "y1"][step]]), &expected, FLOAT_NMSE);
    }
    check("ssm_conv state", &f32s(&got["state"]), &st, FLOAT_NMSE);
}

/// The gated delta rule: 2 slots, 4 value heads reading 2 key heads
/// (tiled), keys of 24 and values of 8.
pub fn op_gated_delta_net(f: &Fixture) {
    if !runs(f, &Op::GatedDeltaNet { scale: 1.0, chunk: 0 }) {
        return;
    }
    let (slots, heads, key_heads, dk, dv, rows) = (2, 4, 2, 24, 8, 5);
    let scale = 1.0 / (dk as f32).sqrt();
    let state = random(slots * heads * dv * dk, 66);
    let step_inputs = |seed: u64| {
        let l2 = |v: Vec<f32>| -> Vec<f32> {
            v.chunks(dk)
                .flat_map(|h| {
                    let n = h.iter().map(|x| x * x).sum::<f32>().sqrt();
                    h.iter().map(move |x| x / n).collect::<Vec<_>>()
                })
                .collect()
        };
        let q = l2(random(rows * key_heads * dk, seed));
        let k = l2(random(rows * key_heads * dk, seed + 1));
        let v = random(rows * heads * dv, seed + 2);
        let g: Vec<f32> = random(rows * heads, seed + 3).iter().map(|x| -x.abs()).collect();
        let beta: Vec<f32> = random(rows * heads, seed + 4).iter().map(|x| 0.5 + 0.5 * x).collect();
        [q, k, v, g, beta]
    };
    let data = [step_inputs(70), step_inputs(80)];
    let names = [["q0", "k0", "v0", "g0", "beta0"], ["q1", "k1", "v1", "g1", "beta1"]];
    let mut g = Graph::new();
    let sl = g.leaf("state", DType::F32, &[slots, heads, dv, dk], Flags::STATE).expect("leaf");
    two_steps(&mut g, sl, &|g, sl, step| {
        let n = names[step];
        let q = g.leaf(n[0], DType::F32, &[rows, key_heads, dk], Flags::INPUT).expect("leaf");
        let k = g.leaf(n[1], DType::F32, &[rows, key_heads, dk], Flags::INPUT).expect("leaf");
        let v = g.leaf(n[2], DType::F32, &[rows, heads, dv], Flags::INPUT).expect("leaf");
        let gate = g.leaf(n[3], DType::F32, &[rows, heads], Flags::INPUT).expect("leaf");
        let beta = g.leaf(n[4], DType::F32, &[rows, heads], Flags::INPUT).expect("leaf");
        let s = g.leaf(["slots0", "slots1"][step], DType::I32, &[rows], Flags::INPUT).expect("leaf");
        let p = g.leaf(["pos0", "pos1"][step], DType::I32, &[rows], Flags::INPUT).expect("leaf");
        g.gated_delta_net(sl, (q, k, v), (gate, beta), (s, p), scale).expect("gated_delta_net")
    });
    let mut inputs = vec![input_f32("state", &state)];
    for (step, values) in data.iter().enumerate() {
        for (name, v) in names[step].iter().zip(values) {
            inputs.push(input_f32(name, v));
        }
    }
    inputs.extend(index_inputs());
    let got = run(f, g, inputs);
    let mut st: Vec<f64> = state.iter().map(|&v| f64::from(v)).collect();
    for (step, [q, k, v, gate, beta]) in data.iter().enumerate() {
        let mut expected = Vec::with_capacity(rows * heads * dv);
        for t in 0..rows {
            let (slot, pos) = (SLOTS[step][t] as usize, POSITIONS[step][t]);
            for h in 0..heads {
                let s = &mut st[(slot * heads + h) * dv * dk..][..dv * dk];
                if pos == 0 {
                    s.fill(0.0);
                }
                let kh = (t * key_heads + h % key_heads) * dk;
                let (qv, kv) = (&q[kh..kh + dk], &k[kh..kh + dk]);
                let decay = f64::from(gate[t * heads + h]).exp();
                for j in 0..dv {
                    let row = &mut s[j * dk..][..dk];
                    row.iter_mut().for_each(|x| *x *= decay);
                    let sk: f64 = row.iter().zip(kv).map(|(x, &k)| x * f64::from(k)).sum();
                    let d = (f64::from(v[(t * heads + h) * dv + j]) - sk) * f64::from(beta[t * heads + h]);
                    row.iter_mut().zip(kv).for_each(|(x, &k)| *x += f64::from(k) * d);
                    expected.push(row.iter().zip(qv).map(|(x, &q)| x * f64::from(q)).sum::<f64>() * f64::from(scale));
                }
            }
        }
        check(&format!("gated_delta_net step {step}"), &f32s(&got[["y0", "y1"][step]]), &expected, FLOAT_NMSE);
    }
    check("gated_delta_net state", &f32s(&got["state"]), &st, FLOAT_NMSE);
}
