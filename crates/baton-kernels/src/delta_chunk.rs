//! The gated delta rule over a chunk of one sequence's tokens at once (the
//! WY / UT form of Gated DeltaNet's prefill), for one head.
//!
//! The recurrence, per token `t` with decay `a_t = exp(g_t)`, is
//! `S_t = a_t S_{t-1} + d_t k_tᵀ` with `d_t = β_t (v_t − a_t S_{t-1} k_t)`
//! and `o_t = scale · S_t q_t` ([`delta_rule_step`]). Over a chunk starting
//! from `S_0`, with `γ_t = a_1 ⋯ a_t`, it unrolls to
//!
//! - `d_t + β_t Σ_{i<t} (γ_t / γ_i) (k_t · k_i) d_i = β_t (v_t − γ_t S_0 k_t)`,
//!   a unit lower-triangular system solved by forward substitution;
//! - `o_t = scale · (γ_t S_0 q_t + Σ_{i≤t} (γ_t / γ_i) (q_t · k_i) d_i)`;
//! - `S_C = γ_C S_0 + Σ_i (γ_C / γ_i) d_i k_iᵀ`,
//!
//! so the state is read twice and written once per chunk instead of twice
//! per token, and the work is dot products and row updates over whole
//! chunks. The ratios `γ_t / γ_i` are taken as `exp(G_t − G_i)` of the
//! cumulative log decays (never above 1 for `i ≤ t` when every `g ≤ 0`).
//! The results agree with the step-by-step form to float rounding, not bit
//! for bit: a caller that promises bit-identical results across prompt
//! splits must not use it (see `Op::GatedDeltaNet`'s `chunk`).
//!
//! [`delta_rule_step`]: crate::recurrent::delta_rule_step

use crate::isa::{multiversion, Isa};
use crate::ops::exp;
use crate::recurrent::{lanes_sum, LANES};

/// Scratch of [`delta_rule_chunk`], kept between calls so a prompt's chunks
/// allocate once.
#[derive(Debug, Default)]
pub struct ChunkScratch {
    /// Cumulative log decays (`C`).
    decay: Vec<f32>,
    /// `k_t · k_i` and `q_t · k_i` for `i ≤ t` (`C × C` each).
    kk: Vec<f32>,
    qk: Vec<f32>,
    /// `S_0 k_t` and `S_0 q_t` (`C × Dv` each).
    sk: Vec<f32>,
    sq: Vec<f32>,
    /// The corrections `d_t` (`C × Dv`).
    d: Vec<f32>,
}

/// One head's chunk of `C` tokens: `state` is `Dv` rows of `Dk` (updated in
/// place to the state after the chunk); `q` and `k` are `C × Dk`, `v` and
/// `out` `C × Dv`, `g` (log decays) and `beta` `C` long, all row-major and
/// contiguous. An empty chunk (`g` empty) changes nothing.
///
/// # Panics
/// If the lengths do not fit together.
pub fn delta_rule_chunk(
    state: &mut [f32],
    (q, k, v): (&[f32], &[f32], &[f32]),
    (g, beta): (&[f32], &[f32]),
    scale: f32,
    out: &mut [f32],
    scratch: &mut ChunkScratch,
) {
    let c = g.len();
    let dk = k.len().checked_div(c).unwrap_or(0);
    let dv = v.len().checked_div(c).unwrap_or(0);
    assert!(
        beta.len() == c && q.len() == c * dk && k.len() == c * dk && v.len() == c * dv && out.len() == c * dv,
        "delta_rule_chunk: token lengths"
    );
    if c == 0 {
        return;
    }
    assert_eq!(state.len(), dv * dk, "delta_rule_chunk: the state is Dv × Dk");
    scratch.decay.resize(c, 0.0);
    for (e, s) in [&mut scratch.kk, &mut scratch.qk].into_iter().zip([c * c, c * c]) {
        e.resize(s, 0.0);
    }
    for e in [&mut scratch.sk, &mut scratch.sq, &mut scratch.d] {
        e.resize(c * dv, 0.0);
    }
    chunk_impl(Isa::current(), state, (q, k, v), (g, beta), scale, out, scratch, (c, dk, dv));
}

