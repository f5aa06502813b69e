//! Hidden states: a step's final hidden rows (embeddings ride the steps)
//! and a text's whole pass.

use super::*;
use crate::embedding::Pooling;

impl Model {
    /// As [`submit_batch`](Self::submit_batch), with the final hidden
    /// states (after the output norm) of every token of the sequences
    /// `hidden` flags as an output too: an embedding's tokens carried by a
    /// decode step. Read them with [`batch_hidden`](Self::batch_hidden)
    /// before the logits. Every row is computed as it would be alone, so
    /// the other sequences' logits keep their bits. On one process without
    /// tensor parallelism only.
    pub fn submit_batch_hidden(&mut self, seqs: &[SeqStep<'_>], hidden: &[bool]) -> Result<BatchTicket, ModelError> {
        if hidden.len() != seqs.len() {
            return Err(ModelError::Input(format!("{} hidden flags for {} sequences", hidden.len(), seqs.len())));
        }
        if !self.placed.holds_slots_whole() {
            return Err(ModelError::Input(
                "hidden states (embeddings) are read on one process without --split-mode tensor".into(),
            ));
        }
        let slot = self.next_input;
        if self.batch_hidden_io[slot].is_none() {
            let last = self.layer_device[self.config.layers - 1];
            self.batch_hidden_io[slot] = Some(self.devices[last].alloc(self.batch * self.config.dim * 4)?);
        }
        let logits_buffer = self.batch_logits_io[slot].0.clone();
        let hidden_buffer =
            self.batch_hidden_io[slot].clone().ok_or_else(|| ModelError::Config("no hidden buffer".into()))?;
        let start = std::time::Instant::now();
        let result = self.submit_inner(seqs, Logits::Last, Some(&logits_buffer), Some((hidden, &hidden_buffer)), None);
        self.host_submit += start.elapsed();
        let (points, logits, hidden) = result?;
        let serial = self.next_serial(slot);
        Ok(BatchTicket { slot, serial, done: points.done, logits, hidden })
    }

    /// Whether steps can carry hidden states
    /// ([`submit_batch_hidden`](Self::submit_batch_hidden)): on one process
    /// without tensor parallelism.
    pub fn hidden_in_steps(&self) -> bool {
        self.placed.holds_slots_whole()
    }

    /// Waits for a step of [`submit_batch_hidden`](Self::submit_batch_hidden)
    /// and returns its hidden states: `dim` values per flagged token, in
    /// row order (empty when none were flagged).
    pub fn batch_hidden(&mut self, ticket: &BatchTicket) -> Result<Vec<f32>, ModelError> {
        let Some(hidden) = &ticket.hidden else { return Ok(Vec::new()) };
        let current = self.batch_logits_io.get(ticket.slot).map_or(0, |(_, serial)| *serial);
        if current != ticket.serial {
            return Err(ModelError::Input("the step's hidden states were overwritten by later steps".into()));
        }
        // As the logits: on the readback stream after the step, not behind
        // later steps queued on the device's own.
        let last = self.layer_device[self.config.layers - 1];
        let stream = match &self.readback {
            Some(readback) => {
                readback.wait(&ticket.done)?;
                readback.clone()
            }
            None => self.runner.stream(last).clone(),
        };
        let read = stream.read_into_async(hidden, vec![0f32; hidden.shape().elems()])?;
        if !read.is_ready() {
            self.host_waits += 1;
        }
        read.wait().map_err(|e| ModelError::Stream(e.error))
    }

    /// As [`eval_slot`](Self::eval_slot), with every evaluated token's
    /// final hidden state (`dim` values each, after the output norm, in
    /// order) besides the logits: what a drafter that reads the model's
    /// hidden states (a multi-token-prediction head) needs of a decode or
    /// verification step. The logits are the bits `eval_slot` gives (the
    /// hidden states are one more output of the same rows). On one process
    /// without tensor parallelism ([`hidden_in_steps`](Self::hidden_in_steps)).
    pub fn eval_slot_hidden(
        &mut self,
        slot: usize,
        tokens: &[u32],
        past: usize,
        logits: Logits,
    ) -> Result<(Vec<f32>, &[f32]), ModelError> {
        if logits == Logits::Hidden {
            return Err(ModelError::Input("eval_slot_hidden gives logits and hidden states both".into()));
        }
        let step = [SeqStep { slot, past, tokens }];
        let ticket = self.submit_batch_rows(&step, &[true], &[logits == Logits::All])?;
        let hidden = self.batch_hidden(&ticket)?;
        Ok((hidden, self.batch_logits(ticket)?))
    }

    /// As [`eval_prompt`](Self::eval_prompt) (slot 0, batches of
    /// [`batch`](Self::batch), the last token's logits), with every
    /// token's final hidden state too ([`eval_slot_hidden`](Self::eval_slot_hidden)).
    pub fn eval_prompt_hidden(&mut self, tokens: &[u32], past: usize) -> Result<(Vec<f32>, &[f32]), ModelError> {
        if tokens.is_empty() {
            return Err(ModelError::Input("the prompt is empty".into()));
        }
        let batch = self.batch;
        let mut hidden = Vec::with_capacity(tokens.len() * self.config.dim);
        let last = (tokens.len() - 1) / batch;
        for (i, chunk) in tokens.chunks(batch).enumerate().take(last) {
            hidden.extend(self.eval_slot_hidden(0, chunk, past + i * batch, Logits::Last)?.0);
        }
        let (rows, logits) = self.eval_slot_hidden(0, &tokens[last * batch..], past + last * batch, Logits::Last)?;
        hidden.extend(rows);
        Ok((hidden, logits))
    }

    /// Every token's final hidden state (`dim` values each, after the
    /// output norm) of `tokens` evaluated from position 0 of `slot`, in
    /// batches of [`batch`](Self::batch); the slot's cache holds the tokens
    /// afterwards (a later evaluation of that slot from position 0
    /// overwrites them).
    pub fn eval_hidden(&mut self, slot: usize, tokens: &[u32]) -> Result<Vec<f32>, ModelError> {
        if tokens.is_empty() {
            return Err(ModelError::Input("the text to embed gives no tokens".into()));
        }
        if !self.placed.holds_slots_whole() {
            return Err(ModelError::Input(
                "hidden states (embeddings) are read on one process without --split-mode tensor".into(),
            ));
        }
        let batch = self.batch;
        let mut hidden = Vec::with_capacity(tokens.len() * self.config.dim);
        for (i, chunk) in tokens.chunks(batch).enumerate() {
            let step = [SeqStep { slot, past: i * batch, tokens: chunk }];
            let (_, rows) = self.submit(&step, Logits::Hidden, None)?;
            hidden.extend_from_slice(self.read_logits(&rows, None)?);
        }
        Ok(hidden)
    }

    /// The embedding of `tokens`: their hidden states evaluated from
    /// position 0 of `slot` ([`Model::eval_hidden`]), pooled (not
    /// normalised: [`normalize`](crate::normalize) does that).
    pub fn embed(&mut self, slot: usize, tokens: &[u32], pooling: Pooling) -> Result<Vec<f32>, ModelError> {
        let hidden = self.eval_hidden(slot, tokens)?;
        Ok(pooling.pool(&hidden, self.config().dim))
    }
}
