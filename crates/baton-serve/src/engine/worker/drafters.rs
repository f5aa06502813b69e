//! What drafts for the engine's sequences besides n-grams: a draft model
//! (`-md`, `drafts.rs`), or the model's own prediction head (`--spec-type
//! mtp`, `heads.rs`), whose drafters wait in a pool while no sequence
//! holds them.

use std::path::{Path, PathBuf};

use baton_gen::speculative::{ModelDrafter, MtpDrafter, SpecError};
use baton_model::Model;

/// The engine's drafters besides n-grams.
#[derive(Default)]
pub(crate) struct Drafters {
    /// The draft model, with a slot per sequence.
    pub(crate) model: Option<ModelDrafter>,
    /// The prediction head's drafters.
    pub(crate) heads: Option<HeadPool>,
}

/// The drafters of the model's prediction head that no sequence holds,
/// and the file to open more from (a drafter that a failed step took with
/// its sequence is not given back).
pub(crate) struct HeadPool {
    free: Vec<MtpDrafter>,
    path: PathBuf,
}

impl HeadPool {
    /// `count` drafters of the head of the file at `path`, which `model`
    /// was loaded from: the head's error when the file holds none, `model`
    /// cannot give its hidden states, or the head cannot be read.
    pub(crate) fn open(path: &Path, model: &Model, count: usize) -> Result<HeadPool, SpecError> {
        let free = (0..count).map(|_| MtpDrafter::open(path, model)).collect::<Result<_, _>>()?;
        Ok(HeadPool { free, path: path.to_path_buf() })
    }

    /// A drafter for a new sequence, restarted: one of the pool, or a new
    /// one when none is left.
    pub(super) fn take(&mut self, model: &Model) -> Result<MtpDrafter, SpecError> {
        let mut drafter = match self.free.pop() {
            Some(drafter) => drafter,
            None => MtpDrafter::open(&self.path, model)?,
        };
        drafter.restart();
        Ok(drafter)
    }

    /// Takes back the drafter of a sequence that ended.
    pub(super) fn give_back(&mut self, drafter: MtpDrafter) {
        self.free.push(drafter);
    }
}
