//! The kernels of a recurrent layer (Gated DeltaNet): the elementwise
//! sigmoid and softplus, the L2 norm of a row, one step of a short causal
//! convolution, and one step of the gated delta rule for one head.
//!
//! The sums are over fixed lanes whose order depends only on the row's
//! length, so a row's result is the same whatever else is computed beside
//! it (the batch invariance the graph ops promise).

use crate::isa::{multiversion, Isa};
use crate::ops::exp;

/// Lanes of the dot products (wide enough for AVX-512).
pub(crate) const LANES: usize = 16;

/// `out = 1 / (1 + exp(-x))`.
///
/// # Panics
/// If `x` and `out` differ in length.
pub fn sigmoid(x: &[f32], out: &mut [f32]) {
    assert_eq!(x.len(), out.len(), "sigmoid: x and out differ in length");
    sigmoid_impl(Isa::current(), x, out)
}

multiversion! {
    fn sigmoid_impl(x: &[f32], out: &mut [f32]) {
        for (o, &v) in out.iter_mut().zip(x) {
            *o = 1.0 / (1.0 + exp(-v));
        }
    }
}

/// `out = x` where `x > 20`, else `ln(1 + exp(x))` (ggml's softplus, with
/// the standard library's `exp` and `ln`).
///
/// # Panics
/// If `x` and `out` differ in length.
pub fn softplus(x: &[f32], out: &mut [f32]) {
    assert_eq!(x.len(), out.len(), "softplus: x and out differ in length");
    for (o, &v) in out.iter_mut().zip(x) {
        *o = if v > 20.0 { v } else { (1.0 + v.exp()).ln() };
    }
}

/// `out = x / max(sqrt(Σ x²), eps)`, the squares summed in f64 in order
/// (as ggml sums them).
///
/// # Panics
/// If `x` and `out` differ in length.
pub fn l2_norm(x: &[f32], eps: f32, out: &mut [f32]) {
    assert_eq!(x.len(), out.len(), "l2_norm: x and out differ in length");
    let sum: f64 = x.iter().map(|&v| f64::from(v * v)).sum();
    let scale = 1.0 / (sum as f32).sqrt().max(eps);
    for (o, &v) in out.iter_mut().zip(x) {
        *o = v * scale;
    }
}

/// One step of a causal convolution of one channel: the output for input
/// `x` after the `K - 1` earlier inputs `past` (oldest first), by the
/// kernel `w` (`K` taps, the last for `x`), summed oldest first; `past`
/// then shifts to end with `x`.
///
/// # Panics
/// If `w` is not one longer than `past`.
pub fn conv_step(past: &mut [f32], x: f32, w: &[f32]) -> f32 {
    assert_eq!(past.len() + 1, w.len(), "conv_step: a kernel of K taps over K - 1 earlier inputs");
    let mut sum = 0.0f32;
    for (p, &c) in past.iter().zip(w) {
        sum += p * c;
    }
    sum += x * w[past.len()];
    if !past.is_empty() {
        past.rotate_left(1);
        let last = past.len() - 1;
        past[last] = x;
    }
    sum
}

/// One token's step of the gated delta rule for one head: `state` is `Dv`
/// rows of `Dk` (`S_j`), `q` and `k` are `Dk` long, `v` and `out` `Dv`.
/// For each row: `S_j *= decay`; `d = (v_j - S_j · k) · beta`; `S_j += d
/// k`; `out_j = (S_j · q) · scale`.
///
/// # Panics
/// If the lengths do not fit (`state` = `v.len() × k.len()`).
pub fn delta_rule_step(
    state: &mut [f32],
    (q, k, v): (&[f32], &[f32], &[f32]),
    decay: f32,
    beta: f32,
    scale: f32,
    out: &mut [f32],
) {
    let dk = k.len();
    assert!(q.len() == dk && state.len() == v.len() * dk && out.len() == v.len(), "delta_rule_step: lengths");
    delta_rule_impl(Isa::current(), state, q, k, v, (decay, beta, scale), out)
}

multiversion! {
    fn delta_rule_impl(state: &mut [f32], q: &[f32], k: &[f32], v: &[f32], constants: (f32, f32, f32), out: &mut [f32]) {
        let dk = k.len();
        // Rows are independent: four at a time keep four chains of sums in
        // flight; each row's sums are the same whatever its neighbours.
        let mut rows = state.chunks_exact_mut(ROWS * dk);
        let mut j = 0;
        for group in rows.by_ref() {
            delta_rows::<ROWS>(group, (q, k, &v[j..j + ROWS]), constants, &mut out[j..j + ROWS]);
            j += ROWS;
        }
        for row in rows.into_remainder().chunks_exact_mut(dk) {
            delta_rows::<1>(row, (q, k, &v[j..j + 1]), constants, &mut out[j..j + 1]);
            j += 1;
        }
    }
}

/// Rows of the delta rule taken together.
const ROWS: usize = 4;

