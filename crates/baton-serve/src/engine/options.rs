//! How the engine runs: its batching options and how a shutdown treats the
//! requests in flight.

use baton_gen::speculative::{prepare_model, SpecError, SpecParams, SpecType};
use baton_model::Model;

/// How the engine batches.
#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// Sequences running at once (`--parallel`): the model must have been
    /// loaded with at least this many KV cache slots.
    pub parallel: usize,
    /// Requests waiting for a slot at most, beyond those that free slots
    /// take at once (0: a request is taken only when a slot is free); one
    /// more gets [`SubmitError::QueueFull`](super::SubmitError::QueueFull) (HTTP 429).
    pub queue: usize,
    /// Most prompt tokens one step reads (a chunk of a long prompt).
    pub prefill_chunk: usize,
    /// Reuse the keys and values of earlier and running sequences for a
    /// prompt that starts as theirs did (on by default; `false` evaluates
    /// every prompt whole, for measuring what the reuse saves).
    pub prefix_cache: bool,
    /// Bytes of host memory for the keys and values of prompts whose slot
    /// was reused (llama-server's `--cache-ram`); 0 keeps none.
    pub cache_ram: usize,
    /// Checkpoints of a hybrid model's recurrent state each slot keeps, at
    /// the ends of the prompts it evaluated (llama-server's
    /// `--ctx-checkpoints`); 0 keeps none.
    pub ctx_checkpoints: usize,
    /// How requests draft tokens unless they say otherwise (`--spec-type`;
    /// none by default). Speculation changes no token, only the speed.
    pub spec: SpecParams,
    /// Slots after the `parallel` ones that only lent work uses
    /// ([`Engine::lend`](super::Engine::lend)): the model must have been
    /// loaded with `parallel + lent_slots` slots.
    pub lent_slots: usize,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            parallel: 4,
            queue: 64,
            prefill_chunk: 64,
            prefix_cache: true,
            cache_ram: 0,
            ctx_checkpoints: 8,
            spec: SpecParams::default(),
            lent_slots: 0,
        }
    }
}

impl EngineOptions {
    /// Prepares `model` to verify the drafts of every running sequence in
    /// one step when the engine drafts by default ([`spec`](Self::spec)): a
    /// hybrid model keeps its recurrent states after `draft_max` rows per
    /// sequence ([`Model::keep_states`]). Without drafts by default nothing
    /// is kept, and a hybrid model verifies no drafts (requests that ask
    /// for them decode without).
    pub fn prepare_model(&self, model: &mut Model) -> Result<(), SpecError> {
        match self.spec.kind == SpecType::None || self.spec.draft_max == 0 {
            true => Ok(()),
            false => prepare_model(model, self.spec.draft_max * self.parallel.max(1)),
        }
    }
}

/// How [`Engine::shutdown`](super::Engine::shutdown) treats requests in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shutdown {
    /// Stop taking requests; finish the running and waiting ones.
    Drain,
    /// Stop taking requests; end every running and waiting one at once with
    /// [`Event::Failed`](super::Event::Failed).
    Cancel,
}
