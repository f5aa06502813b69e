//! Row kernels of a llama decoder, all f32: normalisation, softmax,
//! activations, element-wise arithmetic and the dot product.
//!
//! Each kernel is one portable, lane-parallel body compiled twice (as is, and
//! with AVX2+FMA enabled so LLVM vectorizes it; see `isa::multiversion`), and
//! picks the version for [`Isa::current`]. Reductions keep 16 independent
//! partial sums, which vectorize without reordering a single sum.
//!
//! Length mismatches between arguments are caller bugs and panic.

use crate::isa::{multiversion, Isa};

/// Partial sums kept by reductions (two 8-lane vectors).
const LANES: usize = 16;

/// Rounds to the nearest integer, ties to even, for `|v| < 2^22` (adding and
/// removing 1.5 * 2^23 leaves no fraction bits; vectorizes everywhere).
#[inline(always)]
pub(crate) fn round_small(v: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0;
    (v + MAGIC) - MAGIC
}

/// `e^x` with a relative error of about 2e-7 for `x` in `[-87.3, 88.3]`;
/// 0 below (so `-inf` gives exactly 0), `e^88.3` above. Branch-free so loops
/// over it vectorize.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    const LOWEST: f32 = -87.336_54;
    const HIGHEST: f32 = 88.3;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    const MAGIC: f32 = 12_582_912.0;
    let clamped = x.clamp(LOWEST, HIGHEST);
    // `round_small`, keeping the sum: its low bits are `n` as an integer.
    let shifted = clamped * std::f32::consts::LOG2_E + MAGIC;
    let n = shifted - MAGIC;
    let e_r = exp_reduced(clamped - n * LN2_HI - n * LN2_LO);
    // 2^n from the integer bits (`n` is in [-126, 128]: `shifted` is
    // MAGIC + n exactly). `n as i32` would saturate, which LLVM does one
    // lane at a time; this stays in the vector.
    let n_int = shifted.to_bits().wrapping_sub(MAGIC.to_bits()) as i32;
    let scale = f32::from_bits((n_int.wrapping_add(127) as u32) << 23);
    if x < LOWEST {
        0.0
    } else {
        e_r * scale
    }
}

/// `e^r` for `|r| <= ln 2 / 2` (the Cephes `expf` polynomial).
#[inline(always)]
fn exp_reduced(r: f32) -> f32 {
    let p = 1.987_569_1e-4;
    let p = p * r + 1.398_199_9e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 1.666_666_5e-1;
    let p = p * r + 0.5;
    p * r * r + r + 1.0
}

#[inline(always)]
fn silu_one(x: f32) -> f32 {
    x / (1.0 + exp(-x))
}

/// GELU in its tanh form, `0.5 x (1 + tanh(y))` with
/// `y = sqrt(2/π) (x + 0.044715 x³)`, computed as the equal `x σ(2y)` so it
/// shares the vectorized `exp`.
#[inline(always)]
fn gelu_one(x: f32) -> f32 {
    const TWO_SQRT_2_OVER_PI: f32 = 2.0 * 0.797_884_6;
    x / (1.0 + exp(-TWO_SQRT_2_OVER_PI * (x + 0.044_715 * x * x * x)))
}

#[inline(always)]
fn lane_sum(lanes: [f32; LANES]) -> f32 {
    let mut half = [0.0f32; 8];
    for l in 0..8 {
        half[l] = lanes[l] + lanes[l + 8];
    }
    (half[0] + half[4] + (half[2] + half[6])) + (half[1] + half[5] + (half[3] + half[7]))
}

multiversion! {
    fn dot_impl(a: &[f32], b: &[f32]) -> f32 {
        dot_body(a, b)
    }
}

multiversion! {
    fn rms_norm_impl(x: &[f32], eps: f32, out: &mut [f32]) {
        let squares = dot_body(x, x);
        let scale = 1.0 / (squares / x.len() as f32 + eps).sqrt();
        for (o, v) in out.iter_mut().zip(x) {
            *o = v * scale;
        }
    }
}

/// The dot product body, inlined into other kernels' bodies.
#[inline(always)]
fn dot_body(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; LANES];
    let (a_body, a_tail) = a.split_at(a.len() / LANES * LANES);
    let (b_body, b_tail) = b.split_at(a_body.len());
    for (ca, cb) in a_body.chunks_exact(LANES).zip(b_body.chunks_exact(LANES)) {
        for l in 0..LANES {
            lanes[l] += ca[l] * cb[l];
        }
    }
    let mut sum = lane_sum(lanes);
    for (x, y) in a_tail.iter().zip(b_tail) {
        sum += x * y;
    }
    sum
}

