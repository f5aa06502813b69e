//! The engine's thread: admits requests into slots, runs batched steps,
//! samples, and sends each sequence its tokens.

use std::any::Any;
use std::collections::VecDeque;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};

use baton_gen::speculative::{self, ModelDrafter, StepTimes};
use baton_gen::Sampler;
use baton_model::{BatchTicket, Model, ModelError, PoolFull, SeqStep, Tokenizer};

use super::embed_seq::EmbedSeq;
use super::host_cache::HostCache;
use super::mirror::{Mirror, MirrorCall};
use super::options::{EngineOptions, Shutdown};
use super::passes::QueuedPass;
use super::prefix::SlotCache;
use super::request::Event;
use super::score_seq::ScoreSeq;
use super::shared::{Admitted, Command, Shared};
pub(super) use drafters::{Drafters, HeadPool};
use seq::Seq;

/// Panics of the worker's turns, with no step completed between them,
/// after which the engine gives up (see [`Worker::run`]).
pub const MAX_PANICS_WITHOUT_A_STEP: u32 = 3;

/// The text of a panic's payload (what `panic!` was given).
fn panic_message(payload: &(dyn Any + Send)) -> String {
    match (payload.downcast_ref::<&str>(), payload.downcast_ref::<String>()) {
        (Some(text), _) => (*text).to_string(),
        (_, Some(text)) => text.clone(),
        _ => "a panic without a message".to_string(),
    }
}

/// A group's step in flight: its ticket, and the sequences it evaluates
/// with their token counts, in row order.
struct Flight {
    ticket: BatchTicket,
    picked: Vec<(u64, usize)>,
    /// Per picked entry: an embedding's rows, whose hidden states the step
    /// outputs.
    hidden: Vec<bool>,
    /// Per picked entry: a score's rows, each of which gives logits.
    every_logit: Vec<bool>,
    /// When it was submitted, and its rows in all (the step's time goes
    /// into the drafts' costs).
    timed: (std::time::Instant, usize),
}

mod cancel;
mod drafters;
mod drafts;
mod embeds;
mod heads;
mod pool;
mod reuse;
mod scores;
mod seq;
mod slots;

pub(super) struct Worker {
    model: Model,
    options: EngineOptions,
    shared: Arc<Shared>,
    inbox: mpsc::Receiver<Command>,
    waiting: VecDeque<Admitted>,
    running: Vec<Seq>,
    /// Sequences preempted for the blocks of a full pool, oldest first
    /// (`pool.rs`): they are readmitted before any waiting request.
    preempted: VecDeque<Seq>,
    free_slots: Vec<usize>,
    /// Set by a drain: stop once nothing runs or waits.
    draining: bool,
    /// Per group, its step in flight.
    flights: Vec<Option<Flight>>,
    next_id: u64,
    /// The model's tokenizer (end-of-generation tokens).
    tokenizer: Arc<Tokenizer>,
    /// What each slot's cache holds, for the next request's prefix.
    prefix: SlotCache,
    /// Prompts saved from slots that were reused (`--cache-ram`).
    host: HostCache,
    /// Serving over ranks: tells the other ranks each model call first.
    mirror: Option<Box<dyn Mirror>>,
    /// A rank stopped answering: the engine has stopped for good.
    dead: bool,
    /// Embeddings riding the steps (`embeds.rs`).
    embeds: Vec<EmbedSeq>,
    /// Prompts' scores riding the steps (`scores.rs`).
    scores: Vec<ScoreSeq>,
    /// Single passes (embeddings, prompt scores) waiting for a free slot,
    /// in order of arrival.
    passes: VecDeque<QueuedPass>,
    /// A draft model drafting for the sequences that draft (`drafts.rs`),
    /// in place of n-grams.
    drafter: Option<ModelDrafter>,
    /// The model's prediction head's drafters (`heads.rs`), for the
    /// sequences that draft with it.
    heads: Option<HeadPool>,
    /// What its steps take per row count, as they run (the drafts' costs).
    step_times: StepTimes,
}

