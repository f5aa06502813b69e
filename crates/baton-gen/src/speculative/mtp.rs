//! Drafting with the model's own multi-token-prediction head (Qwen 3.5's
//! MTP block, [`MtpHead`]): the head reads the model's final hidden state
//! at a position and the token after it, and guesses the token after that.
//!
//! After each verified step the drafter holds the model's hidden states of
//! the positions the sequence kept (the step's rows up to the last accepted
//! one; the prompt's after the prompt). The head's row at each position but
//! the last is only primed (its keys and values, which later rows attend
//! to: [`MtpHead::prime`]); the last one, the model's hidden state at the
//! last evaluated position with the token drawn from it, gives the first
//! draft. Each further draft chains the head: its row at the next position
//! reads the head's own output hidden state (after its shared head norm,
//! as vLLM's Qwen 3.5 MTP proposer and llama.cpp's qwen35 MTP graph chain
//! it) and the draft before it. Drafts are greedy. The rows of drafted
//! positions are rewound when the next step's hidden states come: a row at
//! a position drops the head's keys and values of the later ones, so the
//! head always holds the rows of the model's own hidden states up to the
//! last draft's position, and the drafts after a rejection are the bits of
//! a head that never saw the rejected ones.
//!
//! The head runs up to its file's context (`context_length`); a model
//! loaded with a longer one gets no drafts past it. Priming is lazy and
//! bounded: while the budget drafts nothing, the hidden states wait, and a
//! draft primes at most the [`MAX_CATCH_UP`] positions before it (the
//! head restarts there, [`MtpHead::restart_at`], when more wait: after a
//! long prompt or a long stretch not drafted), so a text where drafts do
//! not pay costs no head rows, and a long prompt costs a bounded number
//! (each a host row of the head's input projection, keys and values).

use std::path::Path;
use std::time::Instant;

use baton_model::{Model, ModelError, MtpHead};

use super::params::SpecError;
use crate::{Sampler, SamplingParams};

/// The most positions a draft primes before it: the head attends to them
/// and the later ones (restarting there when more wait, their rows
/// dropped).
pub const MAX_CATCH_UP: usize = 64;

/// A drafter of the model's own MTP head and the hidden states it has not
/// yet read.
pub struct MtpDrafter {
    head: MtpHead,
    dim: usize,
    /// The model's hidden states of positions `first..first + n`, not yet
    /// read by the head (which holds its rows of positions `..first`).
    waiting: Vec<f32>,
    first: usize,
    /// Picks its drafts: greedy.
    greedy: Sampler,
    /// Seconds the head has spent drafting (its chained rows) and priming
    /// (and the rows primed) since [`take_seconds`](Self::take_seconds).
    seconds: f64,
    prime_seconds: f64,
    primed: usize,
}

impl std::fmt::Debug for MtpDrafter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MtpDrafter")
            .field("head_rows", &self.head.len())
            .field("first_waiting", &self.first)
            .field("waiting", &(self.waiting.len() / self.dim.max(1)))
            .finish_non_exhaustive()
    }
}

