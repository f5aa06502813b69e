//! A paged KV cache whose pool is smaller than every slot's context
//! (`--kv-pool`, `--kv-pool-blocks`): what the worker does when blocks run short.
//!
//! - **Admission waits for blocks.** A request (or a preempted sequence)
//!   is admitted when the pool's free blocks hold the blocks its prompt
//!   needs beyond what it can share (a running sequence's start, or the
//!   free slot's cached prompt it takes) plus one for each running
//!   sequence's next block. Idle slots' cached prompts give their blocks
//!   back first, least recently used first (dropped, not saved to
//!   `--cache-ram`'s host memory, which is where the pool lives already). With nothing running it is
//!   admitted whatever the count (it may fit, or end at the pool's end).
//! - **A step that finds the pool full preempts.** Idle slots' cached
//!   prompts give their blocks back first; then the newest running
//!   sequence not in a step in flight gives back its slot and blocks and
//!   waits at the front of the queue, oldest first. Readmitted, it reads
//!   its prompt and the tokens it had generated again (keys and values
//!   shared with a running sequence or a cached prompt are taken, not
//!   evaluated) and goes on where it stopped: its sampler, constraint and
//!   stream are the ones it had, and batch invariance gives the rows the
//!   bits they had, so its client sees the same tokens after a pause (as
//!   vLLM's recompute preemption; moving its blocks to host memory would
//!   save nothing on the CPU, where the pool is host memory).
//! - **A sequence alone needing more than the pool** ends as at the end of
//!   its context (`length`), or fails with the pool's size named while it
//!   still reads its prompt.
//!
//! So a full pool loses no request and ends every stream.

use std::sync::atomic::Ordering;

use baton_core::graph::ATTENTION_BLOCK as BLOCK;
use baton_model::PoolFull;

use super::super::request::{Event, FinishReason};
use super::super::scope::CacheScope;
use super::seq::Seq;
use super::Worker;

impl Worker {
    /// The blocks `tokens` (a prompt of `scope`) needs free to be admitted,
    /// and the free slot whose cached prompt it would reuse (kept when idle
    /// slots give blocks back); `None` without a paged cache.
    pub(super) fn blocks_to_admit(&self, tokens: &[u32], scope: CacheScope) -> Option<(usize, Option<usize>)> {
        self.model.kv_blocks()?;
        let common = |held: &mut dyn Iterator<Item = u32>| held.zip(tokens).take_while(|(a, b)| a == *b).count();
        let running =
            self.running.iter().filter(|s| s.scope == scope).map(|s| common(&mut s.in_cache())).max().unwrap_or(0);
        let idle = self
            .free_slots
            .iter()
            .filter(|&&slot| self.prefix.scope(slot) == scope)
            .map(|&slot| (slot, common(&mut self.prefix.tokens(slot).iter().copied())))
            .max_by_key(|&(_, len)| len)
            .filter(|&(_, len)| len > 0);
        let shared = running.max(idle.map_or(0, |(_, len)| len));
        let need = tokens.len().div_ceil(BLOCK) - shared / BLOCK + self.running.len();
        Some((need, idle.map(|(slot, _)| slot)))
    }

    /// Whether the pool has room for `tokens` (of `scope`) now, idle
    /// slots giving their blocks back until it has; always with nothing
    /// running or without a paged cache.
    pub(super) fn pool_admits(&mut self, tokens: &[u32], scope: CacheScope) -> bool {
        let need = self.blocks_to_admit(tokens, scope);
        self.pool_has_room(need)
    }

    /// Whether the pool has `need`'s blocks free (a count and the free slot
    /// to keep, from [`blocks_to_admit`](Self::blocks_to_admit)), idle slots
    /// giving their blocks back until it has; always with nothing running
    /// or without a paged cache (`None`).
    pub(super) fn pool_has_room(&mut self, need: Option<(usize, Option<usize>)>) -> bool {
        let Some((need, keep)) = need else { return true };
        loop {
            if self.model.kv_blocks().is_none_or(|b| b.free >= need) {
                return true;
            }
            if !self.give_back_idle(keep) {
                return self.running.is_empty() && self.embeds.is_empty() && self.scores.is_empty();
            }
        }
    }