impl Worker {
    pub(super) fn new(
        model: Model,
        options: EngineOptions,
        shared: Arc<Shared>,
        inbox: mpsc::Receiver<Command>,
        (mirror, drafters): (Option<Box<dyn Mirror>>, Drafters),
    ) -> Worker {
        let free_slots = (0..options.parallel).rev().collect();
        let prefix = SlotCache::new(options.parallel, options.ctx_checkpoints);
        let host = HostCache::new(options.cache_ram);
        // A group per device of a layer split (each device works on another
        // group's step), no more than runs may be in flight or there are
        // sequences. One device gets one group: halves of the batch would
        // read every weight twice and overlap nothing.
        let devices = model.placement().0.len();
        let tokenizer = model.shared_tokenizer();
        let groups = model.runs_in_flight().min(devices).clamp(1, options.parallel);
        let step_times = StepTimes::new(options.spec.cost);
        Worker {
            model,
            options,
            shared,
            inbox,
            waiting: VecDeque::new(),
            running: Vec::new(),
            preempted: VecDeque::new(),
            free_slots,
            draining: false,
            flights: (0..groups).map(|_| None).collect(),
            next_id: 0,
            tokenizer,
            prefix,
            host,
            mirror,
            dead: false,
            embeds: Vec::new(),
            scores: Vec::new(),
            passes: VecDeque::new(),
            drafter: drafters.model,
            heads: drafters.heads,
            step_times,
        }
    }

    /// The worker's loop: a turn at a time until a shutdown, the last
    /// handle's drop, or a failure that makes the engine unusable. A panic
    /// inside a turn (a bug: the model, the sampler or this loop broke an
    /// invariant) is caught there: the sequences of the steps in flight fail
    /// with its message (their caches may be half written) and the engine
    /// goes on. [`MAX_PANICS_WITHOUT_A_STEP`] panics with no step completed
    /// between them mean the model itself is broken: the engine then
    /// records the cause (which [`Engine::state`](super::Engine::state)
    /// and `/health` report), fails every request and stops.
    pub(super) fn run(mut self) {
        self.run_turns();
        if let Some(mirror) = self.mirror.as_mut() {
            // The other ranks end with the engine (they may be gone).
            let _ = mirror.tell(&MirrorCall::Stop);
        }
    }

    fn run_turns(&mut self) {
        let mut panics = 0;
        loop {
            let steps_before = self.shared.steps.load(Ordering::Relaxed);
            match panic::catch_unwind(AssertUnwindSafe(|| self.turn())) {
                Ok(true) => {}
                Ok(false) => return,
                Err(payload) => {
                    let why = format!("the engine failed: {}", panic_message(payload.as_ref()));
                    tracing::error!("{why}");
                    self.shared.panics.fetch_add(1, Ordering::Relaxed);
                    if self.shared.steps.load(Ordering::Relaxed) != steps_before {
                        panics = 0;
                    }
                    panics += 1;
                    // Steps in flight hold sequences whose caches may be half
                    // written: they fail; waiting requests stay queued.
                    self.flights.iter_mut().for_each(|flight| *flight = None);
                    let running: Vec<_> = self.running.drain(..).collect();
                    for seq in running {
                        self.free_slots.push(seq.slot);
                        self.prefix.clear(seq.slot);
                        self.shared.ended_failed.fetch_add(1, Ordering::Relaxed);
                        let _ = seq.events.send(Event::Failed(why.clone()));
                    }
                    self.fail_embeds(None, &why);
                    self.fail_scores(None, &why);
                    if panics >= MAX_PANICS_WITHOUT_A_STEP {
                        return self.die(&why);
                    }
                    self.publish();
                }
            }
        }
    }

    /// One turn: takes the commands that came, admits, runs a round of
    /// steps; `false` when the worker must stop.
    fn turn(&mut self) -> bool {
        let in_flight = self.flights.iter().any(Option::is_some);
        let nothing = self.running.is_empty()
            && self.embeds.is_empty()
            && self.scores.is_empty()
            && self.waiting.is_empty()
            && self.preempted.is_empty();
        if nothing && self.passes.is_empty() && !in_flight {
            if self.draining {
                return false;
            }
            // Idle: block until something comes (or every handle is gone);
            // over ranks, telling them now and then that all is well.
            let command = match self.mirror.as_ref().map(|m| m.idle_interval()) {
                None => self.inbox.recv().ok(),
                Some(interval) => loop {
                    match self.inbox.recv_timeout(interval) {
                        Ok(command) => break Some(command),
                        Err(mpsc::RecvTimeoutError::Disconnected) => break None,
                        Err(mpsc::RecvTimeoutError::Timeout) => {
                            if !self.tell(&MirrorCall::Idle) {
                                return false;
                            }
                        }
                    }
                },
            };
            match command {
                Some(command) => {
                    if !self.handle(command) {
                        return false;
                    }
                }
                None => return false,
            }
        }
        while let Ok(command) = self.inbox.try_recv() {
            if !self.handle(command) {
                return false;
            }
        }
        self.drop_cancelled();
        self.run_passes();
        self.admit();
        self.round();
        self.publish();
        !self.dead
    }