multiversion! {
    fn softmax_impl(row: &mut [f32]) {
        let mut lanes = [f32::NEG_INFINITY; LANES];
        let (body, tail) = row.split_at(row.len() / LANES * LANES);
        for chunk in body.chunks_exact(LANES) {
            for l in 0..LANES {
                lanes[l] = lanes[l].max(chunk[l]);
            }
        }
        let max = tail.iter().chain(&lanes).fold(f32::NEG_INFINITY, |m, &v| m.max(v));
        if max == f32::NEG_INFINITY {
            // Everything masked (or empty): no probability mass anywhere.
            row.fill(0.0);
            return;
        }
        let mut sums = [0.0f32; LANES];
        let (body, tail) = row.split_at_mut(row.len() / LANES * LANES);
        for chunk in body.chunks_exact_mut(LANES) {
            for l in 0..LANES {
                chunk[l] = exp(chunk[l] - max);
                sums[l] += chunk[l];
            }
        }
        let mut sum = lane_sum(sums);
        for v in tail.iter_mut() {
            *v = exp(*v - max);
            sum += *v;
        }
        let inverse = 1.0 / sum;
        for v in row.iter_mut() {
            *v *= inverse;
        }
    }
}

/// Values an element-wise kernel takes per step of its loop: several
/// registers' worth, so the long dependency chain of each (`exp`'s
/// polynomial, then a division) overlaps the others' instead of waiting.
const ELEMENTWISE_STEP: usize = 64;

/// `out[i] = f(x[i])`, `ELEMENTWISE_STEP` values at a time.
#[inline(always)]
fn map_body(x: &[f32], out: &mut [f32], f: impl Fn(f32) -> f32) {
    let body = x.len() / ELEMENTWISE_STEP * ELEMENTWISE_STEP;
    let (x_body, x_tail) = x.split_at(body);
    let (o_body, o_tail) = out.split_at_mut(body);
    for (o, v) in o_body.chunks_exact_mut(ELEMENTWISE_STEP).zip(x_body.chunks_exact(ELEMENTWISE_STEP)) {
        for i in 0..ELEMENTWISE_STEP {
            o[i] = f(v[i]);
        }
    }
    for (o, &v) in o_tail.iter_mut().zip(x_tail) {
        *o = f(v);
    }
}

multiversion! {
    fn silu_impl(x: &[f32], out: &mut [f32]) {
        map_body(x, out, silu_one)
    }
}

multiversion! {
    fn gelu_impl(x: &[f32], out: &mut [f32]) {
        map_body(x, out, gelu_one)
    }
}

multiversion! {
    fn swiglu_impl(gate: &[f32], up: &[f32], out: &mut [f32]) {
        let body = gate.len() / ELEMENTWISE_STEP * ELEMENTWISE_STEP;
        for ((o, g), u) in out[..body]
            .chunks_exact_mut(ELEMENTWISE_STEP)
            .zip(gate[..body].chunks_exact(ELEMENTWISE_STEP))
            .zip(up[..body].chunks_exact(ELEMENTWISE_STEP))
        {
            for i in 0..ELEMENTWISE_STEP {
                o[i] = silu_one(g[i]) * u[i];
            }
        }
        for ((o, &g), &u) in out[body..].iter_mut().zip(&gate[body..]).zip(&up[body..]) {
            *o = silu_one(g) * u;
        }
    }
}

/// `out = x / sqrt(mean(x²) + eps)`.
///
/// # Panics
/// If `x` and `out` differ in length.
pub fn rms_norm(x: &[f32], eps: f32, out: &mut [f32]) {
    assert_eq!(x.len(), out.len(), "rms_norm: x and out differ in length");
    rms_norm_impl(Isa::current(), x, eps, out)
}

/// Replaces `row` by its softmax, computed stably (the maximum is subtracted
/// first). `-inf` entries (masked) become exactly 0; a row that is all
/// `-inf` becomes all zeros rather than NaN.
pub fn softmax_in_place(row: &mut [f32]) {
    softmax_impl(Isa::current(), row)
}

/// `out = x * sigmoid(x)`.
///
/// # Panics
/// If `x` and `out` differ in length.
pub fn silu(x: &[f32], out: &mut [f32]) {
    assert_eq!(x.len(), out.len(), "silu: x and out differ in length");
    silu_impl(Isa::current(), x, out)
}

/// `out = 0.5 x (1 + tanh(sqrt(2/π) (x + 0.044715 x³)))` (GELU, tanh form).
///
/// # Panics
/// If `x` and `out` differ in length.
pub fn gelu(x: &[f32], out: &mut [f32]) {
    assert_eq!(x.len(), out.len(), "gelu: x and out differ in length");
    gelu_impl(Isa::current(), x, out)
}

/// `out = x σ(alpha x) (y + 1)` with `x = min(gate, limit)` and `y =
/// clamp(up, -limit, limit)` (gpt-oss's clamped SwiGLU), with the same
/// exponential as [`silu`].
///
/// # Panics
/// If the three lengths differ.
pub fn swiglu_clamped(gate: &[f32], up: &[f32], alpha: f32, limit: f32, out: &mut [f32]) {
    assert!(gate.len() == out.len() && up.len() == out.len(), "swiglu_clamped: lengths differ");
    swiglu_clamped_impl(Isa::current(), gate, up, alpha, limit, out)
}

multiversion! {
    fn swiglu_clamped_impl(gate: &[f32], up: &[f32], alpha: f32, limit: f32, out: &mut [f32]) {
        for ((o, &g), &u) in out.iter_mut().zip(gate).zip(up) {
            let x = g.min(limit);
            let y = u.clamp(-limit, limit);
            *o = x / (1.0 + exp(-alpha * x)) * (y + 1.0);
        }
    }
}