impl MtpDrafter {
    /// The head of the file at `path`, drafting for `target` loaded from
    /// it, its large products split over the host threads of `target`'s
    /// device ([`MtpHead::compute_on`]): [`SpecError::NoMtp`] when the file holds no prediction block,
    /// [`SpecError::NoHidden`] when `target`'s steps cannot give their
    /// hidden states (a tensor-parallel split), [`SpecError::Head`] when
    /// the head cannot be read.
    pub fn open(path: &Path, target: &Model) -> Result<MtpDrafter, SpecError> {
        let arch = target.config().arch.name();
        if !target.has_mtp() {
            return Err(SpecError::NoMtp { arch });
        }
        if !target.hidden_in_steps() {
            return Err(SpecError::NoHidden);
        }
        let mut head = match MtpHead::open(path) {
            Ok(Some(head)) => head,
            Ok(None) => return Err(SpecError::NoMtp { arch }),
            Err(e) => return Err(SpecError::Head(e.to_string())),
        };
        let (dim, vocab) = (head.config().dim, head.config().vocab);
        if dim != target.config().dim || vocab != target.config().vocab {
            return Err(SpecError::Head(format!(
                "{} is not the loaded model's file (width {dim}, vocabulary {vocab})",
                path.display()
            )));
        }
        // Its large products on the target's host threads, between steps.
        head.compute_on(target.device().clone());
        // The output product on the model's own (packed) copy of the
        // matrix, not the file's pages of it.
        if let Some((weights, device)) = target.output_weights() {
            head.share_output(weights.clone(), device.clone()).map_err(|e| SpecError::Head(e.to_string()))?;
        }
        Ok(MtpDrafter::with_head(head))
    }

    /// A drafter of `head` (whose model's hidden states it will be given).
    pub fn with_head(head: MtpHead) -> MtpDrafter {
        let dim = head.config().dim;
        MtpDrafter {
            head,
            dim,
            waiting: Vec::new(),
            first: 0,
            greedy: Sampler::new(SamplingParams::greedy()),
            seconds: 0.0,
            prime_seconds: 0.0,
            primed: 0,
        }
    }

    /// Forgets every position it was given and every row its head holds,
    /// and its timings: a drafter for another sequence, as a new one of the
    /// same head would be.
    pub fn restart(&mut self) {
        self.waiting.clear();
        self.first = 0;
        self.head.restart_at(0);
        (self.seconds, self.prime_seconds, self.primed) = (0.0, 0.0, 0);
    }

    /// Whether it may still draft, so wants the model's hidden states: not
    /// once the positions given pass the head's context (positions only
    /// grow), when the steps need not read them any more.
    pub fn reads_hidden(&self) -> bool {
        self.first + self.waiting.len() / self.dim.max(1) <= self.head.config().context
    }

    /// The head.
    pub fn head(&self) -> &MtpHead {
        &self.head
    }

    /// Takes the model's hidden states (`dim` values a row) of positions
    /// `from..`, the ones the sequence keeps: the prompt's after the
    /// prompt, a step's rows up to its last accepted one. Waiting rows of
    /// `from` and later positions are replaced (rejected drafts' positions
    /// were never given). Rows after a gap (steps that did not read their
    /// hidden states) restart the head there. An error for rows of another
    /// width.
    pub fn observe(&mut self, from: usize, hidden: &[f32]) -> Result<(), ModelError> {
        let rows = hidden.len() / self.dim.max(1);
        if rows * self.dim != hidden.len() {
            return Err(ModelError::Input(format!("hidden states of {} values, rows of {}", hidden.len(), self.dim)));
        }
        let held = self.first + self.waiting.len() / self.dim;
        if from > held {
            // Steps that did not read their hidden states (drafting was
            // off): the head restarts at `from`.
            self.waiting.clear();
            self.first = from;
            self.head.restart_at(from);
        }
        if from < self.first {
            // Rows the head read are taken again (a sequence cut back):
            // the head forgets them.
            self.head.truncate(from);
            self.waiting.clear();
            self.first = from;
        }
        self.waiting.truncate((from - self.first) * self.dim);
        self.waiting.extend_from_slice(hidden);
        Ok(())
    }

    /// Up to `k` tokens the head drafts after `history` (prompt and tokens
    /// so far; the last one drawn from the model's hidden state at the
    /// position before it, which [`observe`](Self::observe) must have
    /// given): empty when `k` is 0, the hidden states do not reach the
    /// last token, or it drafted after the same tokens already (no step
    /// has given their rows since). The waiting rows are primed first.
    pub fn draft(&mut self, history: &[u32], k: usize) -> Result<Vec<u32>, ModelError> {
        let (start, priming) = (Instant::now(), self.prime_seconds);
        let drafted = self.draft_timed(history, k);
        self.seconds += start.elapsed().as_secs_f64() - (self.prime_seconds - priming);
        drafted
    }

