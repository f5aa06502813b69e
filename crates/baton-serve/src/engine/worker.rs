//! The engine's thread: admits requests into slots, runs batched steps,
//! samples, and sends each sequence its tokens.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};

use baton_llama::baton_tokenizer::TokenType;
use baton_llama::{Model, Sampler, SeqStep};

use super::{Admitted, Command, EngineOptions, Event, Finish, FinishReason, Shared, Shutdown};

/// A running sequence.
struct Seq {
    slot: usize,
    events: tokio::sync::mpsc::UnboundedSender<Event>,
    prompt: Vec<u32>,
    /// Prompt tokens evaluated so far.
    read: usize,
    /// The sampled token to evaluate next (after the prompt).
    next: Option<u32>,
    /// Positions written to the cache.
    past: usize,
    generated: usize,
    max_tokens: usize,
    sampler: Sampler,
    stop_at_eog: bool,
}

impl Seq {
    fn prefilling(&self) -> bool {
        self.read < self.prompt.len()
    }

    fn finish(&self, reason: FinishReason) -> Event {
        Event::Done(Finish { reason, prompt_tokens: self.prompt.len(), completion_tokens: self.generated })
    }
}

pub(super) struct Worker {
    model: Model,
    options: EngineOptions,
    shared: Arc<Shared>,
    inbox: mpsc::Receiver<Command>,
    waiting: VecDeque<Admitted>,
    running: Vec<Seq>,
    free_slots: Vec<usize>,
    /// Set by a drain: stop once nothing runs or waits.
    draining: bool,
}

impl Worker {
    pub(super) fn new(
        model: Model,
        options: EngineOptions,
        shared: Arc<Shared>,
        inbox: mpsc::Receiver<Command>,
    ) -> Worker {
        let free_slots = (0..options.parallel).rev().collect();
        Worker {
            model,
            options,
            shared,
            inbox,
            waiting: VecDeque::new(),
            running: Vec::new(),
            free_slots,
            draining: false,
        }
    }

    pub(super) fn run(mut self) {
        loop {
            if self.running.is_empty() && self.waiting.is_empty() {
                if self.draining {
                    return;
                }
                // Idle: block until something comes (or every handle is gone).
                match self.inbox.recv() {
                    Ok(command) => {
                        if !self.handle(command) {
                            return;
                        }
                    }
                    Err(_) => return,
                }
            }
            while let Ok(command) = self.inbox.try_recv() {
                if !self.handle(command) {
                    return;
                }
            }
            self.drop_cancelled();
            self.admit();
            if !self.running.is_empty() {
                self.step();
            }
            self.publish();
        }
    }

    /// Takes one command; `false` when the worker must stop now.
    fn handle(&mut self, command: Command) -> bool {
        match command {
            Command::Submit(admitted) => {
                self.waiting.push_back(admitted);
                true
            }
            Command::Shutdown(Shutdown::Drain) => {
                self.draining = true;
                true
            }
            Command::Shutdown(Shutdown::Cancel) => {
                self.fail_all("the server is shutting down");
                false
            }
        }
    }

    fn fail_all(&mut self, why: &str) {
        for seq in self.running.drain(..) {
            let _ = seq.events.send(Event::Failed(why.to_string()));
            self.free_slots.push(seq.slot);
        }
        for admitted in self.waiting.drain(..) {
            let _ = admitted.events.send(Event::Failed(why.to_string()));
            self.shared.queued.fetch_sub(1, Ordering::AcqRel);
        }
        self.publish();
    }