/// `out = silu(gate) * up` (the llama feed-forward gate).
///
/// # Panics
/// If the three lengths differ.
pub fn swiglu(gate: &[f32], up: &[f32], out: &mut [f32]) {
    assert!(gate.len() == out.len() && up.len() == out.len(), "swiglu: lengths differ");
    swiglu_impl(Isa::current(), gate, up, out)
}

/// `Σ a[i] b[i]`.
///
/// # Panics
/// If `a` and `b` differ in length.
pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "dot_f32: lengths differ");
    dot_impl(Isa::current(), a, b)
}

/// Defines an element-wise binary kernel and its in-place form.
macro_rules! binary_op {
    ($name:ident, $in_place:ident, $impl:ident, $impl_in_place:ident, $op:tt, $op_assign:tt, $what:literal) => {
        multiversion! {
            fn $impl(a: &[f32], b: &[f32], out: &mut [f32]) {
                for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                    *o = x $op y;
                }
            }
        }
        multiversion! {
            fn $impl_in_place(acc: &mut [f32], b: &[f32]) {
                for (o, &y) in acc.iter_mut().zip(b) {
                    *o $op_assign y;
                }
            }
        }

        #[doc = concat!("`out[i] = a[i] ", stringify!($op), " b[i]` (", $what, ").")]
        ///
        /// # Panics
        /// If the three lengths differ.
        pub fn $name(a: &[f32], b: &[f32], out: &mut [f32]) {
            assert!(a.len() == out.len() && b.len() == out.len(), concat!(stringify!($name), ": lengths differ"));
            $impl(Isa::current(), a, b, out)
        }

        #[doc = concat!("`acc[i] = acc[i] ", stringify!($op), " b[i]` (", $what, ", in place).")]
        ///
        /// # Panics
        /// If the lengths differ.
        pub fn $in_place(acc: &mut [f32], b: &[f32]) {
            assert_eq!(acc.len(), b.len(), concat!(stringify!($in_place), ": lengths differ"));
            $impl_in_place(Isa::current(), acc, b)
        }
    };
}

binary_op!(add, add_in_place, add_impl, add_in_place_impl, +, +=, "residual sums");
binary_op!(mul, mul_in_place, mul_impl, mul_in_place_impl, *, *=, "norm weights, gates");

multiversion! {
    fn scale_impl(x: &[f32], factor: f32, out: &mut [f32]) {
        for (o, &v) in out.iter_mut().zip(x) {
            *o = v * factor;
        }
    }
}

multiversion! {
    fn scale_in_place_impl(x: &mut [f32], factor: f32) {
        for v in x.iter_mut() {
            *v *= factor;
        }
    }
}

/// `out[i] = x[i] * factor`.
///
/// # Panics
/// If `x` and `out` differ in length.
pub fn scale(x: &[f32], factor: f32, out: &mut [f32]) {
    assert_eq!(x.len(), out.len(), "scale: lengths differ");
    scale_impl(Isa::current(), x, factor, out)
}

/// `x[i] *= factor`.
pub fn scale_in_place(x: &mut [f32], factor: f32) {
    scale_in_place_impl(Isa::current(), x, factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_accurate_and_zero_for_minus_infinity() {
        let mut worst = 0.0f64;
        let mut x = -87.0f32;
        while x < 88.0 {
            let want = f64::from(x).exp();
            let rel = ((f64::from(exp(x)) - want) / want).abs();
            worst = worst.max(rel);
            x += 0.0137;
        }
        assert!(worst < 5e-7, "worst relative error {worst}");
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(0.0), 1.0);
    }

    /// `exp` with 2^n from a saturating cast, as it was written first.
    fn exp_by_cast(x: f32) -> f32 {
        let clamped = x.clamp(-87.336_54, 88.3);
        let n = round_small(clamped * std::f32::consts::LOG2_E);
        let e_r = exp_reduced(clamped - n * 0.693_359_4 - n * -2.121_944_4e-4);
        let scale = f32::from_bits(((n as i32 + 127) as u32) << 23);
        if x < -87.336_54 {
            0.0
        } else {
            e_r * scale
        }
    }

    #[test]
    fn exp_takes_two_to_the_n_from_the_rounding_sum_with_the_bits_of_a_cast() {
        // Every 97th f32 of [-100, 100] and the ends of the clamp.
        let hi = 100.0f32.to_bits();
        let negatives = (0..hi).step_by(97).map(|b| f32::from_bits(b | 0x8000_0000));
        let positives = (0..hi).step_by(97).map(f32::from_bits);
        let ends = [-87.336_54, -87.336_55, -87.336_53, 88.3, 88.31, f32::INFINITY, f32::NEG_INFINITY, -0.0, 0.0];
        for x in negatives.chain(positives).chain(ends) {
            assert_eq!(exp(x).to_bits(), exp_by_cast(x).to_bits(), "exp({x})");
        }
        assert!(exp(f32::NAN).is_nan());
    }
}
