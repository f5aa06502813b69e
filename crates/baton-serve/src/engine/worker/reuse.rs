//! Where a new sequence's first positions come from besides evaluation:
//! the free slot it takes (the slot cache), a running sequence's slot
//! (a copy on the device), or a prompt saved in host memory before its
//! slot was reused (`--cache-ram`). Each gives the bits an evaluation
//! would, so the longest wins. Each source gives only what a request of
//! the same [`CacheScope`] evaluated.

use super::super::scope::CacheScope;
use super::Worker;

/// Fewest positions worth copying from a running sequence or host memory
/// rather than evaluating (a copy is a few hundred small device copies).
const MIN_COPY: usize = 4;

/// Fewest positions a waiting request must share with a running
/// sequence's prompt to wait for it to evaluate them rather than evaluate
/// them too (one block of a paged cache).
const WAIT_FOR_SHARED: usize = 64;

impl Worker {
    /// Takes the free slot `prompt` (of `scope`) should start in (the one
    /// holding the longest start of it) and gives it the positions it can
    /// without evaluating them: returns the slot and how many it holds.
    /// `None` when no slot is free.
    pub(super) fn take_slot(&mut self, prompt: &[u32], scope: CacheScope) -> Option<(usize, usize)> {
        let model = &self.model;
        let reuse = self.options.prefix_cache;
        let resumable = |slot: usize, past: usize| reuse && model.resumable(slot, past);
        let (at, cached) = self.prefix.pick(&self.free_slots, scope, prompt, resumable)?;
        let (at, cached) = self.share_from_idle(at, cached, prompt, scope).unwrap_or((at, cached));
        let slot = self.free_slots.swap_remove(at);
        let cached = self.resume_at_checkpoint(slot, cached);
        let cached = if reuse { self.reuse_prefix(prompt, scope, slot, cached) } else { cached };
        Some((slot, cached))
    }

    /// The positions of `prompt` (of `scope`) slot `slot` starts with,
    /// from the best source: `held` (what the slot holds of it), a running
    /// sequence of the scope, or host memory. Saves what the slot held
    /// first when `prompt` does not continue it.
    pub(super) fn reuse_prefix(&mut self, prompt: &[u32], scope: CacheScope, slot: usize, held: usize) -> usize {
        self.save_to_ram(slot, scope, prompt);
        let copied = self.copy_from_running(prompt, scope, slot, held);
        let have = copied.unwrap_or(held).max(held);
        self.restore_from_ram(prompt, scope, slot, have).unwrap_or(have)
    }

    /// Where copying a prefix between slots is a share of blocks that is
    /// always served: a paged cache, in one process, without
    /// sliding-window rings or recurrent state (whose copies depend on how
    /// far the source has gone).
    fn shares_blocks(&self) -> bool {
        let config = self.model.config();
        let rings = (0..config.layers).any(|l| config.layer_attention(l).window.is_some());
        self.options.prefix_cache
            && self.model.kv_blocks().is_some()
            && self.model.placed().holds_slots_whole()
            && config.recurrent.is_none()
            && !rings
    }

    /// When the free slot `free[at]` holds `cached` positions of `prompt`
    /// and more after them (a conversation's other branch, a finished
    /// answer), taking it would drop that tail; with shared blocks the
    /// prompt takes the least recently used other free slot instead (when
    /// it is empty or staler than this one) and shares the `cached`
    /// positions from it, so both stay cached. Returns the slot taken (an
    /// index into `free`) and the positions it holds.
    fn share_from_idle(
        &mut self,
        at: usize,
        cached: usize,
        prompt: &[u32],
        scope: CacheScope,
    ) -> Option<(usize, usize)> {
        let from = self.free_slots[at];
        if cached < MIN_COPY || self.prefix.tokens(from).len() <= cached || !self.shares_blocks() {
            return None;
        }
        let (victim, to) = self
            .free_slots
            .iter()
            .copied()
            .enumerate()
            .filter(|&(i, _)| i != at)
            .min_by_key(|&(_, slot)| (!self.prefix.tokens(slot).is_empty(), self.prefix.last_used(slot)))?;
        if !self.prefix.tokens(to).is_empty() && self.prefix.last_used(to) > self.prefix.last_used(from) {
            return None;
        }
        let owner = self.prefix.scope(to);
        self.save_to_ram(to, owner, prompt);
        match self.model.copy_prefix(from, to, cached) {
            Ok(true) => {
                self.prefix.store(to, scope, prompt[..cached].iter().copied());
                Some((victim, cached))
            }
            Ok(false) => None,
            Err(e) => {
                tracing::warn!("sharing an idle slot's prefix failed: {e}");
                None
            }
        }
    }

    /// Whether the waiting `prompt` (of `scope`) should wait for a running
    /// sequence still reading a prompt that starts the same way: once that
    /// one has evaluated the shared start, this one takes it from its
    /// blocks (shared, not evaluated again nor held twice) instead of
    /// evaluating it beside it. Only where such a copy is a share of blocks
    /// ([`shares_blocks`](Self::shares_blocks)).
    pub(super) fn waits_for_shared_prompt(&self, prompt: &[u32], scope: CacheScope) -> bool {
        if !self.shares_blocks() {
            return false;
        }
        self.running.iter().filter(|s| s.scope == scope && s.prefilling()).any(|s| {
            let common = s.prompt.iter().zip(prompt).take_while(|(a, b)| a == b).count();
            let common = common.min(prompt.len().saturating_sub(1));
            common >= WAIT_FOR_SHARED && s.past < common
        })
    }

