//! The engine: one thread that owns the model and batches every running
//! sequence into each step (continuous batching).
//!
//! [`Engine::submit`] checks a request against the model (prompt length,
//! context, sampling parameters) and the queue's limit, and returns a
//! [`Generation`] at once, or a [`SubmitError`] that says why not (nothing
//! is queued then). The worker thread takes waiting requests into free
//! sequence slots between steps, in order of arrival. Each step evaluates,
//! in one batched forward pass, the next token of every decoding sequence
//! and one chunk (at most [`EngineOptions::prefill_chunk`] tokens) of a
//! prompt being read, so a long new prompt delays the others' next tokens
//! by at most one chunk's work. Generated tokens go to their
//! [`Generation`] as [`Event`]s; dropping a `Generation` (a client that went
//! away, or one whose stop string matched) frees its slot before the next
//! step.
//!
//! A request takes the free slot whose cache holds the longest prefix of
//! its prompt (the slot's last sequence's tokens) and evaluates only the
//! rest (`prefix.rs`); [`Event::Started`] and [`Finish`] say how many
//! tokens it reused. Only requests of the same [`CacheScope`]
//! ([`GenerateRequest::cache_scope`]) reuse each other's tokens.
//!
//! Over a layer split of several devices whose model keeps several runs in
//! flight (`LoadOptions::n_copies`), the sequences are dealt into that many
//! groups, and each group keeps one step in flight: while the last device
//! finishes one group's step, the first starts the next group's, and the
//! host samples one group while the devices run the others.

mod embed_seq;
mod grammars;
mod host_cache;
mod lend;
mod metrics;
mod mirror;
mod options;
mod passes;
mod prefix;
mod request;
mod scope;
mod score_seq;
mod shared;
mod slot_view;
mod worker;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};

use baton_core::loom::plain::Mutex;
use std::thread::JoinHandle;

use baton_model::{Model, Pooling, Tokenizer};
use tokio::sync::mpsc as tmpsc;

/// A token's log-probability and its likeliest alternatives (baton-gen's).
pub use baton_gen::TokenLogprobs;
pub use grammars::Grammars;
pub use metrics::{HistogramSnapshot, LATENCY_BUCKETS, THROUGHPUT_WINDOW};
pub use mirror::{follow, follow_with, DecodeError, Mirror, MirrorCall};
pub use options::{EngineOptions, Shutdown};
pub use passes::{EmbeddingTicket, PassTicket, ScoreTicket};
pub use request::{Event, Finish, FinishReason, GenerateRequest, OutputFormat, SubmitError, MAX_TOP_LOGPROBS};
pub use scope::CacheScope;
pub use slot_view::SlotView;
pub use worker::MAX_PANICS_WITHOUT_A_STEP;

use baton_gen::speculative::SpecType;
use shared::{Admitted, Command, Shared};
use worker::Drafters;

/// What the server needs to know about the model.
#[derive(Clone, Debug)]
pub struct ModelInfo {
    /// The model's name (the file's stem, or the known model's name).
    pub name: String,
    /// Positions of one sequence's context (prompt plus generated tokens).
    pub context: usize,
    /// Vocabulary size.
    pub vocab: usize,
    /// The hidden size (an embedding's width).
    pub dim: usize,
    /// The model's chat template, if the file has one.
    pub chat_template: Option<String>,
    /// The end-of-text token.
    pub eos: Option<u32>,
    /// The vocabulary grammars compile against (`response_format`,
    /// `grammar`), built when first needed.
    pub grammars: Grammars,
}

/// Counters of the engine, read at any time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Requests running now.
    pub running: usize,
    /// Requests waiting for a slot now.
    pub queued: usize,
    /// Steps (batched forward passes) so far.
    pub steps: u64,
    /// Tokens generated so far.
    pub generated_tokens: u64,
    /// Prompt tokens read so far.
    pub prompt_tokens: u64,
    /// Times the worker's host thread blocked on the devices so far.
    pub host_waits: u64,
    /// Generations dropped by their client before they finished.
    pub cancelled: u64,
    /// Panics caught in the engine's turns (each failed the sequences of
    /// the steps in flight; see [`EngineState`]).
    pub panics: u64,
}

