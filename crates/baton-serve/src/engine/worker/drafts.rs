//! Drafting with the engine's draft model (`-md`): the sequences of a step
//! that draft do so together, in their slots of the draft model, before the
//! target verifies their drafts in the step (the same tokens as without).

use baton_gen::speculative::{DraftAsk, SpecParams, SpecType, Speculation};

use super::Worker;

impl Worker {
    /// A new sequence's speculation as `spec` says (`None`: it does not
    /// draft): drafts from the model's prediction head when `spec` says so
    /// (`heads.rs`), else from the engine's draft model where it has one,
    /// else n-grams; none where the engine's steps cannot verify drafts.
    pub(super) fn speculation(&mut self, spec: Option<SpecParams>) -> Option<Speculation> {
        let spec = spec.filter(|_| self.verifies_drafts())?;
        match (spec.kind, self.drafter.is_some()) {
            (SpecType::Mtp, _) if spec.draft_max > 0 => self.head_speculation(spec),
            (SpecType::Mtp, _) => None,
            (_, true) => Speculation::new(spec).map(|_| Speculation::with_shared_model(spec)),
            (_, false) => Speculation::new(spec),
        }
    }

    /// Drafts for `asks` (each a running sequence's index, its draft count
    /// and the rows its step carries without them) in one batch of the
    /// draft model, and gives each sequence its drafts. A failed draft
    /// model leaves the steps without drafts (logged).
    pub(super) fn draft_with_model(&mut self, asks: &[(usize, usize, usize)]) {
        let Some(drafter) = self.drafter.as_mut().filter(|_| !asks.is_empty()) else { return };
        let histories: Vec<Vec<u32>> = asks.iter().map(|&(i, _, _)| self.running[i].history().collect()).collect();
        let batch: Vec<DraftAsk<'_>> = asks
            .iter()
            .zip(&histories)
            .map(|(&(i, k, _), history)| DraftAsk { slot: self.running[i].slot, history, k })
            .collect();
        let drafts = drafter.draft_batch(&batch).unwrap_or_else(|e| {
            tracing::warn!("the draft model failed: {e}; these steps verify no drafts");
            vec![Vec::new(); asks.len()]
        });
        for (&(i, _, rows), tokens) in asks.iter().zip(drafts) {
            self.running[i].offer_drafts(tokens, (rows, &self.step_times));
        }
    }
}
