//! Drafting with a smaller model that shares the target's vocabulary
//! (`-md`): it continues the text greedily for a few tokens, in its own KV
//! cache, which keeps the tokens it has evaluated and evaluates only what
//! changed since (the target's accepted tokens, after its own rejected
//! drafts are cut back).

use baton_model::{Logits, Model, ModelError};

use super::params::SpecError;
use crate::{Sampler, SamplingParams};

/// A draft model and what its cache holds.
pub struct ModelDrafter {
    model: Model,
    /// Tokens whose keys and values its slot 0 holds, in order.
    cached: Vec<u32>,
    /// Picks its drafts: greedy.
    greedy: Sampler,
}

impl std::fmt::Debug for ModelDrafter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelDrafter").field("cached", &self.cached.len()).finish_non_exhaustive()
    }
}

impl ModelDrafter {
    /// `draft` drafting for `target`: an error unless both have the same
    /// vocabulary size and end-of-text token (drafts are token ids).
    pub fn new(draft: Model, target: &Model) -> Result<ModelDrafter, SpecError> {
        let (d, t) = (draft.config().vocab, target.config().vocab);
        let (d_eos, t_eos) = (draft.tokenizer().eos_id(), target.tokenizer().eos_id());
        if d != t || d_eos != t_eos {
            return Err(SpecError::VocabMismatch { target: t, draft: d });
        }
        Ok(ModelDrafter { model: draft, cached: Vec::new(), greedy: Sampler::new(SamplingParams::greedy()) })
    }

    /// The model's bytes of weights a decoded token reads, over the
    /// target's: what a drafted token costs against a target step.
    pub fn cost_against(&self, target: &Model) -> f64 {
        self.model.decode_weight_bytes() as f64 / target.decode_weight_bytes().max(1) as f64
    }

    /// Up to `k` tokens the model gives greedily after `history` (prompt
    /// and tokens so far): it evaluates the tokens of `history` its cache
    /// lacks, then one step per drafted token but the last.
    pub fn draft(&mut self, history: &[u32], k: usize) -> Result<Vec<u32>, ModelError> {
        let Some(last) = history.len().checked_sub(1) else { return Ok(Vec::new()) };
        // Drafts 1..k-1 are evaluated at positions len..len+k-2.
        let k = k.min(self.model.context().saturating_sub(history.len()) + 1);
        if k == 0 {
            return Ok(Vec::new());
        }
        // At least the last token is evaluated again: its logits are needed.
        let keep = self.cached.iter().zip(history).take_while(|(a, b)| a == b).count().min(last);
        let bad_row = |e: crate::SamplingError| ModelError::Input(format!("the draft model's logits: {e}"));
        let mut token = self.greedy.sample(self.model.eval_prompt(&history[keep..], keep)?).map_err(bad_row)?;
        self.cached.truncate(keep);
        self.cached.extend_from_slice(&history[keep..]);
        let mut drafts = vec![token];
        while drafts.len() < k {
            let logits = self.model.eval(&[token], self.cached.len(), Logits::Last)?;
            self.cached.push(token);
            token = self.greedy.sample(logits).map_err(bad_row)?;
            drafts.push(token);
        }
        Ok(drafts)
    }
}