/// Everything `GET /metrics` reports, read at one time.
#[derive(Clone, Debug)]
pub struct EngineMetrics {
    /// The counters.
    pub stats: EngineStats,
    /// Generations ended at an end-of-generation token.
    pub ended_stop: u64,
    /// Generations ended at `max_tokens` or the context's end.
    pub ended_length: u64,
    /// Generations ended by a failure.
    pub ended_failed: u64,
    /// Prompt tokens whose keys and values came from the prefix cache.
    pub prompt_tokens_cached: u64,
    /// Sequence slots (`--parallel`), and those running now.
    pub slots: usize,
    /// Cache positions the running sequences hold, and all the slots hold
    /// at most (`slots` times the context).
    pub kv_positions_used: u64,
    /// `slots` times the context.
    pub kv_positions_total: u64,
    /// A paged KV cache's blocks (of 64 positions): `[pool, used, shared,
    /// held, holders, block bytes]`, held counting a shared block once per
    /// sequence holding it, holders the slots holding any; all 0 without a
    /// paged cache.
    pub kv_blocks: [u64; 6],
    /// Time from a request's submission to its first token.
    pub time_to_first_token: HistogramSnapshot,
    /// Time between two tokens of one sequence.
    pub inter_token_latency: HistogramSnapshot,
    /// Tokens generated per second over the last [`THROUGHPUT_WINDOW`].
    pub tokens_per_second: f64,
    /// Prompts whose keys and values host memory holds (`--cache-ram`).
    pub cache_ram_prompts: usize,
    /// Their bytes.
    pub cache_ram_bytes: u64,
    /// Drafted tokens verified (speculative decoding).
    pub drafted_tokens: u64,
    /// Of those, the ones accepted.
    pub accepted_tokens: u64,
    /// Running sequences preempted for the blocks of a full KV pool (each
    /// read its history again when readmitted).
    pub kv_preemptions: u64,
    /// Sequences' steps that verified drafts.
    pub draft_verifications: u64,
    /// Seconds of steps (submission to logits) spent on prompt rows: each
    /// step's time shared out by its rows' count.
    pub prompt_seconds: f64,
    /// The same on the other rows (generated tokens, drafts).
    pub decode_seconds: f64,
    /// Sequences in the steps so far, summed over the steps.
    pub step_sequences: u64,
    /// The most positions a sequence has held (prompt and generated).
    pub longest_sequence: u64,
}

/// Whether the engine can take requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EngineState {
    /// It takes requests.
    Running,
    /// It stopped taking requests for a shutdown.
    ShuttingDown,
    /// It stopped for good after a failure; the text says why.
    Failed(String),
}

/// A handle to the engine; clones share it. The worker stops when
/// [`shutdown`](Self::shutdown) is called or the last handle is dropped.
#[derive(Clone)]
pub struct Engine {
    info: Arc<ModelInfo>,
    tokenizer: Arc<Tokenizer>,
    options: EngineOptions,
    /// Whether it drafts with the model's prediction head ([`Engine::start_mtp`]).
    heads: bool,
    shared: Arc<Shared>,
    commands: mpsc::Sender<Command>,
    worker: Arc<Mutex<Option<JoinHandle<()>>>>,
}

