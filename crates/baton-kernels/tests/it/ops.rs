//! Row kernels against plain f64 references, on both instruction sets.

use baton_kernels::ops;
use baton_kernels::{rope_in_place, RopeAngles, RopeMode};

use crate::common::{for_each_isa, nmse, Guarded, Rng};

const LENGTHS: [usize; 12] = [1, 2, 7, 8, 15, 16, 17, 31, 33, 100, 576, 1537];
const F32_BOUND: f64 = 1e-7;

fn f64s(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| f64::from(x)).collect()
}

/// Checks an out-of-place unary kernel against `reference` on all lengths.
fn check_unary(name: &str, kernel: impl Fn(&[f32], &mut [f32]), reference: impl Fn(f64) -> f64, scale: f32) {
    for_each_isa(|isa| {
        let mut rng = Rng::new(11);
        for len in LENGTHS {
            let x = rng.vec(len, scale);
            let mut out = Guarded::new(len);
            kernel(&x, out.inner());
            out.check_guards(name);
            let expected: Vec<f64> = x.iter().map(|&v| reference(f64::from(v))).collect();
            let e = nmse(out.view(), &expected);
            assert!(e <= F32_BOUND, "{name} {isa:?} len {len}: nmse {e:e}");
        }
    });
}

fn silu64(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
}

#[test]
fn silu_matches_f64_reference() {
    check_unary("silu", ops::silu, silu64, 4.0);
    check_unary("silu large inputs", ops::silu, silu64, 60.0);
}

/// GELU's tanh form as PyTorch's `gelu(approximate="tanh")` states it.
fn gelu64(x: f64) -> f64 {
    0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
}

#[test]
fn gelu_matches_f64_reference() {
    check_unary("gelu", ops::gelu, gelu64, 4.0);
    check_unary("gelu large inputs", ops::gelu, gelu64, 60.0);
}

#[test]
fn scale_matches_f64_reference() {
    check_unary("scale", |x, out| ops::scale(x, -0.37, out), |v| v * f64::from(-0.37f32), 1.0);
    for_each_isa(|_| {
        let mut x = vec![1.0, 2.0, 3.0];
        ops::scale_in_place(&mut x, 2.0);
        assert_eq!(x, [2.0, 4.0, 6.0]);
    });
}

#[test]
fn rms_norm_matches_f64_reference() {
    let eps = 1e-5f32;
    for_each_isa(|isa| {
        let mut rng = Rng::new(3);
        for len in LENGTHS {
            let x = rng.vec(len, 3.0);
            let mut out = Guarded::new(len);
            ops::rms_norm(&x, eps, out.inner());
            out.check_guards("rms_norm");
            let mean = x.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / len as f64;
            let scale = 1.0 / (mean + f64::from(eps)).sqrt();
            let expected: Vec<f64> = x.iter().map(|&v| f64::from(v) * scale).collect();
            let e = nmse(out.view(), &expected);
            assert!(e <= F32_BOUND, "rms_norm {isa:?} len {len}: nmse {e:e}");
        }
    });
}

