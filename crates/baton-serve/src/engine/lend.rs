//! The model lent between steps: work from outside the engine that runs on
//! the engine's thread with the model and a sequence slot reserved for it
//! ([`EngineOptions::lent_slots`](super::EngineOptions::lent_slots)),
//! which generations and single passes never take. The Python package's
//! token-level session (`eval`, `save_state`) runs so on the serving
//! engine's model instead of a copy of its own.
//!
//! Work is run in the turn its command arrives, after the commands are
//! taken and before waiting passes and requests are admitted; a step in
//! flight stays in flight (the work's own evaluations queue after it, as a
//! single pass's do), and the running sequences' logits do not change
//! (every row gets the bits it gets alone).

use baton_model::Model;

/// Lent work on its way to the worker: given the model, or why it cannot
/// be (over ranks, or the engine stopping).
pub(super) type LentJob = Box<dyn FnOnce(Result<&mut Model, &str>) + Send>;

/// Why lent work is not run over ranks.
pub(super) const NOT_OVER_RANKS: &str =
    "the model is not lent over ranks (a model split over processes): run the token-level API on one process";