    /// Frees the slots of generations whose client went away.
    fn drop_cancelled(&mut self) {
        let (shared, free) = (&self.shared, &mut self.free_slots);
        self.running.retain(|seq| {
            let gone = seq.events.is_closed();
            if gone {
                free.push(seq.slot);
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

    /// Moves waiting requests into free slots, in order of arrival.
    fn admit(&mut self) {
        while !self.free_slots.is_empty() {
            let Some(Admitted { request, events }) = self.waiting.pop_front() else { break };
            self.shared.queued.fetch_sub(1, Ordering::AcqRel);
            let Some(slot) = self.free_slots.pop() else { break };
            let context = self.model.context();
            let max_tokens = request.max_tokens.unwrap_or(context - request.prompt.len());
            let mut sampler = Sampler::new(request.sampling);
            for &id in &request.prompt {
                sampler.accept(id);
            }
            self.running.push(Seq {
                slot,
                events,
                prompt: request.prompt,
                read: 0,
                next: None,
                past: 0,
                generated: 0,
                max_tokens,
                sampler,
                stop_at_eog: request.stop_at_eog,
            });
        }
    }

    /// One batched step: the next token of every decoding sequence and a
    /// chunk of the prompts being read, within the prefill budget.
    fn step(&mut self) {
        let mut budget = self.options.prefill_chunk;
        let mut room = self.model.batch();
        // (index into running, tokens this step).
        let mut picked: Vec<(usize, usize)> = Vec::with_capacity(self.running.len());
        for (i, seq) in self.running.iter().enumerate() {
            let n = if seq.prefilling() { (seq.prompt.len() - seq.read).min(budget) } else { 1 };
            let n = n.min(room);
            if n == 0 {
                continue;
            }
            if seq.prefilling() {
                budget -= n;
            }
            room -= n;
            picked.push((i, n));
        }
        let steps: Vec<SeqStep<'_>> = picked
            .iter()
            .map(|&(i, n)| {
                let seq = &self.running[i];
                let tokens = match seq.next.as_ref() {
                    Some(next) if !seq.prefilling() => std::slice::from_ref(next),
                    _ => &seq.prompt[seq.read..seq.read + n],
                };
                SeqStep { slot: seq.slot, past: seq.past, tokens }
            })
            .collect();
        let logits = match self.model.eval_batch(&steps) {
            Ok(logits) => logits.to_vec(),
            Err(e) => {
                // A failed step leaves the sequences' caches unknown: end
                // every running sequence with the cause.
                let why = format!("the model failed: {e}");
                tracing::error!("{why}");
                for seq in self.running.drain(..) {
                    let _ = seq.events.send(Event::Failed(why.clone()));
                    self.free_slots.push(seq.slot);
                }
                return;
            }
        };
        self.shared.steps.fetch_add(1, Ordering::Relaxed);
        let vocab = self.model.config().vocab;
        // (index into running, its last event).
        let mut finished: Vec<(usize, Event)> = Vec::new();
        for (row, &(i, n)) in picked.iter().enumerate() {
            let seq = &mut self.running[i];
            seq.past += n;
            if seq.prefilling() {
                seq.read += n;
                self.shared.prompt.fetch_add(n as u64, Ordering::Relaxed);
                if seq.prefilling() {
                    continue;
                }
            }
            let row_logits = &logits[row * vocab..(row + 1) * vocab];
            let before = seq.generated;
            let end = match next_token(seq, row_logits, &self.model) {
                Ok(Some(reason)) => Some(seq.finish(reason)),
                Ok(None) => None,
                Err(why) => Some(Event::Failed(why)),
            };
            self.shared.generated.fetch_add((seq.generated - before) as u64, Ordering::Relaxed);
            if let Some(end) = end {
                finished.push((i, end));
            }
        }
        // The counters first, then the last events: a client that got its
        // last event sees the engine without it.
        let mut ends = Vec::with_capacity(finished.len());
        for (i, end) in finished.into_iter().rev() {
            let seq = self.running.remove(i);
            self.free_slots.push(seq.slot);
            ends.push((seq.events, end));
        }
        self.publish();
        for (events, end) in ends {
            let _ = events.send(end);
        }
    }

    fn publish(&self) {
        self.shared.running.store(self.running.len(), Ordering::Relaxed);
        self.shared.host_waits.store(self.model.host_waits(), Ordering::Relaxed);
    }
}

/// Samples the sequence's next token from its logits and sends it; returns
/// why the sequence ends, if it does.
fn next_token(seq: &mut Seq, logits: &[f32], model: &Model) -> Result<Option<FinishReason>, String> {
    let token = seq.sampler.sample(logits).map_err(|e| format!("sampling failed: {e}"))?;
    let tokenizer = model.tokenizer();
    let eog = Some(token) == tokenizer.eos_id() || tokenizer.token_type(token).is_ok_and(|t| t == TokenType::Control);
    if seq.stop_at_eog && eog {
        return Ok(Some(FinishReason::Stop));
    }
    seq.sampler.accept(token);
    seq.generated += 1;
    seq.next = Some(token);
    // A client that went away is noticed (and its slot freed) before the
    // next step.
    let _ = seq.events.send(Event::Token(token));
    if seq.generated >= seq.max_tokens || seq.past >= model.context() {
        return Ok(Some(FinishReason::Length));
    }
    Ok(None)
}
