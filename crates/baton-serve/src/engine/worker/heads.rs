//! Drafting with the model's own prediction head (`--spec-type mtp`): each
//! sequence that drafts with it holds a drafter of the head while it runs
//! (its own keys and values of the head's rows), taken from the engine's
//! pool when it is admitted and given back when it ends. The steps read the
//! final hidden states of the rows of those sequences whose head drafts
//! (with the logits, from the same step), and each sequence's drafter is
//! given the ones of the positions it keeps: the prompt's last chunks, then
//! each step's rows up to its last accepted one. The head drafts as the
//! step is prepared ([`Speculation::draft`]), so the drafts are verified as
//! n-grams' are: the tokens are those without drafts.

use baton_gen::speculative::{SpecParams, SpecType, Speculation, MAX_CATCH_UP};

use super::seq::Seq;
use super::Worker;

impl Worker {
    /// A new sequence's speculation with the head (`spec` of type
    /// [`SpecType::Mtp`]): a drafter of the pool, restarted; `None` when
    /// the engine has no head or one cannot be opened (logged: the
    /// sequence decodes without drafts).
    pub(super) fn head_speculation(&mut self, spec: SpecParams) -> Option<Speculation> {
        match self.heads.as_mut()?.take(&self.model) {
            Ok(drafter) => Some(Speculation::with_mtp(spec, drafter)),
            Err(e) => {
                tracing::warn!("opening the prediction head failed: {e}; this request decodes without drafts");
                None
            }
        }
    }

    /// Where each `picked` entry's hidden rows start among a step's hidden
    /// states (the rows of the entries `hidden` flags, in order): `None`
    /// for an entry not flagged.
    pub(super) fn hidden_starts(picked: &[(u64, usize)], hidden: &[bool]) -> Vec<Option<usize>> {
        let mut next = 0;
        let start = |(&(_, n), &flagged): (&(u64, usize), &bool)| {
            let start = next;
            next += if flagged { n } else { 0 };
            flagged.then_some(start)
        };
        picked.iter().zip(hidden).map(start).collect()
    }

    /// Takes back the head's drafter of a sequence that ends.
    pub(super) fn give_back_head(&mut self, seq: &mut Seq) {
        let (Some(pool), Some(spec)) = (self.heads.as_mut(), seq.spec.as_mut()) else { return };
        if let Some(drafter) = spec.take_mtp() {
            pool.give_back(drafter);
        }
    }
}

impl Seq {
    /// Whether its next step, of `n` rows, reads their hidden states for
    /// its head: while the head drafts, and of a prompt only the chunks
    /// that reach the positions a first draft primes (the last
    /// [`MAX_CATCH_UP`] and the prompt's last).
    pub(super) fn reads_hidden(&self, n: usize) -> bool {
        let wants = self.spec.as_ref().is_some_and(|s| s.params().kind == SpecType::Mtp && s.wants_hidden());
        match self.prefilling() {
            true => wants && self.read + n + MAX_CATCH_UP >= self.prompt.len(),
            false => wants,
        }
    }

    /// Gives its head the hidden states of the positions its step kept:
    /// `rows` (`dim` values a row) from position `from`, up to the
    /// positions it holds now. A failure is logged (drafts only: the
    /// tokens do not depend on them).
    pub(super) fn observe_step(&mut self, from: usize, rows: &[f32], dim: usize) {
        let kept = self.past.saturating_sub(from).min(rows.len() / dim.max(1));
        let Some(spec) = self.spec.as_mut() else { return };
        if let Err(e) = spec.observe_hidden(from, &rows[..kept * dim]) {
            tracing::warn!("the prediction head did not take a step's hidden states: {e}");
        }
    }
}
