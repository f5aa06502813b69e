//! A slot's state moved: a prefix copied from another slot, saved to host
//! memory and restored, and how far back a slot's rings let an evaluation
//! start (the state itself lives in `crate::state`).

use super::*;

impl Model {
    /// Whether slot `slot` can take an evaluation from position `past`: its
    /// cache still holds what that needs ([`ModelError::RingRewound`]
    /// otherwise: a sliding-window layer's ring was overwritten by a run
    /// that went further). From position 0 it always can.
    /// A hybrid model's recurrent state holds exactly the positions its
    /// slot evaluated: it goes on from there, or starts again from 0.
    pub fn resumable(&self, slot: usize, past: usize) -> bool {
        if self.config.recurrent.is_some() {
            return past == 0 || self.frontier.get(slot) == Some(&past);
        }
        match (self.ring_reach(), self.frontier.get(slot)) {
            (Some(reach), Some(&frontier)) => past == 0 || frontier <= past + reach,
            _ => true,
        }
    }

    /// Gives slot `to` slot `from`'s keys and values at positions
    /// `0..len`, as a copy on the device queued behind the work that wrote
    /// them: an evaluation of slot `to` may then start at position `len`
    /// and gets the bits evaluating those positions would give. `Ok(false)`
    /// (nothing queued) where a copy is not served: under tensor
    /// parallelism, over several processes, or when `from`'s sliding-window
    /// rings no longer hold what `len` needs.
    pub fn copy_prefix(&mut self, from: usize, to: usize, len: usize) -> Result<bool, ModelError> {
        let (slots, context) = (self.cache.slots, self.cache.context);
        if from >= slots || to >= slots || len > context {
            return Err(ModelError::Config(format!(
                "a KV copy of {len} positions from slot {from} to slot {to} (the cache has {slots} slots of {context})"
            )));
        }
        if from == to || len == 0 {
            return Ok(true);
        }
        if !self.placed.holds_slots_whole() || !self.resumable(from, len) {
            return Ok(false);
        }
        let (runner, layer_device) = (&self.runner, &self.layer_device);
        self.cache.copy_prefix(&self.config, (from, to, len), &|l| runner.stream(layer_device[l]).clone())?;
        self.kept.forget(to);
        if let (Some(&frontier), Some(_)) = (self.frontier.get(from), self.frontier.get(to)) {
            // The rings were copied whole: `to`'s hold what `from`'s do.
            self.frontier[to] = if self.cache.ring.is_some() { frontier } else { len };
        }
        Ok(true)
    }

    /// Forgets slot `slot`'s positions (llama.cpp's `seq_rm` of a whole
    /// sequence): a paged cache gets its blocks back (those no other slot
    /// shares become free); its next evaluation starts at position 0.
    pub fn clear_slot(&mut self, slot: usize) -> Result<(), ModelError> {
        let Some(frontier) = self.frontier.get_mut(slot) else {
            return Err(ModelError::Input(format!("slot {slot} does not exist")));
        };
        *frontier = 0;
        self.kept.forget(slot);
        if let Some(tables) = self.cache.blocks.as_mut() {
            tables.truncate(slot, 0);
        }
        Ok(())
    }

    /// Slot `slot`'s keys and values at positions `0..len`, read into host
    /// memory (the host waits for the reads); `None` where that is not
    /// served (under tensor parallelism, over several processes, when the
    /// slot's rings no longer hold the window before `len`, or for no
    /// position). [`restore_prefix`](Self::restore_prefix) writes it back.
    pub fn save_prefix(&mut self, slot: usize, len: usize) -> Result<Option<SavedPrefix>, ModelError> {
        if !self.placed.holds_slots_whole() || len == 0 || !self.resumable(slot, len) {
            return Ok(None);
        }
        let frontier = self.frontier.get(slot).copied().unwrap_or(len);
        let (runner, layer_device) = (&self.runner, &self.layer_device);
        let stream_of = |l: usize| runner.stream(layer_device[l]).clone();
        let saved = self.cache.save_prefix(&self.config, (slot, len, frontier), false, &stream_of)?;
        Ok(Some(saved))
    }

    /// A checkpoint of slot `slot`: a hybrid model's recurrent state, which
    /// holds the positions the slot evaluated, read into host memory (the
    /// host waits for the reads), without the attention layers' keys and
    /// values (llama.cpp's context checkpoints). Restored with
    /// [`restore_prefix`](Self::restore_prefix) into the same slot while its
    /// keys and values of those positions are still the ones it had, the
    /// slot goes on from there: a prompt that shares less with the slot
    /// than all it evaluated resumes at the last checkpoint it shares
    /// instead of at 0. `None` for a model without recurrent layers, for
    /// an empty slot, and where saving is not served (tensor parallelism,
    /// several processes).
    pub fn save_checkpoint(&mut self, slot: usize) -> Result<Option<SavedPrefix>, ModelError> {
        let Some(&len) = self.frontier.get(slot) else {
            return Err(ModelError::Input(format!("slot {slot} does not exist")));
        };
        if self.config.recurrent.is_none() || !self.placed.holds_slots_whole() || len == 0 {
            return Ok(None);
        }
        let (runner, layer_device) = (&self.runner, &self.layer_device);
        let stream_of = |l: usize| runner.stream(layer_device[l]).clone();
        let saved = self.cache.save_prefix(&self.config, (slot, len, len), true, &stream_of)?;
        Ok(Some(saved))
    }

    /// Whether a slot given `saved` can evaluate from position `past`
    /// (`past` at most its length): its sliding-window rings, as saved,
    /// still hold the window before `past`.
    /// A hybrid model's saved recurrent state serves its whole length only.
    pub fn restorable(&self, saved: &SavedPrefix, past: usize) -> bool {
        if self.config.recurrent.is_some() {
            return past == 0 || past == saved.len();
        }
        match self.ring_reach() {
            Some(reach) => past == 0 || (past <= saved.len() && saved.frontier <= past + reach),
            None => past <= saved.len(),
        }
    }

    /// Writes `saved` (from [`save_prefix`](Self::save_prefix) of this
    /// model) into slot `slot`: an evaluation of the slot may then start at
    /// position `saved.len()`, with the bits evaluating those positions
    /// would give. A checkpoint ([`save_checkpoint`](Self::save_checkpoint))
    /// writes only the recurrent state: the caller gives it back to the
    /// slot it came from, whose keys and values of those positions have
    /// not changed since. `Ok(false)` (nothing written) where that is not
    /// served.
    pub fn restore_prefix(&mut self, slot: usize, saved: &SavedPrefix) -> Result<bool, ModelError> {
        if !self.placed.holds_slots_whole() {
            return Ok(false);
        }
        let (runner, layer_device) = (&self.runner, &self.layer_device);
        self.cache.restore_prefix(&self.config, slot, saved, &|l| runner.stream(layer_device[l]).clone())?;
        self.kept.forget(slot);
        if let Some(frontier) = self.frontier.get_mut(slot) {
            *frontier = if self.cache.ring.is_some() { saved.frontier } else { saved.len() };
        }
        Ok(true)
    }

    /// How far back from the furthest position written an evaluation may
    /// start while the rings still hold its window (`None`: no rings).
    pub(super) fn ring_reach(&self) -> Option<usize> {
        Some(self.cache.ring? - self.config.sliding_window? + 1)
    }
}
