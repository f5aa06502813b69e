//! Sequences whose client went away: their slots are freed and what they
//! evaluated stays for the next request that starts the same way.

use std::sync::atomic::Ordering;

use super::Worker;

impl Worker {
    /// Frees the slots of generations whose client went away.
    pub(super) fn drop_cancelled(&mut self) {
        self.drop_cancelled_embeds();
        self.drop_cancelled_scores();
        // Passes whose client went away leave the queue at once (and give
        // back the place their request held).
        let shared = &self.shared;
        self.passes.retain(|pass| {
            let gone = pass.job.abandoned();
            if gone {
                if pass.holds_place {
                    shared.queued.fetch_sub(1, Ordering::AcqRel);
                }
                shared.cancelled.fetch_add(1, Ordering::Relaxed);
            }
            !gone
        });
        let (gone, running): (Vec<_>, Vec<_>) = self.running.drain(..).partition(|seq| seq.events.is_closed());
        self.running = running;
        for mut seq in gone {
            self.free_slots.push(seq.slot);
            // A step of it still in flight writes only past `past`.
            self.prefix.store(seq.slot, seq.scope, seq.in_cache());
            self.shared.cancelled.fetch_add(1, Ordering::Relaxed);
            self.give_back_head(&mut seq);
        }
        let shared = &self.shared;
        // A preempted sequence holds no slot.
        self.preempted.retain(|seq| {
            let gone = seq.events.is_closed();
            if gone {
                shared.cancelled.fetch_add(1, Ordering::Relaxed);
            }
            !gone
        });
        self.waiting.retain(|admitted| {
            let gone = admitted.events.is_closed();
            if gone {
                shared.queued.fetch_sub(1, Ordering::AcqRel);
                shared.cancelled.fetch_add(1, Ordering::Relaxed);
            }
            !gone
        });
    }
}