    /// Saves what slot `slot` holds to host memory (for the scope that
    /// wrote it) when `next` (the prompt of `scope` about to take it) does
    /// not continue it, the budget has room and the prompt is not saved
    /// already.
    pub(super) fn save_to_ram(&mut self, slot: usize, scope: CacheScope, next: &[u32]) {
        if !self.options.prefix_cache {
            return;
        }
        let owner = self.prefix.scope(slot);
        let held = self.prefix.tokens(slot);
        let kept = if owner == scope { held.iter().zip(next).take_while(|(a, b)| a == b).count() } else { 0 };
        if kept >= held.len() || !self.host.wants(owner, held) {
            return;
        }
        let tokens = held.to_vec();
        match self.model.save_prefix(slot, tokens.len()) {
            Ok(Some(saved)) => self.host.insert(owner, tokens, saved),
            Ok(None) => {}
            Err(e) => tracing::warn!("saving a prompt's keys and values to host memory failed: {e}"),
        }
        self.publish_host();
    }

    /// When a running sequence of `scope` has evaluated a longer start of
    /// `prompt` than `slot` holds (`held`: a shared system prompt, a
    /// conversation's earlier turns), copies those positions into `slot` on
    /// the device and returns how many; `None` when none is longer by
    /// [`MIN_COPY`] or the model cannot copy.
    fn copy_from_running(&mut self, prompt: &[u32], scope: CacheScope, slot: usize, held: usize) -> Option<usize> {
        let (from, len) = self
            .running
            .iter()
            .filter(|seq| seq.scope == scope)
            .map(|seq| (seq.slot, seq.in_cache().zip(prompt).take_while(|(a, b)| a == *b).count()))
            .max_by_key(|&(_, len)| len)?;
        // One token at least is left to evaluate (its logits are needed).
        let len = len.min(prompt.len().saturating_sub(1));
        if len < held + MIN_COPY {
            return None;
        }
        match self.model.copy_prefix(from, slot, len) {
            Ok(true) => {
                self.prefix.store(slot, scope, prompt[..len].iter().copied());
                Some(len)
            }
            Ok(false) => None,
            Err(e) => {
                tracing::warn!("copying a running sequence's prefix failed: {e}");
                None
            }
        }
    }

    /// When host memory holds a longer start of `prompt` than `have`, saved
    /// for `scope`, writes it into `slot` and returns how many positions of
    /// `prompt` it gives.
    fn restore_from_ram(&mut self, prompt: &[u32], scope: CacheScope, slot: usize, have: usize) -> Option<usize> {
        let (saved, len) = self.host.best(scope, prompt, have + MIN_COPY - 1)?;
        if !self.model.restorable(saved, len) {
            // Its rings hold positions past where this prompt parts from it.
            return None;
        }
        match self.model.restore_prefix(slot, saved) {
            Ok(true) => {
                self.prefix.store(slot, scope, prompt[..len].iter().copied());
                Some(len)
            }
            Ok(false) => None,
            Err(e) => {
                tracing::warn!("writing a saved prompt back failed: {e}");
                self.prefix.clear(slot);
                None
            }
        }
    }

    /// Where slot `slot` resumes, `cached` (the prefix cache's pick): a
    /// hybrid model's slot whose state holds more than that goes back to
    /// its checkpoint of `cached` positions; 0 where that fails.
    pub(super) fn resume_at_checkpoint(&mut self, slot: usize, cached: usize) -> usize {
        if cached == 0 || self.model.resumable(slot, cached) {
            return cached;
        }
        let restored = match self.prefix.checkpoint(slot, cached).filter(|c| c.len() == cached) {
            Some(checkpoint) => self.model.restore_prefix(slot, checkpoint),
            None => Ok(false),
        };
        match restored {
            Ok(true) => cached,
            Ok(false) => 0,
            Err(e) => {
                tracing::warn!("writing a checkpoint back failed: {e}");
                self.prefix.clear(slot);
                0
            }
        }
    }

    /// Whether the model's slots keep checkpoints (a hybrid model's, with
    /// the prefix cache and `--ctx-checkpoints` on).
    pub(super) fn takes_checkpoints(&self) -> bool {
        self.options.prefix_cache && self.options.ctx_checkpoints > 0 && self.model.config().recurrent.is_some()
    }

    /// Checkpoints of the recurrent state of the sequences `ids` (of a
    /// hybrid model), which have evaluated their prompts but its last token
    /// (evaluated in the next step): a later prompt that shares that much of
    /// the prompt (the same prompt again, or a conversation whose template
    /// rewrote the answer after it) resumes there.
    pub(super) fn take_checkpoints(&mut self, ids: &[u64]) {
        if !self.takes_checkpoints() {
            return;
        }
        for &id in ids {
            let Some(seq) = self.running.iter().find(|s| s.id == id) else { continue };
            let len = seq.prompt.len() - 1;
            match self.model.save_checkpoint(seq.slot) {
                // The state holds exactly that: the next step of this
                // sequence is not submitted yet.
                Ok(Some(checkpoint)) if checkpoint.len() == len => {
                    self.prefix.add_checkpoint(seq.slot, seq.scope, &seq.prompt[..len], checkpoint)
                }
                Ok(_) => {}
                Err(e) => tracing::warn!("saving a checkpoint failed: {e}"),
            }
        }
    }
}
