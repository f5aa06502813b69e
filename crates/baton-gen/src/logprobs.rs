//! A token's log-probability and the most likely alternatives, from one
//! row of logits (what generations and prompt scores send), or from the
//! candidates a draw drew from.

use crate::sampling::Candidate;

/// A token's log-probability and the most likely alternatives, from the
/// model's log-softmax over the whole vocabulary before any sampling
/// filter or penalty ([`token_logprobs`]), or from the distribution a draw
/// drew from ([`candidate_logprobs`]).
#[derive(Clone, Debug, PartialEq)]
pub struct TokenLogprobs {
    /// The token drawn.
    pub token: u32,
    /// Its log-probability.
    pub logprob: f32,
    /// The most likely tokens with their log-probabilities, most likely
    /// first (ties: lower id first).
    pub top: Vec<(u32, f32)>,
}

/// `token`'s log-probability under `logits` and the `top` most likely
/// tokens': `logits[i] - max - ln Σ exp(logits[j] - max)`, the sum in f64.
/// The alternatives are kept in a sorted list of at most `top` entries as
/// the logits go by (`top` is at most 20).
pub fn token_logprobs(logits: &[f32], token: u32, top: usize) -> TokenLogprobs {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = logits.iter().map(|&l| f64::from(l - max).exp()).sum();
    let norm = f64::from(max) + sum.ln();
    let logprob = |l: f32| (f64::from(l) - norm) as f32;
    // Most likely first; ties: lower id first (the earlier one stays ahead).
    let mut best: Vec<(u32, f32)> = Vec::with_capacity(top + 1);
    for (id, &l) in logits.iter().enumerate() {
        if top == 0 || best.len() == top && best.last().is_some_and(|&(_, worst)| l <= worst) {
            continue;
        }
        let at = best.partition_point(|&(_, b)| b >= l);
        best.insert(at, (id as u32, l));
        best.truncate(top);
    }
    let chosen = logits.get(token as usize).copied().unwrap_or(f32::NEG_INFINITY);
    TokenLogprobs { token, logprob: logprob(chosen), top: best.into_iter().map(|(id, l)| (id, logprob(l))).collect() }
}

/// `token`'s log-probability and the `top` most likely tokens' in the
/// distribution a draw drew from: the `candidates` that survived the
/// sampler's filters ([`Sampler::candidates`](crate::Sampler::candidates)),
/// their logits divided by `temperature` and softmaxed (llama-server's
/// `post_sampling_probs`). At temperature 0 (greedy) the best candidate
/// has it all. Tokens without a chance are left out of `top`; a token that
/// is not a candidate has `-inf`.
pub fn candidate_logprobs(candidates: &[Candidate], temperature: f32, token: u32, top: usize) -> TokenLogprobs {
    let max = candidates.iter().map(|c| c.logit).fold(f32::NEG_INFINITY, f32::max);
    let t = f64::from(temperature);
    let weight = |c: &Candidate| match t > 0.0 {
        true => ((f64::from(c.logit) - f64::from(max)) / t).exp(),
        false => f64::from(u8::from(c.logit == max)),
    };
    let total: f64 = candidates.iter().map(weight).sum();
    let logprob = |w: f64| (w / total).ln() as f32;
    let mut ranked: Vec<(u32, f64)> =
        candidates.iter().map(|c| (c.id, weight(c))).filter(|&(_, w)| w > 0.0 && w.is_finite()).collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let chosen = ranked.iter().find(|&&(id, _)| id == token).map_or(f32::NEG_INFINITY, |&(_, w)| logprob(w));
    let top = ranked.into_iter().take(top).map(|(id, w)| (id, logprob(w))).collect();
    TokenLogprobs { token, logprob: chosen, top }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidate_logprobs_are_the_tempered_softmax_of_the_survivors() {
        let candidates =
            [(3, 2.0f32), (7, 1.0), (1, 2.0), (9, f32::NEG_INFINITY)].map(|(id, logit)| Candidate { id, logit });
        let lp = candidate_logprobs(&candidates, 0.5, 7, 10);
        let ids: Vec<u32> = lp.top.iter().map(|&(id, _)| id).collect();
        assert_eq!(ids, [1, 3, 7], "most likely first, ties by id, no chance left out");
        // Weights at temperature 0.5: e^0, e^0, e^-2.
        let total = 2.0 + (-2.0f64).exp();
        assert!((f64::from(lp.logprob) - ((-2.0f64).exp() / total).ln()).abs() < 1e-6, "{lp:?}");
        let sum: f64 = lp.top.iter().map(|&(_, l)| f64::from(l).exp()).sum();
        assert!((sum - 1.0).abs() < 1e-6);
        assert_eq!(candidate_logprobs(&candidates, 0.5, 4, 2).logprob, f32::NEG_INFINITY);
        assert_eq!(candidate_logprobs(&candidates, 0.5, 4, 2).top.len(), 2);
        // Greedy: the best has it all (the first of equal bests by id).
        let greedy = candidate_logprobs(&candidates[..2], 0.0, 3, 5);
        assert_eq!((greedy.logprob, greedy.top), (0.0, vec![(3, 0.0)]));
    }

    #[test]
    fn logprobs_are_the_log_softmax_and_the_top_ones_sorted() {
        let logits = [1.0f32, 3.0, 3.0, -2.0, 0.5];
        let lp = token_logprobs(&logits, 4, 3);
        let norm = logits.iter().map(|&l| f64::from(l).exp()).sum::<f64>().ln();
        assert!((f64::from(lp.logprob) - (0.5 - norm)).abs() < 1e-6);
        let ids: Vec<u32> = lp.top.iter().map(|&(id, _)| id).collect();
        assert_eq!(ids, [1, 2, 0], "most likely first, ties by id");
        assert!((f64::from(lp.top[2].1) - (1.0 - norm)).abs() < 1e-6);
        let total: f64 = logits.iter().map(|&l| (f64::from(l) - norm).exp()).sum();
        assert!((total - 1.0).abs() < 1e-12);
        assert!(token_logprobs(&logits, 1, 0).top.is_empty());
        assert_eq!(token_logprobs(&logits, 0, 20).top.len(), logits.len());
    }
}
