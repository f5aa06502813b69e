//! The ops of a recurrent layer (Gated DeltaNet, as Qwen 3.5's): sigmoid,
//! softplus and the L2 norm against their f64 definitions, and the two
//! ops that write their slots' state in place, the short convolution and
//! the gated delta rule, over rows of two sequences interleaved (one of
//! them restarting at position 0), in two nodes one after the other, so
//! that the second reads what the first wrote. A device that does not run
//! them must say so ([`Device::supports`](baton_core::backend::Device::supports)).

use baton_core::graph::{Flags, Graph, KeptStates, Op};
use baton_core::DType;

use crate::op_harness::{check, f32s, f64s, input_f32, input_i32, run, FLOAT_NMSE};
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

/// One row of the short convolution of one channel in f64: the output
/// for input `x` after the inputs `past` (oldest first), by the taps `w`;
/// `past` shifts by one.
fn conv_row(past: &mut [f64], x: f32, w: &[f32]) -> f64 {
    let (x, taps) = (f64::from(x), w.len());
    let y = past.iter().zip(w).map(|(p, &w)| p * f64::from(w)).sum::<f64>() + x * f64::from(w[taps - 1]);
    past.rotate_left(1);
    past[taps - 2] = x;
    y
}

/// One row of the gated delta rule for one head in f64: the state `s`
/// (`Dv` rows of `Dk`) updated by `(q, k, v)` with `(g, beta)`; returns the
/// head's `Dv` outputs.
fn delta_row(s: &mut [f64], (q, k, v): (&[f32], &[f32], &[f32]), (g, beta): (f32, f32), scale: f32) -> Vec<f64> {
    let (dk, decay) = (k.len(), f64::from(g).exp());
    let mut out = Vec::with_capacity(v.len());
    for (j, &vj) in v.iter().enumerate() {
        let row = &mut s[j * dk..][..dk];
        row.iter_mut().for_each(|x| *x *= decay);
        let sk: f64 = row.iter().zip(k).map(|(x, &k)| x * f64::from(k)).sum();
        let d = (f64::from(vj) - sk) * f64::from(beta);
        row.iter_mut().zip(k).for_each(|(x, &k)| *x += f64::from(k) * d);
        out.push(row.iter().zip(q).map(|(x, &q)| x * f64::from(q)).sum::<f64>() * f64::from(scale));
    }
    out
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
                expected.push(conv_row(past, xs[step][t * channels + c], &w[c * taps..(c + 1) * taps]));
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
                let vh = (t * heads + h) * dv;
                let gates = (gate[t * heads + h], beta[t * heads + h]);
                let qkv = (&q[kh..kh + dk], &k[kh..kh + dk], &v[vh..vh + dv]);
                expected.extend(delta_row(s, qkv, gates, scale));
            }
        }
        check(&format!("gated_delta_net step {step}"), &f32s(&got[["y0", "y1"][step]]), &expected, FLOAT_NMSE);
    }
    check("gated_delta_net state", &f32s(&got["state"]), &st, FLOAT_NMSE);
}