    /// Gives back the blocks of the least recently used free slot that
    /// holds any (but `keep`); `false` when there is none. Its prompt is
    /// not saved to host memory (`--cache-ram`): a paged pool is host
    /// memory already, and a pool made small to bound memory would only
    /// move the bytes to the host cache.
    fn give_back_idle(&mut self, keep: Option<usize>) -> bool {
        let slot = self
            .free_slots
            .iter()
            .copied()
            .filter(|&slot| Some(slot) != keep && self.model.slot_blocks(slot) > 0)
            .min_by_key(|&slot| self.prefix.last_used(slot));
        let Some(slot) = slot else { return false };
        self.prefix.clear(slot);
        if let Err(e) = self.model.clear_slot(slot) {
            tracing::warn!("giving back an idle slot's blocks failed: {e}");
            return false;
        }
        true
    }

    /// Makes room for a step of `group` that found the pool full: gives
    /// back an idle slot's blocks, or preempts the newest running sequence
    /// not in another group's step in flight, or ends a sequence that
    /// alone needs more than the pool. `false` when nothing can change
    /// (the step's sequences then fail with `full`).
    pub(super) fn make_room(&mut self, full: &PoolFull) -> bool {
        if self.give_back_idle(None) {
            return true;
        }
        let flying: Vec<u64> = self.flights.iter().flatten().flat_map(|f| f.picked.iter().map(|&(id, _)| id)).collect();
        let newest = self.running.iter().enumerate().filter(|(_, s)| !flying.contains(&s.id)).max_by_key(|(_, s)| s.id);
        let Some((i, _)) = newest else { return false };
        let alone = self.running.len() == 1 && flying.is_empty() && self.embeds.is_empty() && self.scores.is_empty();
        if alone {
            self.end_for_pool(i, full);
        } else {
            self.preempt(i);
        }
        true
    }

    /// Ends running sequence `i`, which alone needs more blocks than the
    /// pool holds: `length` once it generates (as at the end of its
    /// context), a failure naming the pool while it reads its prompt.
    fn end_for_pool(&mut self, i: usize, full: &PoolFull) {
        let seq = self.running.remove(i);
        let end = match seq.prefilling() {
            true => Event::Failed(format!(
                "the prompt needs more KV blocks than the pool holds ({full}); serve with a larger --kv-pool"
            )),
            false => seq.finish(FinishReason::Length),
        };
        self.shared.count_end(&end);
        match end {
            Event::Failed(_) => self.prefix.clear(seq.slot),
            _ => self.prefix.store(seq.slot, seq.scope, seq.in_cache()),
        }
        self.free_slots.push(seq.slot);
        self.publish();
        let _ = seq.events.send(end);
    }

    /// Preempts running sequence `i`: its slot and blocks are given back
    /// and it waits, oldest first, to read its history again.
    fn preempt(&mut self, i: usize) {
        let mut seq = self.running.remove(i);
        self.prefix.clear(seq.slot);
        if let Err(e) = self.model.clear_slot(seq.slot) {
            tracing::warn!("giving back a preempted sequence's blocks failed: {e}");
        }
        self.free_slots.push(seq.slot);
        seq.step.clear();
        self.shared.preemptions.fetch_add(1, Ordering::Relaxed);
        let at = self.preempted.partition_point(|s| s.id < seq.id);
        self.preempted.insert(at, seq);
    }

    /// Readmits preempted sequences, oldest first, while slots and blocks
    /// allow: each takes a slot as a new prompt would (its history, shared
    /// or cached where it can be) and reads the rest again.
    pub(super) fn resume_preempted(&mut self) {
        while !self.free_slots.is_empty() {
            let Some(seq) = self.preempted.front() else { return };
            let (history, scope): (Vec<u32>, _) = (seq.history().collect(), seq.scope);
            if !self.pool_admits(&history, scope) {
                return;
            }
            let Some((slot, cached)) = self.take_slot(&history, scope) else { return };
            let mut seq: Seq = self.preempted.pop_front().expect("the front checked above");
            seq.replayed = seq.sent.len();
            seq.prompt = history;
            (seq.slot, seq.read, seq.past) = (slot, cached, cached);
            seq.group = self.least_loaded_group();
            self.running.push(seq);
        }
    }

    /// Fails the preempted sequences with `why`.
    pub(super) fn fail_preempted(&mut self, why: &str) {
        for seq in self.preempted.drain(..) {
            self.shared.ended_failed.fetch_add(1, Ordering::Relaxed);
            let _ = seq.events.send(Event::Failed(why.to_string()));
        }
    }
}
