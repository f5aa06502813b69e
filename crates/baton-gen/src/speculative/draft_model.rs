//! Drafting with a smaller model that shares the target's vocabulary
//! (`-md`): it continues each sequence's text greedily for a few tokens, in
//! its own KV cache slot, which keeps the tokens it has evaluated and
//! evaluates only what changed since (the target's accepted tokens, after
//! its own rejected drafts are cut back). Several sequences draft together
//! ([`ModelDrafter::draft_batch`]): one step of the draft model per drafted
//! token for all of them, as the server's steps verify them together.
//!
//! A hybrid draft model (Qwen 3.5's small models, drafting for their large
//! ones) folds every position it evaluates into its recurrent state, so its
//! slot cannot just forget rejected drafts: after the step that evaluates
//! a sequence's history, before its drafts, the slot's recurrent state is
//! saved ([`Model::save_checkpoint`]); when the next history leaves the
//! slot's drafts behind, that checkpoint is written back
//! ([`Model::restore_prefix`]; the attention layers' keys and values of
//! those positions never changed) and the slot evaluates from there: the
//! accepted drafts and the target's token in one step.

use baton_model::{Model, ModelError, SavedPrefix, SeqStep};

use super::params::SpecError;
use crate::{Sampler, SamplingParams};

/// A draft model and what each of its slots holds.
pub struct ModelDrafter {
    model: Model,
    /// Per slot, the tokens whose keys and values it holds, in order.
    cached: Vec<Vec<u32>>,
    /// Per slot of a hybrid model, its recurrent state after the history
    /// of its last drafts (before them); `None` for other models.
    checkpoints: Vec<Option<SavedPrefix>>,
    /// Picks its drafts: greedy.
    greedy: Sampler,
}

impl std::fmt::Debug for ModelDrafter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelDrafter").field("slots", &self.cached.len()).finish_non_exhaustive()
    }
}

/// One sequence's share of a batch of drafts.
#[derive(Debug, Clone, Copy)]
pub struct DraftAsk<'a> {
    /// Its slot in the draft model (one per sequence drafting at once).
    pub slot: usize,
    /// Its prompt and tokens so far, the token to evaluate next last.
    pub history: &'a [u32],
    /// Tokens to draft at most.
    pub k: usize,
}

impl ModelDrafter {
    /// `draft` drafting for `target`: an error unless both have the same
    /// vocabulary size and end-of-text token (drafts are token ids). Each
    /// of the draft model's slots drafts for one sequence at a time; a
    /// hybrid model's slots go back to their checkpoints (see the [module
    /// docs](self)).
    pub fn new(draft: Model, target: &Model) -> Result<ModelDrafter, SpecError> {
        let (d, t) = (draft.config().vocab, target.config().vocab);
        let (d_eos, t_eos) = (draft.tokenizer().eos_id(), target.tokenizer().eos_id());
        if d != t || d_eos != t_eos {
            return Err(SpecError::VocabMismatch { target: t, draft: d });
        }
        let (cached, checkpoints) = (vec![Vec::new(); draft.slots()], (0..draft.slots()).map(|_| None).collect());
        Ok(ModelDrafter { model: draft, cached, checkpoints, greedy: Sampler::new(SamplingParams::greedy()) })
    }

    /// The model's bytes of weights a decoded token reads, over the
    /// target's: what a drafted token costs against a target step.
    pub fn cost_against(&self, target: &Model) -> f64 {
        self.model.decode_weight_bytes() as f64 / target.decode_weight_bytes().max(1) as f64
    }

    /// Sequences it can draft for at once (its slots).
    pub fn slots(&self) -> usize {
        self.cached.len()
    }

    /// Up to `k` tokens the model gives greedily after `history` (prompt
    /// and tokens so far), in slot 0.
    pub fn draft(&mut self, history: &[u32], k: usize) -> Result<Vec<u32>, ModelError> {
        Ok(self.draft_batch(&[DraftAsk { slot: 0, history, k }])?.pop().unwrap_or_default())
    }