multiversion! {
    #[allow(clippy::too_many_arguments)]
    fn chunk_impl(
        state: &mut [f32],
        qkv: (&[f32], &[f32], &[f32]),
        gates: (&[f32], &[f32]),
        scale: f32,
        out: &mut [f32],
        scratch: &mut ChunkScratch,
        dims: (usize, usize, usize),
    ) {
        let ((q, k, v), (g, beta), (c, dk, dv)) = (qkv, gates, dims);
        let ChunkScratch { decay, kk, qk, sk, sq, d } = scratch;
        let mut total = 0.0f32;
        for (cum, &g) in decay.iter_mut().zip(g) {
            total += g;
            *cum = total;
        }
        // `k_t · k_i` and `q_t · k_i` for `t ≥ i`, a key against 4 tokens at a time.
        for i in 0..c {
            let ki = row(k, i, dk);
            let mut t = i;
            while t + TOKENS <= c {
                let (kks, qks) = dots_against(ki, &k[t * dk..(t + TOKENS) * dk], &q[t * dk..(t + TOKENS) * dk]);
                for n in 0..TOKENS {
                    kk[(t + n) * c + i] = kks[n];
                    qk[(t + n) * c + i] = qks[n];
                }
                t += TOKENS;
            }
            for t in t..c {
                kk[t * c + i] = dot(row(k, t, dk), ki);
                qk[t * c + i] = dot(row(q, t, dk), ki);
            }
        }
        // The decay from token i to token t folded into both.
        for t in 0..c {
            for i in 0..=t {
                let e = exp(decay[t] - decay[i]);
                kk[t * c + i] *= e;
                qk[t * c + i] *= e;
            }
        }
        // `S_0 k_t` and `S_0 q_t`: a state row against 4 tokens at a time,
        // eight independent chains of sums.
        for (j, s) in state.chunks_exact(dk).enumerate() {
            let mut t = 0;
            while t + TOKENS <= c {
                let (ks, qs) = dots_against(s, &k[t * dk..(t + TOKENS) * dk], &q[t * dk..(t + TOKENS) * dk]);
                for i in 0..TOKENS {
                    sk[(t + i) * dv + j] = ks[i];
                    sq[(t + i) * dv + j] = qs[i];
                }
                t += TOKENS;
            }
            for t in t..c {
                sk[t * dv + j] = dot(s, row(k, t, dk));
                sq[t * dv + j] = dot(s, row(q, t, dk));
            }
        }
        // Forward substitution for the corrections, then the outputs.
        for t in 0..c {
            let gamma = decay[t].exp();
            let (done, rest) = d.split_at_mut(t * dv);
            let dt = &mut rest[..dv];
            for ((dt, &v), &u) in dt.iter_mut().zip(row(v, t, dv)).zip(row(sk, t, dv)) {
                *dt = v - gamma * u;
            }
            for i in 0..t {
                let w = kk[t * c + i];
                for (dt, &di) in dt.iter_mut().zip(row(done, i, dv)) {
                    *dt -= w * di;
                }
            }
            dt.iter_mut().for_each(|x| *x *= beta[t]);
            let o = &mut out[t * dv..(t + 1) * dv];
            for (o, &w) in o.iter_mut().zip(row(sq, t, dv)) {
                *o = gamma * w;
            }
            for i in 0..=t {
                let w = qk[t * c + i];
                for (o, &di) in o.iter_mut().zip(row(d, i, dv)) {
                    *o += w * di;
                }
            }
            o.iter_mut().for_each(|x| *x *= scale);
        }
        // The state after the chunk.
        let last = decay[c - 1];
        let gamma = last.exp();
        for (j, s) in state.chunks_exact_mut(dk).enumerate() {
            s.iter_mut().for_each(|x| *x *= gamma);
            for i in 0..c {
                let w = (last - decay[i]).exp() * d[i * dv + j];
                for (s, &ki) in s.iter_mut().zip(row(k, i, dk)) {
                    *s += w * ki;
                }
            }
        }
    }
}

/// Tokens whose dot products with a state row are taken together.
const TOKENS: usize = 4;

/// `s · k_i` and `s · q_i` for the [`TOKENS`] rows of `k` and `q`, each
/// summed over lanes as [`dot`] sums it (the same bits).
#[inline(always)]
fn dots_against(s: &[f32], k: &[f32], q: &[f32]) -> ([f32; TOKENS], [f32; TOKENS]) {
    let n = s.len();
    let body = n / LANES * LANES;
    let mut ak = [[0.0f32; LANES]; TOKENS];
    let mut aq = [[0.0f32; LANES]; TOKENS];
    for c in (0..body).step_by(LANES) {
        let x = &s[c..c + LANES];
        for i in 0..TOKENS {
            let (kk, qq) = (&k[i * n + c..i * n + c + LANES], &q[i * n + c..i * n + c + LANES]);
            for l in 0..LANES {
                ak[i][l] += x[l] * kk[l];
                aq[i][l] += x[l] * qq[l];
            }
        }
    }
    for i in 0..TOKENS {
        for (l, e) in (body..n).enumerate() {
            ak[i][l] += s[e] * k[i * n + e];
            aq[i][l] += s[e] * q[i * n + e];
        }
    }
    (std::array::from_fn(|i| lanes_sum(&ak[i])), std::array::from_fn(|i| lanes_sum(&aq[i])))
}

