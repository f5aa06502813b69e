//! Reuse of a free slot's cache by the next request whose prompt starts
//! with the same tokens (a prefix cache at the granularity of sequence
//! slots): the KV rows of a finished or cancelled sequence stay in its
//! slot, and a new request takes the free slot whose tokens share the
//! longest prefix with its prompt (the least recently used one when none
//! does, so a slot's content is evicted last-used-first), then evaluates
//! only the rest. Since every row's keys, values and attention are the
//! same bits whatever else is in the batch, a reused prefix gives the bits
//! of evaluating it again. A slot's tokens are reused only by a request of
//! the [`CacheScope`] that wrote them.
//!
//! A hybrid model's recurrent state holds exactly the positions its slot
//! evaluated, so a prompt that shares less than that with a slot cannot
//! resume it there; each slot therefore keeps checkpoints of that state at
//! the ends of the prompts it evaluated (llama.cpp's context checkpoints),
//! and such a prompt resumes at the last checkpoint it shares. A
//! checkpoint stays valid while the slot's tokens up to its length do not
//! change.

use baton_model::SavedPrefix;

use super::scope::CacheScope;

/// The tokens whose keys and values each slot holds (positions `0..len`),
/// and each slot's checkpoints.
#[derive(Debug)]
pub(super) struct SlotCache {
    tokens: Vec<Vec<u32>>,
    /// Per slot, checkpoints of its recurrent state, oldest first, each
    /// valid for the slot's tokens up to its length.
    checkpoints: Vec<Vec<SavedPrefix>>,
    /// Checkpoints a slot keeps at most (`--ctx-checkpoints`).
    max_checkpoints: usize,
    /// Per slot, the scope of the request that wrote its tokens.
    scopes: Vec<CacheScope>,
    last_used: Vec<u64>,
    clock: u64,
}

impl SlotCache {
    /// `slots` empty slots.
    pub(super) fn new(slots: usize, max_checkpoints: usize) -> SlotCache {
        SlotCache {
            tokens: vec![Vec::new(); slots],
            checkpoints: (0..slots).map(|_| Vec::new()).collect(),
            max_checkpoints,
            scopes: vec![CacheScope::SHARED; slots],
            last_used: vec![0; slots],
            clock: 0,
        }
    }

    /// Which of the `free` slots `prompt` (of `scope`) should take (an
    /// index into `free`), and how many of its first tokens that slot
    /// already holds. At least one token is left to evaluate (its logits
    /// are needed); a slot another scope wrote gives none, and so does a
    /// reuse the model cannot resume from (`resumable(slot, past)`, a
    /// sliding window's ring overwritten).
    pub(super) fn pick(
        &self,
        free: &[usize],
        scope: CacheScope,
        prompt: &[u32],
        resumable: impl Fn(usize, usize) -> bool,
    ) -> Option<(usize, usize)> {
        let reuse = |slot: usize| {
            if self.scope(slot) != scope {
                return 0;
            }
            let held = self.tokens.get(slot).map_or(&[][..], Vec::as_slice);
            let common = held.iter().zip(prompt).take_while(|(a, b)| a == b).count();
            let common = common.min(prompt.len().saturating_sub(1));
            if common > 0 && resumable(slot, common) {
                common
            } else {
                self.checkpoint(slot, common).map_or(0, SavedPrefix::len)
            }
        };
        free.iter()
            .enumerate()
            .map(|(i, &slot)| (i, reuse(slot), self.last_used.get(slot).copied().unwrap_or(0)))
            // The longest reuse; among equals, the least recently used.
            .max_by(|a, b| a.1.cmp(&b.1).then(b.2.cmp(&a.2)))
            .map(|(i, reuse, _)| (i, reuse))
    }

    /// The tokens slot `slot` holds.
    pub(super) fn tokens(&self, slot: usize) -> &[u32] {
        self.tokens.get(slot).map_or(&[][..], Vec::as_slice)
    }

    /// When slot `slot` was last taken or stored (a clock of the cache's).
    pub(super) fn last_used(&self, slot: usize) -> u64 {
        self.last_used.get(slot).copied().unwrap_or(0)
    }

    /// The scope of the request that wrote slot `slot`'s tokens.
    pub(super) fn scope(&self, slot: usize) -> CacheScope {
        self.scopes.get(slot).copied().unwrap_or(CacheScope::SHARED)
    }