    /// The drafts of several sequences (each in its own slot), in order:
    /// each slot evaluates the tokens of its history its cache lacks (all
    /// slots in shared steps), then one shared step per drafted token but
    /// the last. A slot outside the model is an error; after a failed step
    /// every slot evaluates its history again next time.
    pub fn draft_batch(&mut self, asks: &[DraftAsk<'_>]) -> Result<Vec<Vec<u32>>, ModelError> {
        let drafted = self.draft_all(asks);
        if drafted.is_err() {
            self.cached.iter_mut().for_each(Vec::clear);
            self.checkpoints.iter_mut().for_each(|c| *c = None);
        }
        drafted
    }

    fn draft_all(&mut self, asks: &[DraftAsk<'_>]) -> Result<Vec<Vec<u32>>, ModelError> {
        let context = self.model.context();
        let mut out = vec![Vec::new(); asks.len()];
        // Per drafting ask: its index, its draft count, its next token.
        let mut live: Vec<(usize, usize)> = Vec::new();
        let mut steps: Vec<(usize, usize, &[u32])> = Vec::new();
        for (i, ask) in asks.iter().enumerate() {
            let Some(last) = ask.history.len().checked_sub(1) else { continue };
            // Drafts 1..k-1 are evaluated at positions len..len+k-2.
            let k = ask.k.min(context.saturating_sub(ask.history.len()) + 1);
            let slots = self.cached.len();
            let Some(cached) = self.cached.get_mut(ask.slot) else {
                return Err(ModelError::Input(format!("draft slot {} (the draft model has {slots})", ask.slot)));
            };
            if k == 0 {
                continue;
            }
            if steps.iter().any(|&(slot, _, _)| slot == ask.slot) {
                return Err(ModelError::Input(format!("two sequences draft in slot {} at once", ask.slot)));
            }
            // At least the last token is evaluated again: its logits are
            // needed.
            let mut keep = cached.iter().zip(ask.history).take_while(|(a, b)| a == b).count().min(last);
            if keep < cached.len() && self.model.config().recurrent.is_some() {
                // Its recurrent state holds every position evaluated: back
                // to the checkpoint before its drafts where the history
                // still begins with it, else from the start.
                keep = match self.checkpoints[ask.slot].take() {
                    Some(saved) if saved.len() <= keep && self.model.restore_prefix(ask.slot, &saved)? => saved.len(),
                    _ => 0,
                };
            }
            cached.truncate(keep);
            cached.extend_from_slice(&ask.history[keep..]);
            live.push((i, k));
            steps.push((ask.slot, keep, &ask.history[keep..]));
        }
        // Per drafting ask: the row its next draft is drawn from.
        let mut rows = self.last_rows(&steps)?;
        if self.model.config().recurrent.is_some() {
            // A slot that evaluates drafts first saves the state it goes
            // back to when they are rejected.
            for &(i, _) in live.iter().filter(|&&(_, k)| k > 1) {
                let slot = asks[i].slot;
                self.checkpoints[slot] = self.model.save_checkpoint(slot)?;
            }
        }
        loop {
            let mut next: Vec<(usize, usize, u32)> = Vec::new();
            for (at, &(i, k)) in live.iter().enumerate() {
                let Some(row) = rows[at].take() else { continue };
                let bad_row = |e: crate::SamplingError| ModelError::Input(format!("the draft model's logits: {e}"));
                let token = self.greedy.sample(&row).map_err(bad_row)?;
                out[i].push(token);
                if out[i].len() < k {
                    next.push((at, asks[i].slot, token));
                }
            }
            if next.is_empty() {
                return Ok(out);
            }
            let tokens: Vec<[u32; 1]> = next.iter().map(|&(_, _, t)| [t]).collect();
            let steps: Vec<(usize, usize, &[u32])> =
                next.iter().zip(&tokens).map(|(&(_, slot, _), t)| (slot, self.cached[slot].len(), &t[..])).collect();
            let fresh = self.last_rows(&steps)?;
            for (&(at, slot, token), row) in next.iter().zip(fresh) {
                self.cached[slot].push(token);
                rows[at] = row;
            }
        }
    }

    /// The logits of the last token of each `(slot, past, tokens)`, the
    /// steps packed into batches of the model's rows at most (a long
    /// history over several).
    fn last_rows(&mut self, steps: &[(usize, usize, &[u32])]) -> Result<Vec<Option<Vec<f32>>>, ModelError> {
        let (batch, vocab) = (self.model.batch().max(1), self.model.config().vocab);
        let mut out = vec![None; steps.len()];
        let mut done = vec![0; steps.len()];
        loop {
            let (mut seqs, mut ends, mut room) = (Vec::new(), Vec::new(), batch);
            for (j, &(slot, past, tokens)) in steps.iter().enumerate() {
                let n = (tokens.len() - done[j]).min(room);
                if n == 0 {
                    continue;
                }
                seqs.push(SeqStep { slot, past: past + done[j], tokens: &tokens[done[j]..done[j] + n] });
                done[j] += n;
                ends.push((j, done[j] == tokens.len()));
                room -= n;
            }
            if seqs.is_empty() {
                return Ok(out);
            }
            let logits = self.model.eval_batch(&seqs)?;
            for (r, &(j, end)) in ends.iter().enumerate() {
                if end {
                    out[j] = Some(logits[r * vocab..(r + 1) * vocab].to_vec());
                }
            }
        }
    }
}
