//! A prompt's score whose tokens ride the decode steps (see the worker's
//! `scores.rs`).

use tokio::sync::oneshot;

use baton_gen::token_logprobs;
use baton_gen::TokenLogprobs;

/// A score on its way through the steps.
pub(super) struct ScoreSeq {
    pub(super) id: u64,
    pub(super) slot: usize,
    pub(super) group: usize,
    pub(super) tokens: Vec<u32>,
    /// Tokens sent in steps so far.
    pub(super) read: usize,
    /// Alternatives per token.
    pub(super) top: usize,
    /// The entries of the tokens after the first, so far.
    pub(super) entries: Vec<TokenLogprobs>,
    pub(super) reply: oneshot::Sender<Result<Vec<TokenLogprobs>, String>>,
}

/// Takes the entries of a step's score rows: `logits` holds the step's
/// rows, one per `picked` entry but `rows_of` rows for the entries
/// `every_logit` flags. Rows of a score cancelled meanwhile are passed
/// over. (A free function: the logits borrow the model.)
pub(super) fn take_score_rows(
    scores: &mut [ScoreSeq],
    picked: &[(u64, usize)],
    every_logit: &[bool],
    logits: &[f32],
    vocab: usize,
) {
    let mut row = 0;
    for (k, &(id, n)) in picked.iter().enumerate() {
        if !every_logit.get(k).copied().unwrap_or(false) {
            row += 1;
            continue;
        }
        if let Some(score) = scores.iter_mut().find(|s| s.id == id) {
            for r in 0..n {
                // Row r predicts the token at position read + r + 1.
                let (Some(&next), Some(row_logits)) =
                    (score.tokens.get(score.read + r + 1), logits.get((row + r) * vocab..(row + r + 1) * vocab))
                else {
                    continue;
                };
                score.entries.push(token_logprobs(row_logits, next, score.top));
            }
            score.read += n;
        }
        row += n;
    }
}