    fn draft_timed(&mut self, history: &[u32], k: usize) -> Result<Vec<u32>, ModelError> {
        let dim = self.dim;
        let held = self.first + self.waiting.len() / dim;
        // The last token's position is held - 1 + 1: its hidden state's
        // position is the one before it. None waiting: that state was
        // drafted from already, and the step of those drafts never came
        // (asked again after the same tokens: a server's step retried, or
        // one the sequence did not fit in).
        if k == 0 || history.len() < 2 || held + 1 != history.len() || self.waiting.is_empty() {
            return Ok(Vec::new());
        }
        let last = held - 1;
        // The head runs to its file's context (the model may be loaded
        // with more): no drafts past it.
        let room = self.head.config().context.saturating_sub(last);
        if room == 0 {
            self.waiting.drain(..(last + 1 - self.first) * dim);
            self.first = last + 1;
            return Ok(Vec::new());
        }
        self.prime_before(last, history)?;
        let mut drafts = Vec::with_capacity(k);
        let (mut hidden, mut token) = (self.waiting[(last - self.first) * dim..].to_vec(), history[last + 1]);
        for position in last..last + k.min(room) {
            let (logits, out) = self.head.forward_hidden(&hidden, token, position)?;
            token = self.greedy.sample(&logits).map_err(|e| ModelError::Input(format!("the head's logits: {e}")))?;
            drafts.push(token);
            hidden = out;
        }
        // The row at `last` read the model's own hidden state: it stays.
        self.waiting.drain(..(last + 1 - self.first) * dim);
        self.first = last + 1;
        Ok(drafts)
    }

    /// Primes the head's rows of the waiting positions before `end` (each
    /// with the token after it in `history`; those past the head's context
    /// are dropped).
    fn prime_before(&mut self, end: usize, history: &[u32]) -> Result<(), ModelError> {
        let dim = self.dim;
        self.skip_before(end.saturating_sub(MAX_CATCH_UP));
        let start = Instant::now();
        for position in self.first..end.min(self.head.config().context) {
            let row = &self.waiting[(position - self.first) * dim..][..dim];
            self.head.prime(row, history[position + 1], position)?;
            self.primed += 1;
        }
        self.prime_seconds += start.elapsed().as_secs_f64();
        self.waiting.drain(..(end.saturating_sub(self.first)) * dim);
        self.first = self.first.max(end);
        Ok(())
    }

    /// Drops the waiting rows before `position` (the head restarts there:
    /// its rows would not be contiguous).
    fn skip_before(&mut self, position: usize) {
        if position <= self.first {
            return;
        }
        let rows = (position - self.first).min(self.waiting.len() / self.dim.max(1));
        self.waiting.drain(..rows * self.dim);
        self.first += rows;
        self.head.restart_at(self.first);
    }

    /// Drops the oldest waiting rows beyond [`MAX_CATCH_UP`] (a stretch not
    /// drafted: a draft would not prime them).
    pub fn bound_waiting(&mut self) {
        let held = self.first + self.waiting.len() / self.dim.max(1);
        self.skip_before(held.saturating_sub(MAX_CATCH_UP + 1));
    }

    /// The seconds the head computed for `k` drafts since the last call:
    /// its chained rows', and its primed rows' up to `k` of them (a draft
    /// of `k` tokens primes at most `k` accepted positions before the next
    /// one; more are a catch-up after a prompt or a pause, paid once).
    pub fn take_seconds(&mut self, k: usize) -> f64 {
        let primed = std::mem::take(&mut self.primed);
        let priming = std::mem::take(&mut self.prime_seconds) * (k as f64 / primed.max(1) as f64).min(1.0);
        std::mem::take(&mut self.seconds) + priming
    }
}
