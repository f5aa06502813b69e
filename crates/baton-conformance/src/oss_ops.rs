//! The op forms gpt-oss needs: attention with a sink logit per head, RoPE
//! with YaRN's scaling, and the clamped SwiGLU, against their f64
//! definitions. A device that does not run a form must say so
//! ([`Device::supports`](baton_core::backend::Device::supports)); the case
//! then checks nothing else on it.

use baton_core::graph::{Flags, Graph, Op, RopeMode, Yarn};
use baton_core::DType;

use crate::op_harness::{check, f32s, f64s, input_f32, input_i32, run, FLOAT_NMSE};
use crate::util::{random, Fixture};

fn runs(f: &Fixture, op: &Op, dtype: DType) -> bool {
    f.devices.iter().all(|d| d.supports(op, dtype))
}

/// Attention over an f32 cache with a sink logit per query head, one of
/// them far above every score (the real keys then get almost nothing), a
/// row that sees no key (0) and a sliding window.
pub fn op_attention_sinks(f: &Fixture) {
    let op = Op::Attention { scale: 0.3, window: Some(20), slot_rows: None, sinks: true, paged: false };
    if !runs(f, &op, DType::F32) {
        return;
    }
    let (heads, kv_heads, dim, keys) = (4, 2, 32, 70);
    let positions = [40i32, 69, -1, 5];
    let sinks = [0.5f32, -2.0, 30.0, 1.25];
    let t = positions.len();
    let q = random(t * heads * dim, 51);
    let (k, v) = (random(kv_heads * keys * dim, 52), random(kv_heads * keys * dim, 53));
    let mut g = Graph::new();
    let ql = g.leaf("q", DType::F32, &[t, heads, dim], Flags::INPUT).expect("leaf");
    let kl = g.leaf("k", DType::F32, &[kv_heads, keys, dim], Flags::STATE).expect("leaf");
    let vl = g.leaf("v", DType::F32, &[kv_heads, keys, dim], Flags::STATE).expect("leaf");
    let pl = g.leaf("pos", DType::I32, &[t], Flags::INPUT).expect("leaf");
    let sl = g.leaf("sinks", DType::F32, &[heads], Flags::WEIGHT).expect("leaf");
    let y = g.attention_node(ql, (kl, vl), pl, None, Some(sl), 0.3, Some(20)).expect("attention");
    g.mark(y, Flags::OUTPUT).expect("mark");
    g.set_name(y, "y").expect("name");
    let inputs = vec![
        input_f32("q", &q),
        input_f32("k", &k),
        input_f32("v", &v),
        input_i32("pos", &positions),
        input_f32("sinks", &sinks),
    ];
    let out = f32s(&run(f, g, inputs)["y"]);
    let mut expected = Vec::with_capacity(t * heads * dim);
    for (ti, &p) in positions.iter().enumerate() {
        for h in 0..heads {
            let kv = h / (heads / kv_heads);
            let end = usize::try_from(p + 1).unwrap_or(0);
            let seen = end.saturating_sub(20)..end;
            let query = &q[(ti * heads + h) * dim..][..dim];
            let score = |s: usize| {
                0.3 * (0..dim).map(|i| f64::from(query[i]) * f64::from(k[(kv * keys + s) * dim + i])).sum::<f64>()
            };
            let sink = f64::from(sinks[h]);
            let top = seen.clone().map(score).fold(sink, f64::max);
            let total = seen.clone().map(|s| (score(s) - top).exp()).sum::<f64>() + (sink - top).exp();
            for i in 0..dim {
                let sum: f64 =
                    seen.clone().map(|s| (score(s) - top).exp() * f64::from(v[(kv * keys + s) * dim + i])).sum();
                expected.push(if seen.is_empty() { 0.0 } else { sum / total });
            }
        }
    }
    check("attention with sinks", &out, &expected, FLOAT_NMSE);
}

/// RoPE that rotates only the first 4 of 16 NeoX pairs (Gemma 4's full
/// layers: pairs `(i, i + 16)` over the whole head of 32, the exponent over
/// 32, the other 12 pairs unchanged).
pub fn op_rope_rotated_pairs(f: &Fixture) {
    let op = Op::Rope {
        mode: RopeMode::Neox,
        dims: 32,
        freq_base: 1e6,
        freq_scale: 1.0,
        yarn: None,
        rotated_pairs: Some(4),
    };
    if !runs(f, &op, DType::F32) {
        return;
    }
    let (tokens, heads, head_dim, dims, pairs) = (5, 3, 32, 32, 4);
    let positions = [0i32, 1, 9, 200, 511];
    let x = random(tokens * heads * head_dim, 55);
    let mut g = Graph::new();
    let xl = g.leaf("x", DType::F32, &[tokens, heads, head_dim], Flags::INPUT).expect("leaf");
    let pl = g.leaf("pos", DType::I32, &[tokens], Flags::INPUT).expect("leaf");
    let y = g.rope_pairs((xl, pl), (RopeMode::Neox, dims, Some(pairs)), (1e6, 1.0), None).expect("rope");
    g.mark(y, Flags::OUTPUT).expect("mark");
    g.set_name(y, "y").expect("name");
    let out = f32s(&run(f, g, vec![input_f32("x", &x), input_i32("pos", &positions)])["y"]);
    let mut expected = f64s(&x);
    for (t, &pos) in positions.iter().enumerate() {
        for h in 0..heads {
            let head = &mut expected[(t * heads + h) * head_dim..][..head_dim];
            for i in 0..pairs {
                let theta = f64::from(pos) * 1e6f64.powf(-2.0 * i as f64 / dims as f64);
                let (a, b) = (head[i], head[i + dims / 2]);
                head[i] = a * theta.cos() - b * theta.sin();
                head[i + dims / 2] = a * theta.sin() + b * theta.cos();
            }
        }
    }
    check("rope of the first pairs", &out, &expected, FLOAT_NMSE);
}

