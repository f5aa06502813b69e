//! A token's log-probability and the most likely alternatives, from one
//! row of logits (what generations and prompt scores send).

/// A token's log-probability and the most likely alternatives, from the
/// model's log-softmax over the whole vocabulary before any sampling
/// filter or penalty.
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

#[cfg(test)]
mod tests {
    use super::*;

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
