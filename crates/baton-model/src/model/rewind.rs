//! A slot cut back to fewer positions than its last step wrote: the drafts
//! a verification step evaluated and the sequence did not accept.

use super::*;

impl Model {
    /// Lets a slot be cut back ([`cut_back`](Self::cut_back)) to any
    /// position of a step that carries up to `rows` drafted tokens per run
    /// in flight (over all its sequences): a hybrid model keeps, in every
    /// later step, the recurrent states after each row of each sequence
    /// that gives every row's logits (the rows of a verification step), in
    /// `rows` rows of scratch per run in flight (each one sequence's state
    /// in every recurrent layer). Those rows are then taken one by one,
    /// whatever [`LoadOptions::delta_chunk`] says. Nothing to do for a
    /// model without recurrent layers (attention reads positions below a
    /// row's own only: the next step overwrites the rejected ones) or when
    /// `rows` are kept already. An error where the slots' states are not
    /// held whole here (tensor parallelism, several processes) or the delta
    /// rule is chunked (its bits would depend on how the prompt was split).
    pub fn keep_states(&mut self, rows: usize) -> Result<(), ModelError> {
        if self.config.recurrent.is_none() || rows <= self.kept.rows() {
            return Ok(());
        }
        if !self.placed.holds_slots_whole() {
            return Err(ModelError::Input(
                "the recurrent states are kept on one process without tensor parallelism only".into(),
            ));
        }
        if self.delta_chunk > 0 {
            return Err(ModelError::Input(format!(
                "--delta-chunk {}: the recurrent states are kept with the delta rule row by row only",
                self.delta_chunk
            )));
        }
        let (devices, layer_device) = (&self.devices, &self.layer_device);
        let parts = self.input_io.len();
        let kept = KeptRows::new(&self.config, (rows, parts, self.cache.slots), &|l| devices[layer_device[l]].clone())?;
        for (l, conv, delta) in kept.tensors() {
            self.bound.insert(graph::conv_kept_name(l), conv.clone());
            self.bound.insert(graph::delta_kept_name(l), delta.clone());
        }
        self.kept = kept;
        // The graphs name the kept states' leaves of the old size.
        self.plans.clear();
        Ok(())
    }

    /// The most drafted tokens a step may carry, over all its sequences,
    /// for each to be cut back to any of its positions: `None` (no limit)
    /// for a model without recurrent layers, else the rows
    /// [`keep_states`](Self::keep_states) gave (0: none).
    pub fn rewind_rows(&self) -> Option<usize> {
        self.config.recurrent.as_ref().map(|_| self.kept.rows())
    }

    /// Bytes of the recurrent states kept for cutting slots back.
    pub fn kept_state_bytes(&self) -> usize {
        self.kept.bytes()
    }

    /// Cuts slot `slot` back to its first `len` positions (llama.cpp's
    /// `seq_rm` of the positions from `len` on): its next evaluation starts
    /// at `len`, with the bits it would have had if the positions after
    /// `len` had never been evaluated. `len` is at most the positions the
    /// slot holds. A model without recurrent layers just forgets them (the
    /// next step overwrites them). A hybrid model's recurrent state is put
    /// back to the one its last step kept after position `len - 1` (see
    /// [`keep_states`](Self::keep_states)), queued on the device behind
    /// that step; [`ModelError::NotKept`] where that step kept none for
    /// `len`.
    pub fn cut_back(&mut self, slot: usize, len: usize) -> Result<(), ModelError> {
        let Some(&at) = self.frontier.get(slot) else {
            return Err(ModelError::Input(format!("slot {slot} does not exist")));
        };
        if len == at || (self.config.recurrent.is_none() && len < at) {
            return Ok(());
        }
        if len > at {
            return Err(ModelError::Input(format!("slot {slot} holds {at} positions: it cannot be cut back to {len}")));
        }
        let kept = self.kept.kept_positions(slot);
        if !kept.contains(&len) {
            return Err(ModelError::NotKept { slot, len, at, kept });
        }
        let (runner, layer_device) = (&self.runner, &self.layer_device);
        self.kept.restore(&self.cache.layers, (slot, len), &|l| runner.stream(layer_device[l]).clone())?;
        self.frontier[slot] = len;
        Ok(())
    }
}