    /// Tells the other ranks `call` (serving over ranks); `false` when one
    /// stopped, went silent or failed: the engine has then stopped.
    fn tell(&mut self, call: &MirrorCall) -> bool {
        if self.dead {
            return false;
        }
        let Some(mirror) = self.mirror.as_mut() else { return true };
        match mirror.tell(call) {
            Ok(()) => true,
            Err(why) => {
                self.ranks_failed(&why);
                false
            }
        }
    }

    /// Over ranks, a failure of a call every rank makes leaves the ranks
    /// out of step: the engine stops, failing every request.
    fn ranks_failed(&mut self, why: &str) {
        self.dead = true;
        self.die(&format!("serving over ranks: {why}"));
    }

    /// Stops the engine for good after `why`: records it, refuses new
    /// requests and fails every request it holds or that is still on its
    /// way in.
    fn die(&mut self, why: &str) {
        tracing::error!("the engine stops: {why}");
        *self.shared.failure.lock() = Some(why.to_string());
        self.shared.accepting.store(false, Ordering::Release);
        while let Ok(command) = self.inbox.try_recv() {
            match command {
                Command::Submit(admitted) => self.waiting.push_back(*admitted),
                Command::Passes(jobs) => self.passes.extend(QueuedPass::request(jobs)),
                _ => {}
            }
        }
        self.fail_all(why);
    }