/// The states kept after chosen rows ([`KeptStates`]): 4 rows of slot 1
/// (positions 3 to 6) through the convolution and the delta rule with
/// `keep` [1, -1, 0, 2]: each kept row holds the slot's state after its
/// row (the f64 definitions), the one after the last row the bits of the
/// slot's own state, and the row kept after none is left as it was.
pub fn op_recurrent_kept_states(f: &Fixture) {
    if !runs(f, &Op::SsmConv) || !runs(f, &Op::GatedDeltaNet { scale: 1.0, chunk: 0 }) {
        return;
    }
    let (slots, channels, taps, heads, key_heads, dk, dv, rows) = (2, 5, 4, 2, 1, 8, 4, 4);
    let (keep, positions, row_slots) = ([1i32, -1, 0, 2], [3i32, 4, 5, 6], [1i32; 4]);
    let scale = 0.5;
    let (conv_state, delta_state) = (random(slots * channels * (taps - 1), 90), random(slots * heads * dv * dk, 91));
    let conv_per_slot = channels * (taps - 1);
    let delta_per_slot = heads * dv * dk;
    let (conv_kept, delta_kept) = (random(4 * conv_per_slot, 92), random(4 * delta_per_slot, 93));
    let (x, w) = (random(rows * channels, 94), random(channels * taps, 95));
    let unit = |v: Vec<f32>| -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / n).collect()
    };
    let (q, k) = (unit(random(rows * dk, 96)), unit(random(rows * dk, 97)));
    let v = random(rows * heads * dv, 98);
    let gate: Vec<f32> = random(rows * heads, 99).iter().map(|x| -x.abs()).collect();
    let beta: Vec<f32> = random(rows * heads, 100).iter().map(|x| 0.5 + 0.5 * x).collect();
    let mut g = Graph::new();
    let leaf = |g: &mut Graph, name: &str, dtype: DType, dims: &[usize], flags: Flags| {
        g.leaf(name, dtype, dims, flags).expect("leaf")
    };
    let cs = leaf(&mut g, "conv", DType::F32, &[slots, channels, taps - 1], Flags::STATE);
    let ck = leaf(&mut g, "conv_kept", DType::F32, &[4, channels, taps - 1], Flags::STATE);
    let ds = leaf(&mut g, "delta", DType::F32, &[slots, heads, dv, dk], Flags::STATE);
    let dkept = leaf(&mut g, "delta_kept", DType::F32, &[4, heads, dv, dk], Flags::STATE);
    let keep_l = leaf(&mut g, "keep", DType::I32, &[rows], Flags::INPUT);
    let sl = leaf(&mut g, "slots", DType::I32, &[rows], Flags::INPUT);
    let pl = leaf(&mut g, "pos", DType::I32, &[rows], Flags::INPUT);
    let xl = leaf(&mut g, "x", DType::F32, &[rows, channels], Flags::INPUT);
    let wl = leaf(&mut g, "w", DType::F32, &[channels, taps], Flags::WEIGHT);
    let ql = leaf(&mut g, "q", DType::F32, &[rows, key_heads, dk], Flags::INPUT);
    let kl = leaf(&mut g, "k", DType::F32, &[rows, key_heads, dk], Flags::INPUT);
    let vl = leaf(&mut g, "v", DType::F32, &[rows, heads, dv], Flags::INPUT);
    let gl = leaf(&mut g, "g", DType::F32, &[rows, heads], Flags::INPUT);
    let bl = leaf(&mut g, "beta", DType::F32, &[rows, heads], Flags::INPUT);
    let conv_keep = Some(KeptStates { kept: ck, keep: keep_l });
    let y = g.ssm_conv_keeping(cs, xl, wl, (sl, pl), conv_keep).expect("ssm_conv");
    let delta_keep = Some(KeptStates { kept: dkept, keep: keep_l });
    let rule = (scale, 0);
    let o = g.gated_delta_net_keeping(ds, (ql, kl, vl), (gl, bl), (sl, pl), rule, delta_keep).expect("delta");
    for (node, name) in [(y, "y"), (o, "o")] {
        g.mark(node, Flags::OUTPUT).expect("mark");
        g.set_name(node, name).expect("name");
    }
    let mut inputs = vec![input_f32("conv", &conv_state), input_f32("conv_kept", &conv_kept)];
    inputs.extend([input_f32("delta", &delta_state), input_f32("delta_kept", &delta_kept)]);
    inputs.extend([input_i32("keep", &keep), input_i32("slots", &row_slots), input_i32("pos", &positions)]);
    inputs.extend([input_f32("x", &x), input_f32("w", &w), input_f32("q", &q), input_f32("k", &k)]);
    inputs.extend([input_f32("v", &v), input_f32("g", &gate), input_f32("beta", &beta)]);
    let got = run(f, g, inputs);
    let mut conv_ref: Vec<f64> = f64s(&conv_state[conv_per_slot..]);
    let mut delta_ref: Vec<f64> = f64s(&delta_state[delta_per_slot..]);
    let (got_conv, got_delta) = (f32s(&got["conv_kept"]), f32s(&got["delta_kept"]));
    for t in 0..rows {
        for c in 0..channels {
            conv_row(&mut conv_ref[c * (taps - 1)..][..taps - 1], x[t * channels + c], &w[c * taps..(c + 1) * taps]);
        }
        for h in 0..heads {
            let vh = (t * heads + h) * dv;
            let qkv = (&q[t * dk..(t + 1) * dk], &k[t * dk..(t + 1) * dk], &v[vh..vh + dv]);
            delta_row(&mut delta_ref[h * dv * dk..][..dv * dk], qkv, (gate[t * heads + h], beta[t * heads + h]), scale);
        }
        let Ok(row) = usize::try_from(keep[t]) else { continue };
        let what = format!("the states kept after row {t}");
        check(&what, &got_conv[row * conv_per_slot..][..conv_per_slot], &conv_ref, FLOAT_NMSE);
        check(&what, &got_delta[row * delta_per_slot..][..delta_per_slot], &delta_ref, FLOAT_NMSE);
    }
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let (conv_now, delta_now) = (f32s(&got["conv"]), f32s(&got["delta"]));
    assert_eq!(bits(&got_conv[2 * conv_per_slot..3 * conv_per_slot]), bits(&conv_now[conv_per_slot..]));
    assert_eq!(bits(&got_delta[2 * delta_per_slot..3 * delta_per_slot]), bits(&delta_now[delta_per_slot..]));
    assert_eq!(bits(&got_conv[3 * conv_per_slot..]), bits(&conv_kept[3 * conv_per_slot..]), "row 3 kept nothing");
    assert_eq!(bits(&got_delta[3 * delta_per_slot..]), bits(&delta_kept[3 * delta_per_slot..]), "row 3 kept nothing");
}
