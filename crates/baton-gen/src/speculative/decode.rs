//! One sequence decoded with speculation (`baton run`): each step
//! evaluates the token drawn last and the drafts after it, and the rows
//! are drawn from in order while they confirm the drafts.

use std::time::Instant;

use baton_model::{Logits, Model, ModelError};

use super::speculation::Speculation;
use super::step_times::StepTimes;
use super::verify::{verify, Drawn};

/// A sequence decoding in one of a model's cache slots.
pub struct Decoding<'a> {
    /// The model.
    pub model: &'a mut Model,
    /// Its slot.
    pub slot: usize,
    /// Positions its slot holds (the next evaluated token goes there).
    pub past: usize,
    /// Its tokens so far, prompt and output; the last one is the token to
    /// evaluate next (drawn, not yet in the cache).
    pub tokens: Vec<u32>,
    /// Tokens it may still draw (the one waiting to be evaluated counted).
    pub left: usize,
    /// What its steps cost per row count: read by the drafts' budget,
    /// and each step's time recorded in it.
    pub times: &'a mut StepTimes,
}

impl Decoding<'_> {
    /// Decodes until `draw` ends the sequence, `left` runs out or
    /// `stop_now()` says so: each step evaluates the waiting token and the
    /// drafts `spec` makes (none without it), and hands `draw` each row's
    /// logits in order, exactly the rows and in the order decoding one
    /// token a step would (a row after a rejected draft is never drawn
    /// from). `draw` draws and takes the token (the sampler's history, the
    /// output), returning [`Drawn::End`] when the sequence ends there.
    pub fn run<E: From<ModelError>>(
        &mut self,
        mut spec: Option<&mut Speculation>,
        stop_now: &dyn Fn() -> bool,
        mut draw: impl FnMut(&[f32]) -> Result<Drawn, E>,
    ) -> Result<(), E> {
        let (vocab, dim) = (self.model.config().vocab, self.model.config().dim);
        let mut step: Vec<u32> = Vec::new();
        while self.left > 0 && !stop_now() {
            let Some(&last) = self.tokens.last() else { return Ok(()) };
            let context_room = self.model.context().saturating_sub(self.past + 1);
            let room = (self.left - 1).min(self.model.batch() - 1).min(context_room);
            // A hybrid model cuts back to the positions whose states it kept.
            let room = room.min(self.model.rewind_rows().unwrap_or(usize::MAX));
            step.clear();
            step.push(last);
            if let Some(spec) = spec.as_deref_mut() {
                step.extend_from_slice(spec.draft(&self.tokens, room, (1, self.times))?);
            }
            let wants_hidden = spec.as_deref().is_some_and(Speculation::wants_hidden);
            let logits = if step.len() > 1 { Logits::All } else { Logits::Last };
            let start = Instant::now();
            // A drafter that reads the model's hidden states gets them from
            // the same rows (the logits keep their bits).
            let (hidden, rows) = match wants_hidden {
                true => self.model.eval_slot_hidden(self.slot, &step, self.past, logits)?,
                false => (Vec::new(), self.model.eval_slot(self.slot, &step, self.past, logits)?),
            };
            self.times.observe(step.len(), start.elapsed().as_secs_f64());
            let (tokens, left) = (&mut self.tokens, &mut self.left);
            let verified = verify::<E>(rows.chunks_exact(vocab), &step[1..], |row| {
                let drawn = draw(row)?;
                if let Drawn::Token(token) = drawn {
                    tokens.push(token);
                    *left -= 1;
                }
                Ok(if *left == 0 { Drawn::End } else { drawn })
            })?;
            if let Some(spec) = spec.as_deref_mut() {
                // The positions kept: the evaluated token's and the
                // accepted drafts'.
                let kept = (1 + verified.accepted) * dim;
                if wants_hidden {
                    spec.observe_hidden(self.past, hidden.get(..kept).unwrap_or(&hidden))?;
                }
                spec.settle(verified.accepted, verified.next);
            }
            self.past += 1 + verified.accepted;
            // The rejected drafts' positions are not the sequence's.
            self.model.cut_back(self.slot, self.past)?;
            if verified.next.is_none() {
                return Ok(());
            }
        }
        Ok(())
    }
}

/// Evaluates `prompt` from position 0 of slot 0 and returns its last
/// token's logits, as [`Model::eval_prompt`] does; when `spec` drafts from
/// the model's hidden states ([`Speculation::wants_hidden`]), it is handed
/// the prompt's.
pub fn eval_prompt<'m>(
    model: &'m mut Model,
    spec: Option<&mut Speculation>,
    prompt: &[u32],
) -> Result<&'m [f32], ModelError> {
    match spec.filter(|s| s.wants_hidden()) {
        Some(spec) => {
            let (hidden, logits) = model.eval_prompt_hidden(prompt, 0)?;
            spec.observe_hidden(0, &hidden)?;
            Ok(logits)
        }
        None => model.eval_prompt(prompt, 0),
    }
}