    /// Slot `slot` now holds `tokens` (at positions `0..tokens.len()`),
    /// written by a request of `scope`.
    /// Its checkpoints stay where the new tokens begin as the old did.
    pub(super) fn store(&mut self, slot: usize, scope: CacheScope, tokens: impl IntoIterator<Item = u32>) {
        self.clock += 1;
        if let (Some(held), Some(owner), Some(used), Some(checkpoints)) = (
            self.tokens.get_mut(slot),
            self.scopes.get_mut(slot),
            self.last_used.get_mut(slot),
            self.checkpoints.get_mut(slot),
        ) {
            let new: Vec<u32> = tokens.into_iter().collect();
            let same = if *owner == scope { held.iter().zip(&new).take_while(|(a, b)| a == b).count() } else { 0 };
            checkpoints.retain(|c| c.len() <= same);
            *held = new;
            *owner = scope;
            *used = self.clock;
        }
    }

    /// Slot `slot` holds `tokens` (of `scope`), whose last position's
    /// recurrent state `checkpoint` is; the oldest checkpoint goes beyond
    /// the most kept.
    pub(super) fn add_checkpoint(&mut self, slot: usize, scope: CacheScope, tokens: &[u32], checkpoint: SavedPrefix) {
        self.store(slot, scope, tokens.iter().copied());
        if let Some(checkpoints) = self.checkpoints.get_mut(slot).filter(|_| self.max_checkpoints > 0) {
            checkpoints.retain(|c| c.len() != checkpoint.len());
            if checkpoints.len() == self.max_checkpoints {
                checkpoints.remove(0);
            }
            checkpoints.push(checkpoint);
        }
    }

    /// Slot `slot`'s longest checkpoint of at most `len` positions.
    pub(super) fn checkpoint(&self, slot: usize, len: usize) -> Option<&SavedPrefix> {
        self.checkpoints.get(slot)?.iter().filter(|c| c.len() <= len).max_by_key(|c| c.len())
    }

    /// Slot `slot` holds nothing usable (a failed step may have half
    /// written it).
    pub(super) fn clear(&mut self, slot: usize) {
        self.store(slot, CacheScope::SHARED, []);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_prefix_wins_then_the_least_recently_used() {
        let mut cache = SlotCache::new(3, 0);
        let shared = CacheScope::SHARED;
        cache.store(0, shared, [1, 2, 3, 4]);
        cache.store(1, shared, [1, 2, 9]);
        cache.store(2, shared, [7]);
        let any = |_: usize, _: usize| true;
        assert_eq!(cache.pick(&[0, 1, 2], shared, &[1, 2, 3, 5], any), Some((0, 3)));
        assert_eq!(cache.pick(&[1, 2], shared, &[1, 2, 3, 5], any), Some((0, 2)));
        // The whole prompt held: one token left to evaluate.
        assert_eq!(cache.pick(&[0, 1, 2], shared, &[1, 2, 3, 4], any), Some((0, 3)));
        // Nothing shared: the least recently used slot (0).
        assert_eq!(cache.pick(&[2, 1, 0], shared, &[5, 5], any), Some((2, 0)));
        // A reuse the model cannot resume counts as none.
        assert_eq!(cache.pick(&[0, 1], shared, &[1, 2, 3, 5], |slot, _| slot != 0), Some((1, 2)));
        assert_eq!(cache.pick(&[], shared, &[1], any), None);
        cache.clear(0);
        assert_eq!(cache.pick(&[0], shared, &[1, 2, 3, 5], any), Some((0, 0)));
    }

    #[test]
    fn a_slot_is_reused_only_by_the_scope_that_wrote_it() {
        let mut cache = SlotCache::new(2, 0);
        let (alice, bob) = (CacheScope(1), CacheScope(2));
        cache.store(0, alice, [1, 2, 3, 4]);
        cache.store(1, bob, [1, 2]);
        let any = |_: usize, _: usize| true;
        assert_eq!(cache.pick(&[0, 1], alice, &[1, 2, 3, 4, 5], any), Some((0, 4)));
        assert_eq!(cache.pick(&[0, 1], bob, &[1, 2, 3, 4, 5], any), Some((1, 2)), "bob's own, not alice's longer");
        // Nobody's: the least recently used slot, with nothing reused.
        assert_eq!(cache.pick(&[0, 1], CacheScope::SHARED, &[1, 2, 3, 4, 5], any), Some((0, 0)));
        assert_eq!(cache.pick(&[0], bob, &[1, 2, 3, 4, 5], any), Some((0, 0)));
    }
}