/// Row `t` of a row-major matrix of rows of `n`.
#[inline(always)]
fn row(m: &[f32], t: usize, n: usize) -> &[f32] {
    &m[t * n..(t + 1) * n]
}

/// `a · b` over [`LANES`] lanes (element `i` in lane `i mod LANES`), the
/// lanes added pairwise at the end ([`lanes_sum`]).
#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; LANES];
    let mut ca = a.chunks_exact(LANES);
    let mut cb = b.chunks_exact(LANES);
    for (x, y) in ca.by_ref().zip(cb.by_ref()) {
        for l in 0..LANES {
            acc[l] += x[l] * y[l];
        }
    }
    for (l, (x, y)) in ca.remainder().iter().zip(cb.remainder()).enumerate() {
        acc[l] += x * y;
    }
    lanes_sum(&acc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recurrent::delta_rule_step;

    /// Inputs of `c` tokens as Gated DeltaNet makes them: unit keys and
    /// queries, decays below 1, betas in (0, 1).
    fn tokens(c: usize, dk: usize, dv: usize, seed: f32) -> [Vec<f32>; 5] {
        let r = |i: usize, s: f32| ((i as f32 * 0.37 + s).sin()) * 0.5;
        let unit = |s: f32| -> Vec<f32> {
            (0..c)
                .flat_map(|t| {
                    let row: Vec<f32> = (0..dk).map(|i| r(t * dk + i, s)).collect();
                    let n = row.iter().map(|x| x * x).sum::<f32>().sqrt();
                    row.into_iter().map(move |x| x / n)
                })
                .collect()
        };
        let v = (0..c * dv).map(|i| r(i, seed + 3.0)).collect();
        let g = (0..c).map(|t| -0.05 - 0.3 * r(t, seed + 4.0).abs()).collect();
        let beta = (0..c).map(|t| 0.2 + r(t, seed + 5.0).abs()).collect();
        [unit(seed + 1.0), unit(seed + 2.0), v, g, beta]
    }

    #[test]
    fn a_chunk_agrees_with_the_token_by_token_rule() {
        for (c, dk, dv) in [(1, 8, 4), (5, 37, 5), (64, 128, 128), (33, 64, 16)] {
            let [q, k, v, g, beta] = tokens(c, dk, dv, c as f32);
            let start: Vec<f32> = (0..dv * dk).map(|i| ((i as f32) * 0.11).cos() * 0.3).collect();
            let (mut seq_state, mut chunk_state) = (start.clone(), start);
            let mut want = vec![0.0f32; c * dv];
            for t in 0..c {
                let (qt, kt) = (&q[t * dk..][..dk], &k[t * dk..][..dk]);
                let o = &mut want[t * dv..][..dv];
                delta_rule_step(&mut seq_state, (qt, kt, &v[t * dv..][..dv]), g[t].exp(), beta[t], 0.25, o);
            }
            let mut got = vec![0.0f32; c * dv];
            let mut scratch = ChunkScratch::default();
            delta_rule_chunk(&mut chunk_state, (&q, &k, &v), (&g, &beta), 0.25, &mut got, &mut scratch);
            let close = |a: &[f32], b: &[f32], what: &str| {
                let scale = b.iter().map(|x| x.abs()).fold(0.0f32, f32::max).max(1e-3);
                for (i, (x, y)) in a.iter().zip(b).enumerate() {
                    assert!(
                        (x - y).abs() <= 2e-5 * scale,
                        "{what} {i} (C {c}, Dk {dk}, Dv {dv}): chunk {x}, steps {y}"
                    );
                }
            };
            close(&got, &want, "output");
            close(&chunk_state, &seq_state, "state");
        }
    }

    #[test]
    fn an_empty_chunk_changes_nothing() {
        let mut state = vec![1.0f32; 6];
        delta_rule_chunk(&mut state, (&[], &[], &[]), (&[], &[]), 1.0, &mut [], &mut ChunkScratch::default());
        assert_eq!(state, [1.0; 6]);
    }
}
