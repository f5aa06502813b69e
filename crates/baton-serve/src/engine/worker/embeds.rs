//! Embeddings carried by the decode steps: an embedding's text takes a
//! free slot and its tokens ride in the steps' rows beside the running
//! sequences (within the prefill budget, a chunk per step), with their
//! final hidden states an output of the step
//! ([`Model::submit_batch_hidden`](baton_model::Model::submit_batch_hidden));
//! once the whole text is read, the states are pooled and sent. Every row
//! is computed as it would be alone, so the generations beside keep their
//! bits and the embedding is the text's alone.

use std::sync::atomic::Ordering;

use super::super::embed_seq::EmbedSeq;
use super::super::passes::PassJob;
use baton_model::BatchTicket;

use super::Worker;

impl Worker {
    /// Gives an embedding's pass a free slot (the caller took it) and makes
    /// it ride the steps; other passes come back.
    pub(super) fn embed_in_steps(&mut self, job: PassJob, slot: usize) -> Result<(), PassJob> {
        let PassJob::Embed { tokens, pooling, scope, reply } = job else { return Err(job) };
        if tokens.is_empty() {
            let _ = reply.send(Err("the text to embed gives no tokens".into()));
            self.free_slots.push(slot);
            return Ok(());
        }
        self.next_id += 1;
        let group = self.least_loaded_group();
        let hidden = Vec::with_capacity(tokens.len() * self.model.config().dim);
        self.embeds.push(EmbedSeq { id: self.next_id, slot, group, tokens, read: 0, pooling, scope, hidden, reply });
        Ok(())
    }

    /// Reads the hidden states of a step's flagged rows (`hidden`, per
    /// `picked` entry; none flagged: none read) and takes the embeddings';
    /// all of them, or `None` when the step failed (its entries failed).
    pub(super) fn read_hidden(
        &mut self,
        ticket: &BatchTicket,
        picked: &[(u64, usize)],
        hidden: &[bool],
    ) -> Option<Vec<f32>> {
        if !hidden.contains(&true) {
            return Some(Vec::new());
        }
        match self.model.batch_hidden(ticket) {
            Ok(states) => {
                self.take_hidden(picked, hidden, &states);
                Some(states)
            }
            Err(e) => {
                self.fail(picked, &format!("the model failed: {e}"));
                None
            }
        }
    }

    /// Takes the hidden states of a step's embedding rows (`states`: the
    /// rows of the `picked` entries that `hidden` flags, in row order);
    /// sends and ends the embeddings whose text is whole. Rows of an
    /// embedding cancelled meanwhile are passed over.
    fn take_hidden(&mut self, picked: &[(u64, usize)], hidden: &[bool], states: &[f32]) {
        let dim = self.model.config().dim;
        let mut rows = states.chunks_exact(dim);
        for (&(id, n), _) in picked.iter().zip(hidden).filter(|(_, &h)| h) {
            let mut embed = self.embeds.iter_mut().find(|e| e.id == id);
            for _ in 0..n {
                if let (Some(row), Some(embed)) = (rows.next(), embed.as_mut()) {
                    embed.hidden.extend_from_slice(row);
                }
            }
            if let Some(embed) = embed {
                embed.read += n;
            }
        }
        let dim = self.model.config().dim;
        let (done, rest): (Vec<_>, Vec<_>) = self.embeds.drain(..).partition(|e| e.read >= e.tokens.len());
        self.embeds = rest;
        for embed in done {
            let result = if embed.hidden.len() == embed.tokens.len() * dim {
                Ok(embed.pooling.pool(&embed.hidden, dim))
            } else {
                Err(format!("{} hidden states for {} tokens", embed.hidden.len() / dim, embed.tokens.len()))
            };
            let _ = embed.reply.send(result);
            // Its slot holds the text's keys and values: a prefix too.
            self.prefix.store(embed.slot, embed.scope, embed.tokens.iter().copied());
            self.free_slots.push(embed.slot);
        }
    }

    /// Fails the embeddings `picked` names (every one when `None`).
    pub(super) fn fail_embeds(&mut self, picked: Option<&[(u64, usize)]>, why: &str) {
        let (hit, rest): (Vec<_>, Vec<_>) =
            self.embeds.drain(..).partition(|e| picked.is_none_or(|p| p.iter().any(|&(id, _)| id == e.id)));
        self.embeds = rest;
        for embed in hit {
            let _ = embed.reply.send(Err(why.to_string()));
            self.prefix.clear(embed.slot);
            self.free_slots.push(embed.slot);
        }
    }

    /// Drops the embeddings whose client went away.
    pub(super) fn drop_cancelled_embeds(&mut self) {
        let (gone, rest): (Vec<_>, Vec<_>) = self.embeds.drain(..).partition(|e| e.reply.is_closed());
        self.embeds = rest;
        for embed in gone {
            self.shared.cancelled.fetch_add(1, Ordering::Relaxed);
            self.prefix.clear(embed.slot);
            self.free_slots.push(embed.slot);
        }
    }
}
