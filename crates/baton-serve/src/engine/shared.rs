//! What the engine's handles and its worker thread share: the counters and
//! the state they both read, and the commands the handles send.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};

use baton_core::loom::plain::Mutex;
use tokio::sync::mpsc as tmpsc;

use super::metrics::{Histogram, Throughput};
use super::options::Shutdown;
use super::request::{Event, GenerateRequest};

/// State shared by the handles and the worker.
#[derive(Debug, Default)]
pub(super) struct Shared {
    pub(super) accepting: AtomicBool,
    pub(super) queued: AtomicUsize,
    pub(super) running: AtomicUsize,
    /// Free slots, as the worker last saw them.
    pub(super) free: AtomicUsize,
    pub(super) steps: AtomicU64,
    pub(super) generated: AtomicU64,
    pub(super) prompt: AtomicU64,
    pub(super) host_waits: AtomicU64,
    pub(super) cancelled: AtomicU64,
    pub(super) panics: AtomicU64,
    /// Generations that ended at an end-of-generation token, at their
    /// length, and with a failure.
    pub(super) ended_stop: AtomicU64,
    pub(super) ended_length: AtomicU64,
    pub(super) ended_failed: AtomicU64,
    /// Prompt tokens taken from the prefix cache.
    pub(super) prompt_cached: AtomicU64,
    /// Drafted tokens verified, and of those the ones accepted, and the
    /// sequences' verifications of drafts (one a step a sequence drafted).
    pub(super) spec_drafted: AtomicU64,
    pub(super) spec_accepted: AtomicU64,
    pub(super) spec_verifications: AtomicU64,
    /// Nanoseconds of steps, shared out by their rows: prompt rows' and
    /// the others' (a generated token's, a draft's, a scored prompt's).
    pub(super) prompt_nanos: AtomicU64,
    pub(super) decode_nanos: AtomicU64,
    /// Sequences in the steps so far (a step's count, summed).
    pub(super) step_sequences: AtomicU64,
    /// The most positions a sequence held (prompt and generated tokens).
    pub(super) longest: AtomicU64,
    /// Sequences preempted for the blocks of a full pool.
    pub(super) preemptions: AtomicU64,
    /// Cache positions the running sequences hold.
    pub(super) kv_positions: AtomicU64,
    /// A paged cache's blocks: of the pool, used, shared, table entries
    /// (a shared block once per holder), slots holding blocks, and the
    /// bytes of one block; all 0 without one.
    pub(super) kv_blocks: [AtomicU64; 6],
    /// Prompts saved in host memory (`--cache-ram`), and their bytes.
    pub(super) ram_prompts: AtomicUsize,
    pub(super) ram_bytes: AtomicU64,
    /// From a request's submission to its first token.
    pub(super) ttft: Histogram,
    /// Between two tokens of a sequence.
    pub(super) itl: Histogram,
    pub(super) throughput: Throughput,
    /// Why the worker stopped for good, once it has.
    pub(super) failure: Mutex<Option<String>>,
    /// Each slot's state, as the worker last published it.
    pub(super) slots: Mutex<Vec<super::slot_view::SlotView>>,
}

impl Shared {
    /// Counts a step of `rows` rows, `prompt_rows` of them prompt tokens,
    /// for `sequences` sequences, that took `seconds` from its submission
    /// to its logits: its time shared out between prompt and other rows
    /// by their count.
    pub(super) fn count_step(&self, seconds: f64, (prompt_rows, rows): (usize, usize), sequences: usize) {
        use std::sync::atomic::Ordering::Relaxed;
        self.steps.fetch_add(1, Relaxed);
        self.step_sequences.fetch_add(sequences as u64, Relaxed);
        let nanos = seconds.max(0.0) * 1e9;
        let prompt = (nanos * prompt_rows.min(rows) as f64 / rows.max(1) as f64) as u64;
        self.prompt_nanos.fetch_add(prompt, Relaxed);
        self.decode_nanos.fetch_add((nanos as u64).saturating_sub(prompt), Relaxed);
    }

    /// Counts a sequence's verification of `drafted` drafts, `accepted` of
    /// them accepted (none drafted: nothing counted), after which it holds
    /// `positions` positions.
    pub(super) fn count_verified(&self, drafted: usize, accepted: usize, positions: usize) {
        use std::sync::atomic::Ordering::Relaxed;
        self.longest.fetch_max(positions as u64, Relaxed);
        if drafted > 0 {
            self.spec_drafted.fetch_add(drafted as u64, Relaxed);
            self.spec_accepted.fetch_add(accepted as u64, Relaxed);
            self.spec_verifications.fetch_add(1, Relaxed);
        }
    }

    /// Counts a generation's last event by how it ended.
    pub(super) fn count_end(&self, end: &Event) {
        use std::sync::atomic::Ordering::Relaxed;
        match end {
            Event::Done(done) if done.reason == super::request::FinishReason::Stop => {
                self.ended_stop.fetch_add(1, Relaxed);
            }
            Event::Done(_) => {
                self.ended_length.fetch_add(1, Relaxed);
            }
            Event::Failed(_) => {
                self.ended_failed.fetch_add(1, Relaxed);
            }
            Event::Token(_) | Event::Logprobs(_) | Event::Started { .. } | Event::Progress { .. } => {}
        }
    }
}

/// A request the worker takes, with where its events go.
pub(super) struct Admitted {
    pub(super) request: GenerateRequest,
    /// How it drafts, if it does.
    pub(super) spec: Option<baton_gen::speculative::SpecParams>,
    /// When the handle took it.
    pub(super) submitted: std::time::Instant,
    pub(super) events: tmpsc::UnboundedSender<Event>,
}

/// What a handle asks of the worker.
pub(super) enum Command {
    Submit(Box<Admitted>),
    /// One request's single passes (an embeddings request's inputs), which
    /// hold one place in the queue together.
    Passes(Vec<super::passes::PassJob>),
    Shutdown(Shutdown),
    /// Work run with the model on a reserved slot (`lend.rs`).
    Lend(super::lend::LentJob),
    /// Makes the worker's turn panic (feature `fault-injection`).
    #[cfg(feature = "fault-injection")]
    Panic,
}
