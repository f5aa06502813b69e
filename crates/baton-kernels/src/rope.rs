//! Rotary position embedding (RoPE) applied to one attention head in place.
//!
//! Pair `i` (for `i < rope_dims / 2`) is rotated by
//! `theta_i = position * freq_scale * freq_base^(-2i / rope_dims)`:
//! `(a, b) -> (a cos - b sin, a sin + b cos)`. The angles are computed in f64.
//! All heads of a token share the angles, so [`RopeAngles`] computes them once
//! per position and applies them to every head.

use baton_core::graph::Yarn;

use crate::isa::{multiversion, Isa};

/// Which elements form the rotated pairs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RopeMode {
    /// Adjacent elements `(2i, 2i + 1)` (llama's GGUF layout).
    Normal,
    /// The two halves `(i, i + rope_dims / 2)` (GPT-NeoX, Qwen, ...).
    NeoX,
}

/// The cosines and sines of one position, reusable across heads and tokens.
#[derive(Clone, Debug, Default)]
pub struct RopeAngles {
    cos: Vec<f32>,
    sin: Vec<f32>,
}

impl RopeAngles {
    /// Empty angles; [`RopeAngles::compute`] fills them.
    pub fn new() -> Self {
        RopeAngles::default()
    }

    /// Computes the angles of `position` (reusing this value's memory).
    ///
    /// # Panics
    /// If `rope_dims` is odd (a caller bug).
    pub fn compute(&mut self, position: usize, rope_dims: usize, freq_base: f32, freq_scale: f32) {
        self.compute_yarn(position, rope_dims, (freq_base, freq_scale), None);
    }

    /// As [`compute`](Self::compute), with YaRN's blend of interpolated
    /// and extrapolated angles and its magnitude factor where `yarn` is
    /// given (see [`Yarn`]).
    ///
    /// # Panics
    /// If `rope_dims` is odd (a caller bug).
    pub fn compute_yarn(&mut self, position: usize, rope_dims: usize, (base, scale): (f32, f32), yarn: Option<&Yarn>) {
        assert!(rope_dims.is_multiple_of(2), "rope_dims must be even, got {rope_dims}");
        let pairs = rope_dims / 2;
        self.cos.clear();
        self.sin.clear();
        let (base, scale) = (f64::from(base), f64::from(scale));
        // The ramp's pairs and the magnitude factor (ggml's
        // `ggml_rope_yarn_corr_dims` and `rope_yarn`).
        let ramp = yarn.map(|y| {
            let dims = rope_dims as f64;
            let corr = |rotations: f32| {
                dims * (y.orig_context as f64 / (f64::from(rotations) * 2.0 * std::f64::consts::PI)).ln()
                    / (2.0 * base.ln())
            };
            let low = corr(y.beta_fast).floor().max(0.0);
            let high = corr(y.beta_slow).ceil().min(dims - 1.0);
            let mscale = f64::from(y.attn_factor) * (1.0 + 0.1 * (1.0 / scale).ln());
            (low, high, f64::from(y.ext_factor), mscale)
        });
        for i in 0..pairs {
            let extrapolated = position as f64 * base.powf(-2.0 * i as f64 / rope_dims as f64);
            let interpolated = scale * extrapolated;
            let (angle, magnitude) = match ramp {
                Some((low, high, ext, mscale)) => {
                    let y = (i as f64 - low) / (high - low).max(0.001);
                    let mix = (1.0 - y.clamp(0.0, 1.0)) * ext;
                    (interpolated * (1.0 - mix) + extrapolated * mix, mscale)
                }
                None => (interpolated, 1.0),
            };
            let (sin, cos) = angle.sin_cos();
            self.cos.push((cos * magnitude) as f32);
            self.sin.push((sin * magnitude) as f32);
        }
    }

    /// The rotated dimensions these angles cover.
    pub fn rope_dims(&self) -> usize {
        self.cos.len() * 2
    }

    /// Rotates the first `rope_dims()` elements of `head`; the rest are left alone.
    ///
    /// # Panics
    /// If `head` is shorter than `rope_dims()`.
    pub fn apply(&self, head: &mut [f32], mode: RopeMode) {
        self.apply_pairs(head, mode, self.cos.len());
    }

    /// Rotates only the first `pairs` pairs of the `rope_dims()` elements
    /// of `head` (paired as `mode` says over all `rope_dims()`); the other
    /// pairs and the rest are left alone.
    ///
    /// # Panics
    /// If `head` is shorter than `rope_dims()` or `pairs` is more than
    /// `rope_dims() / 2`.
    pub fn apply_pairs(&self, head: &mut [f32], mode: RopeMode, pairs: usize) {
        let dims = self.rope_dims();
        assert!(head.len() >= dims, "head of {} elements is shorter than rope_dims {dims}", head.len());
        assert!(pairs <= dims / 2, "{pairs} pairs of rope_dims {dims}");
        let isa = Isa::current();
        let (cos, sin) = (&self.cos[..pairs], &self.sin[..pairs]);
        match mode {
            RopeMode::Normal => rotate_adjacent(isa, &mut head[..2 * pairs], cos, sin),
            RopeMode::NeoX => {
                let (first, second) = head[..dims].split_at_mut(dims / 2);
                rotate_halves(isa, &mut first[..pairs], &mut second[..pairs], cos, sin);
            }
        }
    }
}

multiversion! {
    fn rotate_adjacent(head: &mut [f32], cos: &[f32], sin: &[f32]) {
        for ((pair, &c), &s) in head.chunks_exact_mut(2).zip(cos).zip(sin) {
            let (a, b) = (pair[0], pair[1]);
            pair[0] = a * c - b * s;
            pair[1] = a * s + b * c;
        }
    }
}

multiversion! {
    fn rotate_halves(first: &mut [f32], second: &mut [f32], cos: &[f32], sin: &[f32]) {
        for (((a, b), &c), &s) in first.iter_mut().zip(second.iter_mut()).zip(cos).zip(sin) {
            let (x, y) = (*a, *b);
            *a = x * c - y * s;
            *b = x * s + y * c;
        }
    }
}

/// Applies RoPE to one head at `position` (computing the angles on the way;
/// use [`RopeAngles`] to share them across heads).
///
/// # Panics
/// If `rope_dims` is odd or larger than `head.len()` (caller bugs).
pub fn rope_in_place(
    head: &mut [f32],
    position: usize,
    rope_dims: usize,
    freq_base: f32,
    freq_scale: f32,
    mode: RopeMode,
) {
    assert!(rope_dims.is_multiple_of(2), "rope_dims must be even, got {rope_dims}");
    assert!(head.len() >= rope_dims, "head of {} elements is shorter than rope_dims {rope_dims}", head.len());
    let pairs = rope_dims / 2;
    let base_angle = position as f64 * f64::from(freq_scale);
    for i in 0..pairs {
        let inv_freq = f64::from(freq_base).powf(-2.0 * i as f64 / rope_dims as f64);
        let (sin, cos) = (base_angle * inv_freq).sin_cos();
        let (sin, cos) = (sin as f32, cos as f32);
        let (ia, ib) = match mode {
            RopeMode::Normal => (2 * i, 2 * i + 1),
            RopeMode::NeoX => (i, i + pairs),
        };
        let (a, b) = (head[ia], head[ib]);
        head[ia] = a * cos - b * sin;
        head[ib] = a * sin + b * cos;
    }
}