/// The delta rule for `R` consecutive rows of the state (`R × Dk`
/// values), their values `v` and outputs `out` (`R` each). Lane `l` of a
/// row's sums takes the elements `i ≡ l (mod LANES)` in order, whole
/// groups of lanes first, then the tail's.
#[inline(always)]
fn delta_rows<const R: usize>(
    rows: &mut [f32],
    (q, k, v): (&[f32], &[f32], &[f32]),
    (decay, beta, scale): (f32, f32, f32),
    out: &mut [f32],
) {
    let dk = k.len();
    let body = dk / LANES * LANES;
    let mut acc = [[0.0f32; LANES]; R];
    for c in (0..body).step_by(LANES) {
        let kk = &k[c..c + LANES];
        for (r, a) in acc.iter_mut().enumerate() {
            let s = &mut rows[r * dk + c..r * dk + c + LANES];
            for l in 0..LANES {
                s[l] *= decay;
                a[l] += s[l] * kk[l];
            }
        }
    }
    for (r, a) in acc.iter_mut().enumerate() {
        for (l, i) in (body..dk).enumerate() {
            let s = &mut rows[r * dk + i];
            *s *= decay;
            a[l] += *s * k[i];
        }
    }
    let d: [f32; R] = std::array::from_fn(|r| (v[r] - lanes_sum(&acc[r])) * beta);
    let mut acc = [[0.0f32; LANES]; R];
    for c in (0..body).step_by(LANES) {
        let (kk, qq) = (&k[c..c + LANES], &q[c..c + LANES]);
        for (r, a) in acc.iter_mut().enumerate() {
            let s = &mut rows[r * dk + c..r * dk + c + LANES];
            for l in 0..LANES {
                s[l] += kk[l] * d[r];
                a[l] += s[l] * qq[l];
            }
        }
    }
    for (r, a) in acc.iter_mut().enumerate() {
        for (l, i) in (body..dk).enumerate() {
            let s = &mut rows[r * dk + i];
            *s += k[i] * d[r];
            a[l] += *s * q[i];
        }
        out[r] = lanes_sum(a) * scale;
    }
}

/// The lanes added pairwise in a fixed tree.
#[inline(always)]
pub(crate) fn lanes_sum(acc: &[f32; LANES]) -> f32 {
    let mut half = *acc;
    let mut width = LANES;
    while width > 1 {
        width /= 2;
        for i in 0..width {
            half[i] += half[i + width];
        }
    }
    half[0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delta_rule_matches_its_definition_in_f64() {
        let (dk, dv) = (37, 5);
        let r = |i: usize, s: f32| ((i as f32 * 0.37 + s).sin()) * 0.5;
        let mut state: Vec<f32> = (0..dk * dv).map(|i| r(i, 1.0)).collect();
        let mut expected: Vec<f64> = state.iter().map(|&s| f64::from(s)).collect();
        let q: Vec<f32> = (0..dk).map(|i| r(i, 2.0)).collect();
        let k: Vec<f32> = (0..dk).map(|i| r(i, 3.0)).collect();
        let v: Vec<f32> = (0..dv).map(|i| r(i, 4.0)).collect();
        let mut out = vec![0.0; dv];
        delta_rule_step(&mut state, (&q, &k, &v), 0.9, 0.7, 0.25, &mut out);
        for j in 0..dv {
            let row = &mut expected[j * dk..][..dk];
            row.iter_mut().for_each(|s| *s *= 0.9f32 as f64);
            let sk: f64 = row.iter().zip(&k).map(|(s, &k)| s * f64::from(k)).sum();
            let d = (f64::from(v[j]) - sk) * 0.7f32 as f64;
            row.iter_mut().zip(&k).for_each(|(s, &k)| *s += f64::from(k) * d);
            let o: f64 = row.iter().zip(&q).map(|(s, &q)| s * f64::from(q)).sum::<f64>() * 0.25;
            assert!((o - f64::from(out[j])).abs() < 1e-5, "row {j}: {o} against {}", out[j]);
        }
        for (a, b) in state.iter().zip(&expected) {
            assert!((f64::from(*a) - b).abs() < 1e-5);
        }
    }

    #[test]
    fn conv_step_shifts_and_sums_oldest_first() {
        let mut past = vec![1.0, 2.0, 3.0];
        let y = conv_step(&mut past, 4.0, &[0.5, 0.25, 2.0, 1.0]);
        assert_eq!(y, 0.5 + 0.5 + 6.0 + 4.0);
        assert_eq!(past, [2.0, 3.0, 4.0]);
    }

    #[test]
    fn elementwise_forms() {
        let x = [-30.0f32, -1.0, 0.0, 2.5, 25.0];
        let mut out = [0.0; 5];
        softplus(&x, &mut out);
        assert_eq!(out[4], 25.0);
        assert!((out[2] - std::f32::consts::LN_2).abs() < 1e-7);
        sigmoid(&x, &mut out);
        assert!((out[2] - 0.5).abs() < 1e-7 && out[0] < 1e-12 && (out[3] - 0.924_141_8).abs() < 1e-6);
        l2_norm(&[3.0, 4.0], 1e-6, &mut out[..2]);
        assert_eq!(&out[..2], &[0.6, 0.8]);
        l2_norm(&[0.0, 0.0], 1e-6, &mut out[..2]);
        assert_eq!(&out[..2], &[0.0, 0.0]);
    }
}