    /// Takes one command; `false` when the worker must stop now.
    fn handle(&mut self, command: Command) -> bool {
        match command {
            Command::Submit(admitted) => {
                self.waiting.push_back(*admitted);
                true
            }
            Command::Passes(jobs) => {
                self.passes.extend(QueuedPass::request(jobs));
                true
            }
            Command::Lend(job) => {
                match self.mirror {
                    Some(_) => job(Err(super::lend::NOT_OVER_RANKS)),
                    None => job(Ok(&mut self.model)),
                }
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
            #[cfg(feature = "fault-injection")]
            Command::Panic => panic!("a fault injected by a test"),
        }
    }

    fn fail_all(&mut self, why: &str) {
        for seq in self.running.drain(..) {
            self.shared.ended_failed.fetch_add(1, Ordering::Relaxed);
            self.prefix.clear(seq.slot);
            let _ = seq.events.send(Event::Failed(why.to_string()));
            self.free_slots.push(seq.slot);
        }
        self.fail_preempted(why);
        for admitted in self.waiting.drain(..) {
            self.shared.ended_failed.fetch_add(1, Ordering::Relaxed);
            let _ = admitted.events.send(Event::Failed(why.to_string()));
            self.shared.queued.fetch_sub(1, Ordering::AcqRel);
        }
        for QueuedPass { job, holds_place } in self.passes.drain(..) {
            job.fail(why);
            if holds_place {
                self.shared.queued.fetch_sub(1, Ordering::AcqRel);
            }
        }
        self.fail_embeds(None, why);
        self.fail_scores(None, why);
        self.publish();
    }

    /// Runs waiting single passes (`passes.rs`) on free slots, before the
    /// waiting generations take them (a pass is one forward pass). A client
    /// that went away is skipped.
    fn run_passes(&mut self) {
        while let Some(&slot) = self.free_slots.last() {
            let Some(QueuedPass { job, holds_place }) = self.passes.pop_front() else { break };
            if holds_place {
                self.shared.queued.fetch_sub(1, Ordering::AcqRel);
            }
            if job.abandoned() {
                self.shared.cancelled.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            // The slot's cache is overwritten from position 0 whatever
            // happens next: it no longer holds the prefix it held.
            let owner = self.prefix.scope(slot);
            self.save_to_ram(slot, owner, &[]);
            self.prefix.clear(slot);
            self.shared.prompt.fetch_add(job.tokens() as u64, Ordering::Relaxed);
            if self.mirror.is_some() && job.is_embedding() {
                // The model reads hidden states on one process only.
                job.fail(
                    "embeddings are not served over ranks (a model split over processes); serve them from one process",
                );
                continue;
            }
            let job = if self.model.hidden_in_steps() && self.mirror.is_none() {
                // It rides the steps on this slot (an embedding or a score).
                self.free_slots.pop();
                match self.embed_in_steps(job, slot).or_else(|job| self.score_in_steps(job, slot)) {
                    Ok(()) => continue,
                    Err(job) => {
                        self.free_slots.push(slot);
                        job
                    }
                }
            } else {
                job
            };
            if !self.tell(&job.mirror_call(slot)) {
                return job.fail("serving over ranks: a rank stopped");
            }
            job.run(&mut self.model, slot);
        }
    }

    /// Moves preempted sequences, then waiting requests, into free slots,
    /// in order of arrival, while the pool of a paged cache has room for
    /// them (`pool.rs`).
    fn admit(&mut self) {
        self.resume_preempted();
        while !self.free_slots.is_empty() && self.preempted.is_empty() {
            // The first waiting request may wait for a running one to read
            // the start of the prompt they share, or for blocks (requests
            // behind it wait too: arrival order holds).
            let Some(next) = self.waiting.front() else { break };
            let scope = next.request.cache_scope;
            if self.waits_for_shared_prompt(&next.request.prompt, scope) {
                break;
            }
            // The prompt is read where it waits, not copied per attempt.
            let need = self.blocks_to_admit(&next.request.prompt, scope);
            if !self.pool_has_room(need) {
                break;
            }
            let Some(Admitted { request, events, submitted, spec }) = self.waiting.pop_front() else { break };
            self.shared.queued.fetch_sub(1, Ordering::AcqRel);
            let Some((slot, cached)) = self.take_slot(&request.prompt, scope) else {
                self.shared.queued.fetch_add(1, Ordering::AcqRel);
                self.waiting.push_front(Admitted { request, events, submitted, spec });
                break;
            };
            self.shared.prompt_cached.fetch_add(cached as u64, Ordering::Relaxed);
            let _ = events.send(Event::Started { cached_tokens: cached });
            let group = self.least_loaded_group();
            self.next_id += 1;
            let context = self.model.context();
            let max_tokens = request.max_tokens.unwrap_or(context - request.prompt.len());
            let mut sampler = Sampler::new(request.sampling);
            for &id in &request.prompt {
                sampler.accept(id);
            }
            let spec = self.speculation(spec);
            self.running.push(Seq {
                id: self.next_id,
                slot,
                group,
                events,
                prompt: request.prompt,
                read: cached,
                next: None,
                past: cached,
                generated: 0,
                max_tokens,
                sampler,
                stop_at_eog: request.stop_at_eog,
                submitted,
                last_token: None,
                logprobs: request.logprobs,
                post_sampling: request.post_sampling,
                cached,
                sent: Vec::new(),
                constraint: request.format.constraint(),
                scope,
                spec,
                step: Vec::new(),
                replayed: 0,
            });
        }
        // Before the first step: a submit that sees the first token sees
        // the slot taken.
        self.publish();
    }

    /// Whether this engine's steps can verify drafts: every row of a
    /// sequence gives logits on one process only, and the model's state
    /// must be one that rejected positions can be cut back from.
    fn verifies_drafts(&self) -> bool {
        self.mirror.is_none() && self.model.hidden_in_steps() && speculative::check_model(&self.model).is_ok()
    }

    /// The group with the fewest sequences (embeddings included).
    fn least_loaded_group(&self) -> usize {
        let load = |g: usize| {
            self.running.iter().filter(|s| s.group == g).count()
                + self.embeds.iter().filter(|e| e.group == g).count()
                + self.scores.iter().filter(|s| s.group == g).count()
        };
        (0..self.flights.len()).min_by_key(|&g| load(g)).unwrap_or(0)
    }

    /// One round: for each group of sequences, the logits of its step in
    /// flight are read and sampled, and its next step is submitted. With
    /// several groups (runs in flight), one group's step runs on the later
    /// devices of a layer split while the next group's runs on the first.
    fn round(&mut self) {
        for group in 0..self.flights.len() {
            if self.dead {
                return;
            }
            if let Some(flight) = self.flights[group].take() {
                self.process(flight, group);
            }
            self.submit(group);
        }
    }

    /// Submits the next step of `group`: the next token of each of its
    /// decoding sequences and a chunk of the prompts it is reading, within
    /// the prefill budget. A step that finds a paged cache's pool full is
    /// tried again once room is made (`pool.rs`: each try gives back an
    /// idle slot's blocks or takes a sequence out, so the tries end).
    fn submit(&mut self, group: usize) {
        while let Some((full, picked)) = self.submit_once(group) {
            if !self.make_room(&full) {
                return self.fail(&picked, &format!("the model failed: {full}"));
            }
        }
    }

    /// Submits the next step of `group` (see [`submit`](Self::submit));
    /// the pool's refusal and the step's entries when it found it full.
    fn submit_once(&mut self, group: usize) -> Option<(PoolFull, Vec<(u64, usize)>)> {
        let mut budget = self.options.prefill_chunk;
        let mut room = self.model.batch();
        // Drafts take the room that one token per sequence and a prompt
        // chunk leave.
        let (context, in_group) = (self.model.context(), self.running.iter().filter(|s| s.group == group).count());
        let prefill = self.running.iter().any(|s| s.group == group && s.prefilling());
        let mut rows = in_group + if prefill { budget } else { 0 };
        // Sequences drafting with the draft model: (index, drafts, rows).
        let mut asks = Vec::new();
        let by_model = self.drafter.is_some();
        // A hybrid model cuts back to the positions whose states it keeps.
        let mut kept = self.model.rewind_rows().unwrap_or(usize::MAX);
        for (i, seq) in self.running.iter_mut().enumerate().filter(|(_, s)| s.group == group) {
            let ask = (room.saturating_sub(rows).min(kept), rows, &self.step_times);
            let drafts = match seq.prepare_step(ask, context, by_model) {
                0 => seq.step.len().saturating_sub(1),
                k => {
                    asks.push((i, k, rows));
                    k
                }
            };
            rows += drafts;
            kept = kept.saturating_sub(drafts);
        }
        self.draft_with_model(&asks);
        let mut picked: Vec<(u64, usize)> = Vec::new();
        let mut steps: Vec<SeqStep<'_>> = Vec::new();
        // A hybrid model's prompt stops one token short of its end for a
        // checkpoint there (`take_checkpoints`).
        let stop = usize::from(self.takes_checkpoints());
        let mut every_logit = Vec::new();
        // The sequences whose head drafts read their rows' hidden states.
        let mut hidden = Vec::new();
        // Sequences with drafts first, the most rows first: a step's shape
        // (which the model plans once and caches) then depends on how many
        // sequences carry how many rows, not on which ones do.
        let mut order: Vec<&Seq> = self.running.iter().filter(|s| s.group == group).collect();
        order.sort_by_key(|s| (s.prefilling(), std::cmp::Reverse(s.step.len())));
        for seq in order {
            let end = if seq.read + stop < seq.prompt.len() { seq.prompt.len() - stop } else { seq.prompt.len() };
            let n = if seq.prefilling() { (end - seq.read).min(budget) } else { seq.step.len().max(1) };
            let n = n.min(room);
            if n == 0 {
                continue;
            }
            let tokens = match seq.next.as_ref() {
                Some(_) if !seq.prefilling() && !seq.step.is_empty() => &seq.step[..n],
                Some(next) if !seq.prefilling() => std::slice::from_ref(next),
                _ => &seq.prompt[seq.read..seq.read + n],
            };
            // A sequence's drafts: every row gives logits.
            every_logit.push(!seq.prefilling() && n > 1);
            hidden.push(seq.reads_hidden(n));
            if seq.prefilling() {
                budget -= n;
            }
            room -= n;
            picked.push((seq.id, n));
            steps.push(SeqStep { slot: seq.slot, past: seq.past, tokens });
        }
        // Embeddings ride in the prefill budget left (`embeds.rs`).
        for embed in self.embeds.iter().filter(|e| e.group == group) {
            let n = (embed.tokens.len() - embed.read).min(budget).min(room);
            if n == 0 {
                continue;
            }
            budget -= n;
            room -= n;
            picked.push((embed.id, n));
            steps.push(SeqStep {
                slot: embed.slot,
                past: embed.read,
                tokens: &embed.tokens[embed.read..embed.read + n],
            });
            hidden.push(true);
        }
        // Scores ride in what is left (`scores.rs`), every row giving
        // logits.
        every_logit.resize(steps.len(), false);
        for score in self.scores.iter().filter(|s| s.group == group) {
            let n = (score.tokens.len() - score.read).min(budget).min(room);
            if n == 0 {
                continue;
            }
            budget -= n;
            room -= n;
            picked.push((score.id, n));
            steps.push(SeqStep {
                slot: score.slot,
                past: score.read,
                tokens: &score.tokens[score.read..score.read + n],
            });
            hidden.push(false);
            every_logit.push(true);
        }
        if steps.is_empty() || self.dead {
            return None;
        }
        if let Some(mirror) = self.mirror.as_mut() {
            // The fields apart: `steps` borrows the running sequences.
            if let Err(why) = mirror.tell(&MirrorCall::step(group, &steps)) {
                drop(steps);
                self.ranks_failed(&why);
                return None;
            }
        }
        let timed = (std::time::Instant::now(), picked.iter().map(|&(_, n)| n).sum());
        let submitted = match (hidden.contains(&true), every_logit.contains(&true)) {
            (_, true) => self.model.submit_batch_rows(&steps, &hidden, &every_logit),
            (true, false) => self.model.submit_batch_hidden(&steps, &hidden),
            (false, false) => self.model.submit_batch(&steps),
        };
        match submitted {
            Ok(ticket) => self.flights[group] = Some(Flight { ticket, picked, hidden, every_logit, timed }),
            Err(ModelError::PoolFull(full)) if self.mirror.is_none() => return Some((full, picked)),
            Err(e) if self.mirror.is_some() => self.ranks_failed(&format!("the model failed: {e}")),
            Err(e) => self.fail(&picked, &format!("the model failed: {e}")),
        }
        None
    }

    /// Reads a step's logits, samples each sequence's next token and sends
    /// it; ends the sequences that are done.
    fn process(&mut self, flight: Flight, group: usize) {
        let Flight { ticket, picked, hidden, every_logit, timed: (submitted, step_rows) } = flight;
        if !self.tell(&MirrorCall::Logits { group: group as u32 }) {
            return;
        }
        let Some(states) = self.read_hidden(&ticket, &picked, &hidden) else { return };
        // Each entry's hidden rows, for the sequences whose head drafts.
        let (dim, hidden_at) = (self.model.config().dim, Self::hidden_starts(&picked, &hidden));
        let hidden_rows = |k: usize, n: usize| hidden_at[k].and_then(|r| states.get(r * dim..(r + n) * dim));
        let (vocab, context) = (self.model.config().vocab, self.model.context());
        // Read in place: the loop below touches other fields only.
        let logits = match self.model.batch_logits(ticket) {
            Ok(logits) => logits,
            Err(e) if self.mirror.is_some() => return self.ranks_failed(&format!("the model failed: {e}")),
            Err(e) => return self.fail(&picked, &format!("the model failed: {e}")),
        };
        let seconds = submitted.elapsed().as_secs_f64();
        self.step_times.observe(step_rows, seconds);
        let prompt_rows = picked.iter().filter(|(id, _)| self.running.iter().any(|s| s.id == *id && s.prefilling()));
        self.shared.count_step(seconds, (prompt_rows.map(|&(_, n)| n).sum(), step_rows), picked.len());
        // (index into running, its last event).
        let mut finished: Vec<(usize, Event)> = Vec::new();
        let mut prompts_done = Vec::new();
        // The slots that verified drafts, and the positions they accepted.
        let mut cuts = Vec::new();
        let mut step_tokens = 0;
        // Each entry's first row: a flagged entry gives a row per token.
        let mut next_row = 0;
        for (k, &(id, n)) in picked.iter().enumerate() {
            let row = next_row;
            next_row += if every_logit.get(k) == Some(&true) { n } else { 1 };
            // A sequence cancelled while its step ran is gone.
            let Some(i) = self.running.iter().position(|s| s.id == id) else { continue };
            let seq = &mut self.running[i];
            let from = seq.past;
            let evaluated = match seq.prefilling() {
                true => {
                    seq.read += n;
                    self.shared.prompt.fetch_add(n as u64, Ordering::Relaxed);
                    let _ = seq.events.send(Event::Progress { read: seq.read });
                    if seq.read + 1 == seq.prompt.len() {
                        prompts_done.push(seq.id);
                    }
                    // The prompt's tokens but the last are in the cache;
                    // the last one's row is taken as a decoding row.
                    seq.past += n - 1;
                    if seq.prefilling() {
                        seq.past += 1;
                        if let Some(rows) = hidden_rows(k, n) {
                            seq.observe_step(from, rows, dim);
                        }
                        continue;
                    }
                    1
                }
                false => n,
            };
            let rows = &logits[row * vocab..(row + evaluated.min(next_row - row)) * vocab];
            let before = seq.generated;
            let taken = seq.take_rows(rows, evaluated, (&self.tokenizer, vocab, context, &self.shared));
            if let Some(rows) = hidden_rows(k, n) {
                seq.observe_step(from, rows, dim);
            }
            if evaluated > 1 {
                cuts.push((i, seq.slot, seq.past));
            }
            let end = match taken {
                Ok(Some(reason)) => Some(seq.finish(reason)),
                Ok(None) => None,
                Err(why) => Some(Event::Failed(why)),
            };
            let made = (seq.generated - before) as u64;
            self.shared.generated.fetch_add(made, Ordering::Relaxed);
            step_tokens += made;
            if let Some(end) = end {
                finished.push((i, end));
            }
        }
        if every_logit.contains(&true) {
            super::score_seq::take_score_rows(&mut self.scores, &picked, &every_logit, logits, vocab);
        }
        // The rejected drafts' positions are not the sequences'.
        for (i, slot, past) in cuts {
            if let Err(e) = self.model.cut_back(slot, past) {
                let failed = Event::Failed(format!("the model failed: {e}"));
                match finished.iter_mut().find(|(j, _)| *j == i) {
                    Some(entry) => entry.1 = failed,
                    None => finished.push((i, failed)),
                }
            }
        }
        self.take_checkpoints(&prompts_done);
        // The counters first, then the last events: a client that got its
        // last event sees the engine without it.
        self.shared.throughput.add(step_tokens);
        finished.sort_by_key(|(i, _)| std::cmp::Reverse(*i));
        let mut ends = Vec::with_capacity(finished.len());
        for (i, end) in finished {
            self.shared.count_end(&end);
            let mut seq = self.running.remove(i);
            self.give_back_head(&mut seq);
            if matches!(end, Event::Failed(_)) {
                self.prefix.clear(seq.slot);
            } else {
                self.prefix.store(seq.slot, seq.scope, seq.in_cache());
            }
            self.free_slots.push(seq.slot);
            ends.push((seq.events, end));
        }
        self.send_scores();
        self.publish();
        for (events, end) in ends {
            let _ = events.send(end);
        }
    }

    /// Ends the `picked` sequences with `why` (their step failed: their
    /// caches are unknown).
    fn fail(&mut self, picked: &[(u64, usize)], why: &str) {
        tracing::error!("{why}");
        let mut ends = Vec::new();
        self.running.retain(|seq| {
            let hit = picked.iter().any(|&(id, _)| id == seq.id);
            if hit {
                ends.push((seq.events.clone(), seq.slot));
            }
            !hit
        });
        for (events, slot) in ends {
            self.free_slots.push(slot);
            self.prefix.clear(slot);
            self.shared.ended_failed.fetch_add(1, Ordering::Relaxed);
            let _ = events.send(Event::Failed(why.to_string()));
        }
        self.fail_embeds(Some(picked), why);
        self.fail_scores(Some(picked), why);
        self.publish();
    }

    fn publish(&self) {
        self.publish_slots();
        self.shared.running.store(self.running.len(), Ordering::Relaxed);
        self.shared.free.store(self.free_slots.len(), Ordering::Release);
        self.shared.host_waits.store(self.model.host_waits(), Ordering::Relaxed);
        let positions: usize = self.running.iter().map(|s| s.past).sum();
        self.shared.kv_positions.store(positions as u64, Ordering::Relaxed);
        let blocks = self.model.kv_blocks().unwrap_or_default();
        let values =
            [blocks.blocks, blocks.used, blocks.shared, blocks.held, blocks.holders, self.model.kv_block_bytes()];
        for (gauge, value) in self.shared.kv_blocks.iter().zip(values) {
            gauge.store(value as u64, Ordering::Relaxed);
        }
    }

    /// Publishes what host memory holds (`--cache-ram`).
    fn publish_host(&self) {
        self.shared.ram_prompts.store(self.host.len(), Ordering::Relaxed);
        self.shared.ram_bytes.store(self.host.used() as u64, Ordering::Relaxed);
    }
}