/// Why the engine could not start.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The options do not suit the model.
    #[error("{0}")]
    Options(String),
    /// The model's prediction head cannot draft (`--spec-type mtp`).
    #[error(transparent)]
    Speculation(#[from] baton_gen::speculative::SpecError),
    /// The worker thread could not be started.
    #[error("could not start the engine's thread: {0}")]
    Thread(#[from] std::io::Error),
}

impl Engine {
    /// Starts the worker thread, which owns `model` from now on.
    pub fn start(model: Model, name: impl Into<String>, options: EngineOptions) -> Result<Engine, EngineError> {
        Self::start_with(model, name, options, None, Drafters::default())
    }

    /// As [`start`](Self::start), drafting with `drafter` (a draft model of
    /// the same vocabulary with a slot for each of `options.parallel`
    /// sequences, llama-server's `-md`) for the requests that draft:
    /// each step's drafting sequences draft together, a step of the draft
    /// model per drafted token, and the target verifies them in its step.
    /// The tokens are those without drafts.
    pub fn start_drafting(
        model: Model,
        drafter: baton_gen::speculative::ModelDrafter,
        name: impl Into<String>,
        options: EngineOptions,
    ) -> Result<Engine, EngineError> {
        if drafter.slots() < options.parallel {
            return Err(EngineError::Options(format!(
                "the draft model has {} sequence slots, {} are asked for",
                drafter.slots(),
                options.parallel
            )));
        }
        Self::start_with(model, name, options, None, Drafters { model: Some(drafter), heads: None })
    }

    /// As [`start`](Self::start), drafting with the model's own prediction
    /// head (`--spec-type mtp`, Qwen 3.5's MTP block) for the requests that
    /// draft with it: `path` is the file `model` was loaded from, whose head
    /// each running sequence drafts with ([`MtpDrafter`], one each, with
    /// its own keys and values of the head's rows). The steps read the
    /// hidden states of the sequences whose head drafts, with their
    /// logits. The tokens are those without drafts.
    ///
    /// # Errors
    /// [`EngineError::Speculation`] when the file holds no prediction block,
    /// the model's steps cannot give their hidden states (a
    /// tensor-parallel split) or the head cannot be read; as
    /// [`start`](Self::start) otherwise.
    ///
    /// [`MtpDrafter`]: baton_gen::speculative::MtpDrafter
    pub fn start_mtp(
        model: Model,
        path: &std::path::Path,
        name: impl Into<String>,
        options: EngineOptions,
    ) -> Result<Engine, EngineError> {
        let heads = Some(worker::HeadPool::open(path, &model, options.parallel)?);
        Self::start_with(model, name, options, None, Drafters { model: None, heads })
    }

    /// As [`start`](Self::start), for a model split over the ranks of an
    /// MPI job, on rank 0: `mirror` tells the other ranks (which run
    /// [`follow`]) each call they make with it. A rank that stops, goes
    /// silent or fails stops the engine ([`EngineState::Failed`]), failing
    /// every request.
    pub fn start_mirrored(
        model: Model,
        name: impl Into<String>,
        options: EngineOptions,
        mirror: Box<dyn Mirror>,
    ) -> Result<Engine, EngineError> {
        Self::start_with(model, name, options, Some(mirror), Drafters::default())
    }

    fn start_with(
        mut model: Model,
        name: impl Into<String>,
        options: EngineOptions,
        mirror: Option<Box<dyn Mirror>>,
        drafters: Drafters,
    ) -> Result<Engine, EngineError> {
        if options.parallel == 0 || options.prefill_chunk == 0 {
            return Err(EngineError::Options("parallel and prefill_chunk must be at least 1".into()));
        }
        if model.slots() < options.parallel + options.lent_slots {
            return Err(EngineError::Options(format!(
                "the model has {} sequence slots, {} are asked for ({} lent)",
                model.slots(),
                options.parallel + options.lent_slots,
                options.lent_slots
            )));
        }
        if options.spec.kind == SpecType::Mtp && drafters.heads.is_none() {
            return Err(EngineError::Options(
                "drafting with the model's prediction head by default takes its heads (Engine::start_mtp)".into(),
            ));
        }
        let heads = drafters.heads.is_some();
        if let (None, Err(e)) = (&mirror, options.prepare_model(&mut model)) {
            tracing::warn!("{e}; requests decode without drafts");
        }
        let tokenizer = model.shared_tokenizer();
        let info = Arc::new(ModelInfo {
            name: name.into(),
            context: model.context(),
            vocab: model.config().vocab,
            dim: model.config().dim,
            chat_template: model.chat_template().map(str::to_string),
            eos: tokenizer.eos_id(),
            grammars: Grammars::new(tokenizer.clone()),
        });
        let shared = Arc::new(Shared {
            accepting: AtomicBool::new(true),
            free: AtomicUsize::new(options.parallel),
            ..Shared::default()
        });
        let (commands, inbox) = mpsc::channel();
        let worker = worker::Worker::new(model, options.clone(), shared.clone(), inbox, (mirror, drafters));
        let handle = std::thread::Builder::new().name("baton-engine".into()).spawn(move || worker.run())?;
        let worker = Arc::new(Mutex::new(Some(handle)));
        Ok(Engine { info, tokenizer, options, heads, shared, commands, worker })
    }

    /// The model's name, context and chat template.
    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    /// The model's tokenizer.
    pub fn tokenizer(&self) -> &Arc<Tokenizer> {
        &self.tokenizer
    }

    /// The options the engine runs with.
    pub fn options(&self) -> &EngineOptions {
        &self.options
    }

    /// Each sequence slot's state, as the worker last published it (after
    /// each admission, step end and failure); before the first, every
    /// slot free and empty.
    pub fn slots(&self) -> Vec<SlotView> {
        let published = self.shared.slots.lock().clone();
        match published.is_empty() {
            true => (0..self.options.parallel).map(|id| SlotView { id, ..SlotView::default() }).collect(),
            false => published,
        }
    }

    /// The counters now.
    pub fn stats(&self) -> EngineStats {
        let s = &self.shared;
        EngineStats {
            running: s.running.load(Ordering::Relaxed),
            queued: s.queued.load(Ordering::Relaxed),
            steps: s.steps.load(Ordering::Relaxed),
            generated_tokens: s.generated.load(Ordering::Relaxed),
            prompt_tokens: s.prompt.load(Ordering::Relaxed),
            host_waits: s.host_waits.load(Ordering::Relaxed),
            cancelled: s.cancelled.load(Ordering::Relaxed),
            panics: s.panics.load(Ordering::Relaxed),
        }
    }

    /// The counters, latency histograms and throughput now.
    pub fn metrics(&self) -> EngineMetrics {
        let s = &self.shared;
        let slots = self.options.parallel;
        EngineMetrics {
            stats: self.stats(),
            ended_stop: s.ended_stop.load(Ordering::Relaxed),
            ended_length: s.ended_length.load(Ordering::Relaxed),
            ended_failed: s.ended_failed.load(Ordering::Relaxed),
            prompt_tokens_cached: s.prompt_cached.load(Ordering::Relaxed),
            slots,
            kv_positions_used: s.kv_positions.load(Ordering::Relaxed),
            kv_positions_total: (slots * self.info.context) as u64,
            kv_blocks: s.kv_blocks.each_ref().map(|g| g.load(Ordering::Relaxed)),
            time_to_first_token: s.ttft.snapshot(),
            inter_token_latency: s.itl.snapshot(),
            tokens_per_second: s.throughput.per_second(),
            cache_ram_prompts: s.ram_prompts.load(Ordering::Relaxed),
            cache_ram_bytes: s.ram_bytes.load(Ordering::Relaxed),
            drafted_tokens: s.spec_drafted.load(Ordering::Relaxed),
            accepted_tokens: s.spec_accepted.load(Ordering::Relaxed),
            kv_preemptions: s.preemptions.load(Ordering::Relaxed),
            draft_verifications: s.spec_verifications.load(Ordering::Relaxed),
            prompt_seconds: s.prompt_nanos.load(Ordering::Relaxed) as f64 / 1e9,
            decode_seconds: s.decode_nanos.load(Ordering::Relaxed) as f64 / 1e9,
            step_sequences: s.step_sequences.load(Ordering::Relaxed),
            longest_sequence: s.longest.load(Ordering::Relaxed),
        }
    }

    /// Whether the engine takes requests, and if not, why. An engine whose
    /// worker thread ended without a shutdown (it cannot, short of an
    /// abort) reads as failed.
    pub fn state(&self) -> EngineState {
        if let Some(why) = self.shared.failure.lock().clone() {
            return EngineState::Failed(why);
        }
        if !self.shared.accepting.load(Ordering::Acquire) {
            return EngineState::ShuttingDown;
        }
        match &*self.worker.lock() {
            Some(handle) if handle.is_finished() => EngineState::Failed("the engine's thread has ended".into()),
            _ => EngineState::Running,
        }
    }

    /// Queues `request`; its tokens arrive on the returned [`Generation`].
    pub fn submit(&self, request: GenerateRequest) -> Result<Generation, SubmitError> {
        self.submit_drafting(request, None)
    }

    /// As [`submit`](Self::submit), drafting tokens as `spec` says (`None`:
    /// as [`EngineOptions::spec`] says). The tokens are those without
    /// drafts; where the engine's steps cannot verify drafts (over ranks,
    /// under tensor parallelism, a model whose state cannot be cut back),
    /// it decodes without them.
    pub fn submit_drafting(
        &self,
        mut request: GenerateRequest,
        spec: Option<baton_gen::speculative::SpecParams>,
    ) -> Result<Generation, SubmitError> {
        self.check(&request)?;
        // A format given as a source (Python's `response_format`) compiles
        // here; the server's compile off the HTTP threads before.
        request.format = request.format.compiled(&self.info.grammars).map_err(SubmitError::Grammar)?;
        let spec = spec.unwrap_or(self.options.spec);
        if spec.kind == SpecType::Mtp && !self.heads {
            return Err(SubmitError::NoMtpHead);
        }
        let spec = Some(spec);
        self.take_queue_place()?;
        let (events, receiver) = tmpsc::unbounded_channel();
        if self
            .commands
            .send(Command::Submit(Box::new(Admitted { request, events, submitted: std::time::Instant::now(), spec })))
            .is_err()
        {
            self.shared.queued.fetch_sub(1, Ordering::AcqRel);
            return Err(SubmitError::ShuttingDown);
        }
        Ok(Generation { events: receiver, held: std::collections::VecDeque::new() })
    }

    /// Queues the embedding of `tokens` (at most a sequence's context),
    /// pooled as `pooling` says; it waits in the same queue as generations
    /// and runs on the next free slot between steps (`passes.rs`).
    pub fn embed(&self, tokens: Vec<u32>, pooling: Pooling) -> Result<EmbeddingTicket, SubmitError> {
        self.embed_scoped(tokens, pooling, CacheScope::SHARED)
    }

    /// As [`embed`](Self::embed); the keys and values the pass leaves in
    /// its slot are a cached prefix for requests of `scope` only.
    pub fn embed_scoped(
        &self,
        tokens: Vec<u32>,
        pooling: Pooling,
        scope: CacheScope,
    ) -> Result<EmbeddingTicket, SubmitError> {
        self.check_pass(&tokens)?;
        let (reply, receiver) = tokio::sync::oneshot::channel();
        self.queue_pass(passes::PassJob::Embed { tokens, pooling, scope, reply })?;
        Ok(PassTicket { reply: receiver })
    }

    /// Queues the scoring of `tokens` (at most a sequence's context): the
    /// log-probability of each token after the ones before it, with `top`
    /// alternatives (at most [`MAX_TOP_LOGPROBS`]); as [`embed`](Self::embed),
    /// on a free slot, its tokens read a chunk per step beside the running
    /// sequences.
    pub fn score(&self, tokens: Vec<u32>, top: usize) -> Result<ScoreTicket, SubmitError> {
        if top > MAX_TOP_LOGPROBS {
            return Err(SubmitError::TooManyLogprobs { asked: top, max: MAX_TOP_LOGPROBS });
        }
        self.check_pass(&tokens)?;
        let (reply, receiver) = tokio::sync::oneshot::channel();
        self.queue_pass(passes::PassJob::Score { tokens, top, reply })?;
        Ok(PassTicket { reply: receiver })
    }

    fn check_pass(&self, tokens: &[u32]) -> Result<(), SubmitError> {
        let (len, context) = (tokens.len(), self.info.context);
        if len == 0 {
            return Err(SubmitError::EmptyPrompt);
        }
        if let Some(&id) = tokens.iter().find(|&&id| id as usize >= self.info.vocab) {
            return Err(SubmitError::BadToken { id, vocab: self.info.vocab });
        }
        if len > context {
            return Err(SubmitError::TextTooLong { tokens: len, context });
        }
        Ok(())
    }

    /// Queues the embeddings of `texts` (each at most a sequence's
    /// context) as one request, as [`embed_scoped`](Self::embed_scoped)
    /// queues one: the request takes one place in the queue however many
    /// texts it has, and all of them are queued or none is (an error then,
    /// with nothing taken), so an embeddings request of many inputs is
    /// admitted whenever one of one input would be.
    pub fn embed_many(
        &self,
        texts: Vec<Vec<u32>>,
        pooling: Pooling,
        scope: CacheScope,
    ) -> Result<Vec<EmbeddingTicket>, SubmitError> {
        for tokens in &texts {
            self.check_pass(tokens)?;
        }
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let (mut jobs, mut tickets) = (Vec::with_capacity(texts.len()), Vec::with_capacity(texts.len()));
        for tokens in texts {
            let (reply, receiver) = tokio::sync::oneshot::channel();
            jobs.push(passes::PassJob::Embed { tokens, pooling, scope, reply });
            tickets.push(PassTicket { reply: receiver });
        }
        self.queue_passes(jobs)?;
        Ok(tickets)
    }

    fn queue_pass(&self, job: passes::PassJob) -> Result<(), SubmitError> {
        self.queue_passes(vec![job])
    }

    /// Queues one request's passes, holding one place in the queue.
    fn queue_passes(&self, jobs: Vec<passes::PassJob>) -> Result<(), SubmitError> {
        self.take_queue_place()?;
        if self.commands.send(Command::Passes(jobs)).is_err() {
            self.shared.queued.fetch_sub(1, Ordering::AcqRel);
            return Err(SubmitError::ShuttingDown);
        }
        Ok(())
    }

    /// Runs `work` on the engine's thread between steps (`lend.rs`), with
    /// the model and the slot of reserved slot `index` (of
    /// [`EngineOptions::lent_slots`]); its result comes on the ticket. The
    /// engine never reads or writes that slot, so what `work` leaves there
    /// is there for the next work lent it. It waits for no queue place (it
    /// runs at the next turn). An `index` beyond the lent slots is
    /// [`SubmitError::NoLentSlot`]; over ranks the ticket gives an error.
    pub fn lend<R, F>(&self, index: usize, work: F) -> Result<PassTicket<R>, SubmitError>
    where
        R: Send + 'static,
        F: FnOnce(&mut Model, usize) -> R + Send + 'static,
    {
        if index >= self.options.lent_slots {
            return Err(SubmitError::NoLentSlot { index, lent: self.options.lent_slots });
        }
        self.check_accepting()?;
        let slot = self.options.parallel + index;
        let (reply, receiver) = tokio::sync::oneshot::channel();
        let job: lend::LentJob = Box::new(move |model: Result<&mut Model, &str>| {
            let _ = reply.send(model.map(|model| work(model, slot)).map_err(str::to_string));
        });
        self.commands.send(Command::Lend(job)).map_err(|_| SubmitError::ShuttingDown)?;
        Ok(PassTicket { reply: receiver })
    }

    /// Whether the engine takes work, or why not.
    fn check_accepting(&self) -> Result<(), SubmitError> {
        if self.shared.accepting.load(Ordering::Acquire) {
            return Ok(());
        }
        Err(match self.shared.failure.lock().clone() {
            Some(why) => SubmitError::EngineFailed(why),
            None => SubmitError::ShuttingDown,
        })
    }

    /// Takes a place in the queue for a request, or says why not.
    fn take_queue_place(&self) -> Result<(), SubmitError> {
        self.check_accepting()?;
        // Requests that free slots take at once do not wait.
        let limit = self.options.queue + self.shared.free.load(Ordering::Acquire);
        let queued = &self.shared.queued;
        // Take a place in the queue, or refuse when it is full.
        let mut now = queued.load(Ordering::Relaxed);
        loop {
            if now >= limit {
                return Err(SubmitError::QueueFull {
                    running: self.shared.running.load(Ordering::Relaxed),
                    queued: now,
                });
            }
            match queued.compare_exchange_weak(now, now + 1, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return Ok(()),
                Err(actual) => now = actual,
            }
        }
    }

    fn check(&self, request: &GenerateRequest) -> Result<(), SubmitError> {
        let (prompt, context) = (request.prompt.len(), self.info.context);
        if prompt == 0 {
            return Err(SubmitError::EmptyPrompt);
        }
        if let Some(&id) = request.prompt.iter().find(|&&id| id as usize >= self.info.vocab) {
            return Err(SubmitError::BadToken { id, vocab: self.info.vocab });
        }
        if prompt >= context {
            return Err(SubmitError::PromptTooLong { prompt, context });
        }
        match request.max_tokens {
            Some(0) => return Err(SubmitError::ZeroMaxTokens),
            // Checked: a request's max_tokens can be anything up to 2^64 - 1.
            Some(max_tokens) if prompt.checked_add(max_tokens).is_none_or(|end| end > context) => {
                return Err(SubmitError::ExceedsContext { prompt, max_tokens, context })
            }
            _ => {}
        }
        if let Some(asked) = request.logprobs.filter(|&n| n > MAX_TOP_LOGPROBS) {
            return Err(SubmitError::TooManyLogprobs { asked, max: MAX_TOP_LOGPROBS });
        }
        request.sampling.validate()?;
        if let Some(&(id, _)) =
            request.sampling.logit_bias.entries().iter().find(|(id, _)| *id as usize >= self.info.vocab)
        {
            return Err(SubmitError::BadToken { id, vocab: self.info.vocab });
        }
        Ok(())
    }

    /// Makes the engine's next turn panic, as a bug in the model or the
    /// engine would (only with the feature `fault-injection`, for tests of
    /// what a panic does to the requests and the server).
    #[cfg(feature = "fault-injection")]
    pub fn inject_panic(&self) {
        let _ = self.commands.send(Command::Panic);
    }

    /// Stops taking requests and ends the worker as `mode` says; returns
    /// when the worker has stopped (every generation has its last event).
    pub fn shutdown(&self, mode: Shutdown) {
        self.shared.accepting.store(false, Ordering::Release);
        let _ = self.commands.send(Command::Shutdown(mode));
        let handle = self.worker.lock().take();
        if let Some(handle) = handle {
            let _ = handle.join();
        }
    }
}

/// The events of one request. Dropping it cancels the request: the engine
/// frees its sequence before the next step.
#[derive(Debug)]
pub struct Generation {
    events: tmpsc::UnboundedReceiver<Event>,
    /// Events taken by [`prompt_read`](Self::prompt_read), not yet given.
    held: std::collections::VecDeque<Event>,
}

impl Generation {
    /// The next event; `None` after the last one.
    pub async fn next(&mut self) -> Option<Event> {
        match self.held.pop_front() {
            Some(event) => Some(event),
            None => self.events.recv().await,
        }
    }

    /// The next event, blocking this thread (not for async code).
    pub fn blocking_next(&mut self) -> Option<Event> {
        match self.held.pop_front() {
            Some(event) => Some(event),
            None => self.events.blocking_recv(),
        }
    }

    /// Waits until the prompt is read: its first token (or its end) has
    /// come. The events that came are kept for [`next`](Self::next). So a
    /// request submitted after it with the same prompt copies the
    /// positions it evaluated rather than reading the prompt again
    /// (`n` choices).
    pub async fn prompt_read(&mut self) {
        while let Some(event) = self.events.recv().await {
            let read = !matches!(event, Event::Started { .. } | Event::Progress { .. });
            self.held.push_back(event);
            if read {
                return;
            }
        }
    }
}