#[test]
fn binary_ops_match_f64_reference() {
    type Binary = (&'static str, fn(&[f32], &[f32], &mut [f32]), fn(&mut [f32], &[f32]), fn(f64, f64) -> f64);
    let cases: [Binary; 2] =
        [("add", ops::add, ops::add_in_place, |a, b| a + b), ("mul", ops::mul, ops::mul_in_place, |a, b| a * b)];
    for (name, kernel, in_place, reference) in cases {
        for_each_isa(|isa| {
            let mut rng = Rng::new(5);
            for len in LENGTHS {
                let (a, b) = (rng.vec(len, 2.0), rng.vec(len, 2.0));
                let mut out = Guarded::new(len);
                kernel(&a, &b, out.inner());
                out.check_guards(name);
                let expected: Vec<f64> =
                    a.iter().zip(&b).map(|(&x, &y)| reference(f64::from(x), f64::from(y))).collect();
                let e = nmse(out.view(), &expected);
                assert!(e <= F32_BOUND, "{name} {isa:?} len {len}: nmse {e:e}");
                let mut acc = a.clone();
                in_place(&mut acc, &b);
                assert_eq!(acc, out.view(), "{name} in place differs from out of place");
            }
        });
    }
}

#[test]
fn swiglu_matches_f64_reference() {
    for_each_isa(|isa| {
        let mut rng = Rng::new(9);
        for len in LENGTHS {
            let (gate, up) = (rng.vec(len, 4.0), rng.vec(len, 2.0));
            let mut out = Guarded::new(len);
            ops::swiglu(&gate, &up, out.inner());
            out.check_guards("swiglu");
            let expected: Vec<f64> = gate.iter().zip(&up).map(|(&g, &u)| silu64(f64::from(g)) * f64::from(u)).collect();
            let e = nmse(out.view(), &expected);
            assert!(e <= F32_BOUND, "swiglu {isa:?} len {len}: nmse {e:e}");
        }
    });
}

#[test]
fn dot_matches_f64_reference() {
    for_each_isa(|isa| {
        let mut rng = Rng::new(13);
        for len in LENGTHS {
            let (a, b) = (rng.vec(len, 1.0), rng.vec(len, 1.0));
            let expected: f64 = a.iter().zip(&b).map(|(&x, &y)| f64::from(x) * f64::from(y)).sum();
            // Relative to the magnitude of the terms (the sum may cancel).
            let magnitude: f64 = a.iter().zip(&b).map(|(&x, &y)| (f64::from(x) * f64::from(y)).abs()).sum();
            let got = f64::from(ops::dot_f32(&a, &b));
            let e = ((got - expected) / magnitude).powi(2);
            assert!(e <= F32_BOUND, "dot {isa:?} len {len}: got {got}, expected {expected}");
        }
    });
}

#[test]
fn softmax_matches_f64_reference_and_masks_to_zero() {
    for_each_isa(|isa| {
        let mut rng = Rng::new(17);
        for len in LENGTHS {
            let mut row = rng.vec(len, 8.0);
            for (i, v) in row.iter_mut().enumerate() {
                if i % 3 == 1 {
                    *v = f32::NEG_INFINITY;
                }
            }
            let max = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(f64::from(v)));
            let exps: Vec<f64> = row.iter().map(|&v| (f64::from(v) - max).exp()).collect();
            let sum: f64 = exps.iter().sum();
            let expected: Vec<f64> = exps.iter().map(|e| e / sum).collect();
            ops::softmax_in_place(&mut row);
            let e = nmse(&row, &expected);
            assert!(e <= F32_BOUND, "softmax {isa:?} len {len}: nmse {e:e}");
            for (i, &v) in row.iter().enumerate() {
                if i % 3 == 1 {
                    assert_eq!(v, 0.0, "masked entry {i} of {len} is {v}");
                }
            }
        }
    });
}

#[test]
fn softmax_of_all_masked_row_is_zeros_not_nan() {
    for_each_isa(|isa| {
        for len in [0, 1, 5, 16, 40] {
            let mut row = vec![f32::NEG_INFINITY; len];
            ops::softmax_in_place(&mut row);
            assert!(row.iter().all(|&v| v == 0.0), "{isa:?} len {len}: {row:?}");
        }
    });
}

fn rope_reference(head: &[f32], position: usize, dims: usize, base: f32, scale: f32, mode: RopeMode) -> Vec<f64> {
    let mut out = f64s(head);
    for i in 0..dims / 2 {
        let theta = position as f64 * f64::from(scale) * f64::from(base).powf(-2.0 * i as f64 / dims as f64);
        let (ia, ib) = match mode {
            RopeMode::Normal => (2 * i, 2 * i + 1),
            RopeMode::NeoX => (i, i + dims / 2),
        };
        let (a, b) = (f64::from(head[ia]), f64::from(head[ib]));
        out[ia] = a * theta.cos() - b * theta.sin();
        out[ib] = a * theta.sin() + b * theta.cos();
    }
    out
}

#[test]
fn rope_matches_f64_reference_in_both_modes() {
    for_each_isa(|isa| {
        let mut rng = Rng::new(21);
        for mode in [RopeMode::Normal, RopeMode::NeoX] {
            for (head_len, dims) in [(64, 64), (64, 32), (128, 128), (10, 6), (2, 2)] {
                for position in [0usize, 1, 7, 511, 8191] {
                    let head = rng.vec(head_len, 1.0);
                    let expected = rope_reference(&head, position, dims, 10000.0, 0.5, mode);
                    let mut direct = head.clone();
                    rope_in_place(&mut direct, position, dims, 10000.0, 0.5, mode);
                    let e = nmse(&direct, &expected);
                    assert!(e <= F32_BOUND, "rope {mode:?} {isa:?} dims {dims} pos {position}: nmse {e:e}");
                    let mut angles = RopeAngles::new();
                    angles.compute(position, dims, 10000.0, 0.5);
                    let mut cached = head.clone();
                    angles.apply(&mut cached, mode);
                    let e = nmse(&cached, &expected);
                    assert!(e <= F32_BOUND, "cached rope {mode:?} {isa:?}: nmse {e:e}");
                    assert_eq!(cached[dims..], head[dims..], "elements past rope_dims must not move");
                }
            }
        }
    });
}