/// RoPE with YaRN (gpt-oss's constants at a small size: NeoX pairs, base
/// 150,000, factor 4 over a trained context of 64, so the ramp spans
/// pairs 0 to 4 of 16), at positions past the trained context.
pub fn op_rope_yarn(f: &Fixture) {
    let yarn = Yarn { orig_context: 64, ext_factor: 1.0, attn_factor: 1.0, beta_fast: 32.0, beta_slow: 1.0 };
    let op = Op::Rope {
        mode: RopeMode::Neox,
        dims: 32,
        freq_base: 150_000.0,
        freq_scale: 0.25,
        yarn: Some(yarn),
        rotated_pairs: None,
    };
    if !runs(f, &op, DType::F32) {
        return;
    }
    let (tokens, heads, head_dim, dims) = (5, 3, 32, 32);
    let positions = [0i32, 1, 63, 200, 511];
    let x = random(tokens * heads * head_dim, 54);
    let mut g = Graph::new();
    let xl = g.leaf("x", DType::F32, &[tokens, heads, head_dim], Flags::INPUT).expect("leaf");
    let pl = g.leaf("pos", DType::I32, &[tokens], Flags::INPUT).expect("leaf");
    let y = g.rope_yarn(xl, pl, RopeMode::Neox, dims, (150_000.0, 0.25), Some(yarn)).expect("rope");
    g.mark(y, Flags::OUTPUT).expect("mark");
    g.set_name(y, "y").expect("name");
    let out = f32s(&run(f, g, vec![input_f32("x", &x), input_i32("pos", &positions)])["y"]);
    // The definition: ramp over pairs low..high, magnitude 1 + 0.1 ln 4.
    let corr = |b: f64| dims as f64 * (64.0 / (b * 2.0 * std::f64::consts::PI)).ln() / (2.0 * 150_000f64.ln());
    let (low, high) = (corr(32.0).floor().max(0.0), corr(1.0).ceil().min(dims as f64 - 1.0));
    assert_eq!((low, high), (0.0, 4.0), "the ramp of this case");
    let magnitude = 1.0 + 0.1 * 4f64.ln();
    let mut expected = f64s(&x);
    for (t, &pos) in positions.iter().enumerate() {
        for h in 0..heads {
            let head = &mut expected[(t * heads + h) * head_dim..][..head_dim];
            for i in 0..dims / 2 {
                let extrapolated = f64::from(pos) * 150_000f64.powf(-2.0 * i as f64 / dims as f64);
                let mix = 1.0 - ((i as f64 - low) / (high - low).max(0.001)).clamp(0.0, 1.0);
                let theta = extrapolated * 0.25 * (1.0 - mix) + extrapolated * mix;
                let (a, b) = (head[i], head[i + dims / 2]);
                head[i] = (a * theta.cos() - b * theta.sin()) * magnitude;
                head[i + dims / 2] = (a * theta.sin() + b * theta.cos()) * magnitude;
            }
        }
    }
    check("rope with yarn", &out, &expected, FLOAT_NMSE);
}

/// gpt-oss's clamped SwiGLU over values wide enough to reach both clamps.
pub fn op_swiglu_clamped(f: &Fixture) {
    let op = Op::SwiGluClamped { alpha: 1.702, limit: 7.0 };
    if !runs(f, &op, DType::F32) {
        return;
    }
    let n = 3 * 67;
    let gate: Vec<f32> = random(n, 55).iter().map(|v| v * 12.0).collect();
    let up: Vec<f32> = random(n, 56).iter().map(|v| v * 12.0).collect();
    let mut g = Graph::new();
    let gl = g.leaf("gate", DType::F32, &[3, 67], Flags::INPUT).expect("leaf");
    let ul = g.leaf("up", DType::F32, &[3, 67], Flags::INPUT).expect("leaf");
    let y = g.swiglu_clamped(gl, ul, 1.702, 7.0).expect("swiglu_clamped");
    g.mark(y, Flags::OUTPUT).expect("mark");
    g.set_name(y, "y").expect("name");
    let out = f32s(&run(f, g, vec![input_f32("gate", &gate), input_f32("up", &up)])["y"]);
    let expected: Vec<f64> = gate
        .iter()
        .zip(&up)
        .map(|(&g, &u)| {
            let (x, y) = (f64::from(g).min(7.0), f64::from(u).clamp(-7.0, 7.0));
            x / (1.0 + (-1.702 * x).exp()) * (y + 1.0)
        })
        .collect();
    check("clamped swiglu", &out, &expected, FLOAT_NMSE);
}
