//! Prompts' scores carried by the decode steps, as embeddings are
//! (`embeds.rs`): a score's text takes a free slot and its tokens ride in
//! the steps' rows beside the running sequences (within the prefill
//! budget, a chunk per step), every one of its rows giving logits
//! ([`Model::submit_batch_rows`](baton_model::Model::submit_batch_rows));
//! each row's entry is taken as the step's logits are read, and once the
//! whole text is read the entries are sent. Every row is computed as it
//! would be alone, so the generations beside keep their bits and the
//! score has the bits of the text scored alone.

use std::sync::atomic::Ordering;

use super::super::passes::PassJob;
use super::super::score_seq::ScoreSeq;
use super::Worker;

impl Worker {
    /// Gives a score's pass a free slot (the caller took it) and makes it
    /// ride the steps; other passes come back.
    pub(super) fn score_in_steps(&mut self, job: PassJob, slot: usize) -> Result<(), PassJob> {
        let PassJob::Score { tokens, top, reply } = job else { return Err(job) };
        if tokens.is_empty() {
            let _ = reply.send(Err("the text to score gives no tokens".into()));
            self.free_slots.push(slot);
            return Ok(());
        }
        self.next_id += 1;
        let group = self.least_loaded_group();
        let entries = Vec::with_capacity(tokens.len() - 1);
        self.scores.push(ScoreSeq { id: self.next_id, slot, group, tokens, read: 0, top, entries, reply });
        Ok(())
    }

    /// Sends and ends the scores whose text is whole.
    pub(super) fn send_scores(&mut self) {
        let (done, rest): (Vec<_>, Vec<_>) = self.scores.drain(..).partition(|s| s.read >= s.tokens.len());
        self.scores = rest;
        for score in done {
            let result = match score.entries.len() + 1 == score.tokens.len() {
                true => Ok(score.entries),
                false => Err(format!("{} entries for {} tokens", score.entries.len(), score.tokens.len())),
            };
            let _ = score.reply.send(result);
            // The slot holds the text's keys and values, but no request's
            // scope: no prefix of any.
            self.prefix.clear(score.slot);
            self.free_slots.push(score.slot);
        }
    }

    /// Fails the scores `picked` names (every one when `None`).
    pub(super) fn fail_scores(&mut self, picked: Option<&[(u64, usize)]>, why: &str) {
        let (hit, rest): (Vec<_>, Vec<_>) =
            self.scores.drain(..).partition(|s| picked.is_none_or(|p| p.iter().any(|&(id, _)| id == s.id)));
        self.scores = rest;
        for score in hit {
            let _ = score.reply.send(Err(why.to_string()));
            self.prefix.clear(score.slot);
            self.free_slots.push(score.slot);
        }
    }

    /// Drops the scores whose client went away.
    pub(super) fn drop_cancelled_scores(&mut self) {
        let (gone, rest): (Vec<_>, Vec<_>) = self.scores.drain(..).partition(|s| s.reply.is_closed());
        self.scores = rest;
        for score in gone {
            self.shared.cancelled.fetch_add(1, Ordering::Relaxed);
            self.prefix.clear(score.slot);
            self.free_slots.push(score.slot);
        }
    }
}
