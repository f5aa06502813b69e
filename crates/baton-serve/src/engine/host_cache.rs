//! Prompts kept in host memory after their slot is reused (llama-server's
//! `--cache-ram`): when a free slot that holds a prompt's keys and values
//! is taken by a request that does not continue it, the slot's positions
//! are saved first; a later request that starts with a saved prompt gets
//! them written back into its slot and evaluates only the rest. The saved
//! prompts are evicted least recently used first to stay within the
//! budget. Restored positions are the bits an evaluation gives (see
//! [`baton_model::SavedPrefix`]). A saved prompt is given back only to a
//! request of the [`CacheScope`] that evaluated it.

use baton_model::SavedPrefix;

use super::scope::CacheScope;

/// Fewest positions worth saving.
pub(super) const MIN_SAVE: usize = 32;

/// What the cache keeps: something of a size in bytes.
pub(super) trait Held {
    /// Bytes it takes.
    fn bytes(&self) -> usize;
}

impl Held for SavedPrefix {
    fn bytes(&self) -> usize {
        SavedPrefix::bytes(self)
    }
}

struct Entry<S> {
    scope: CacheScope,
    tokens: Vec<u32>,
    saved: S,
    last_used: u64,
}

/// The saved prompts, within a budget of bytes.
pub(super) struct HostCache<S = SavedPrefix> {
    budget: usize,
    used: usize,
    clock: u64,
    entries: Vec<Entry<S>>,
}

fn common(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl<S: Held> HostCache<S> {
    /// An empty cache of at most `budget` bytes (0: nothing is kept).
    pub(super) fn new(budget: usize) -> HostCache<S> {
        HostCache { budget, used: 0, clock: 0, entries: Vec::new() }
    }

    /// Bytes held.
    pub(super) fn used(&self) -> usize {
        self.used
    }

    /// Prompts held.
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether `tokens` (of `scope`) is worth saving: long enough, within
    /// the budget, and not already held for that scope (as itself or the
    /// start of a saved prompt).
    pub(super) fn wants(&self, scope: CacheScope, tokens: &[u32]) -> bool {
        self.budget > 0
            && tokens.len() >= MIN_SAVE
            && !self
                .entries
                .iter()
                .any(|e| e.scope == scope && e.tokens.len() >= tokens.len() && e.tokens.starts_with(tokens))
    }

    /// Keeps `saved` (the keys and values of `tokens`, evaluated for
    /// `scope`), evicting the least recently used prompts to make room, and
    /// the saved prompts of the scope it continues (it holds them too); one
    /// larger than the budget is not kept.
    pub(super) fn insert(&mut self, scope: CacheScope, tokens: Vec<u32>, saved: S) {
        let bytes = saved.bytes();
        if bytes > self.budget {
            return;
        }
        self.remove_where(|e| e.scope == scope && tokens.starts_with(&e.tokens));
        while self.used + bytes > self.budget {
            let Some(oldest) = self.entries.iter().enumerate().min_by_key(|(_, e)| e.last_used).map(|(i, _)| i) else {
                break;
            };
            self.used -= self.entries.swap_remove(oldest).saved.bytes();
        }
        self.clock += 1;
        self.used += bytes;
        self.entries.push(Entry { scope, tokens, saved, last_used: self.clock });
    }

    fn remove_where(&mut self, gone: impl Fn(&Entry<S>) -> bool) {
        let mut freed = 0;
        self.entries.retain(|e| {
            let drop = gone(e);
            if drop {
                freed += e.saved.bytes();
            }
            !drop
        });
        self.used -= freed;
    }

    /// The saved prompt of `scope` that shares the longest start with
    /// `prompt`, and how many of `prompt`'s tokens it gives (one at least
    /// is left to evaluate), if that is more than `better_than`; marked
    /// used.
    pub(super) fn best(&mut self, scope: CacheScope, prompt: &[u32], better_than: usize) -> Option<(&S, usize)> {
        let limit = prompt.len().saturating_sub(1);
        let (i, len) = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.scope == scope)
            .map(|(i, e)| (i, common(&e.tokens, prompt).min(limit)))
            .max_by_key(|&(_, len)| len)?;
        if len <= better_than {
            return None;
        }
        self.clock += 1;
        let entry = &mut self.entries[i];
        entry.last_used = self.clock;
        Some((&entry.saved, len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Held for usize {
        fn bytes(&self) -> usize {
            *self
        }
    }

    const S: CacheScope = CacheScope::SHARED;

    fn prompt(first: u32, len: usize) -> Vec<u32> {
        (first..first + len as u32).collect()
    }

    #[test]
    fn the_budget_holds_and_the_least_recently_used_goes_first() {
        let mut cache = HostCache::<usize>::new(100);
        assert!(!cache.wants(S, &prompt(0, MIN_SAVE - 1)), "too short");
        assert!(cache.wants(S, &prompt(0, 40)));
        cache.insert(S, prompt(0, 40), 40);
        cache.insert(S, prompt(1000, 40), 40);
        assert!(!cache.wants(S, &prompt(0, 40)) && !cache.wants(S, &prompt(0, 35)), "held, as itself or a start");
        // A use makes the first the most recent: the second goes for a third.
        assert_eq!(cache.best(S, &prompt(0, 50), 0).map(|(s, n)| (*s, n)), Some((40, 40)));
        cache.insert(S, prompt(2000, 40), 40);
        assert_eq!((cache.len(), cache.used()), (2, 80));
        assert!(cache.best(S, &prompt(1000, 50), 0).is_none(), "evicted");
        assert!(cache.best(S, &prompt(2000, 50), 0).is_some());
        // One that continues a saved prompt replaces it; one over the
        // budget is not kept.
        cache.insert(S, prompt(0, 60), 60);
        assert_eq!((cache.len(), cache.used()), (2, 100), "the longer holds the shorter");
        // 50 more: both go, the least recently used first.
        cache.insert(S, prompt(3000, 50), 50);
        assert_eq!((cache.len(), cache.used()), (1, 50));
        cache.insert(S, prompt(5000, 200), 200);
        assert_eq!((cache.len(), cache.used()), (1, 50), "over the budget: not kept");
        // One token at least is left to evaluate; no better than asked: none.
        assert_eq!(cache.best(S, &prompt(3000, 50), 0).map(|(_, n)| n), Some(49));
        assert!(cache.best(S, &prompt(3000, 50), 49).is_none());
        assert!(!HostCache::<usize>::new(0).wants(S, &prompt(0, 40)), "a budget of 0 keeps nothing");
    }

    #[test]
    fn a_saved_prompt_goes_back_only_to_its_scope() {
        let (alice, bob) = (CacheScope(1), CacheScope(2));
        let mut cache = HostCache::<usize>::new(1000);
        cache.insert(alice, prompt(0, 40), 40);
        assert!(cache.best(bob, &prompt(0, 50), 0).is_none(), "another scope's prompt");
        assert_eq!(cache.best(alice, &prompt(0, 50), 0).map(|(_, n)| n), Some(40));
        // The same tokens for bob are his to save, and alice's stay.
        assert!(cache.wants(bob, &prompt(0, 40)) && !cache.wants(alice, &prompt(0, 40)));
        cache.insert(bob, prompt(0, 45), 45);
        assert_eq!((cache.len(), cache.used()), (2, 85), "bob's longer prompt does not replace alice's");
        assert_eq!(cache.best(bob, &prompt(0, 50), 0).map(|(_, n)| n), Some(45));
        assert_eq!(cache.best(alice, &prompt(0, 50), 0).map(|(_, n)| n), Some(40));
    }
}
