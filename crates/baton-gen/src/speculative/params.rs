//! What speculation a sequence uses, and which models can verify drafts.

use baton_model::Model;

use super::ngram::NgramDrafter;
use super::step_times::StepCost;

/// How drafts are made (llama.cpp's `--spec-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SpecType {
    /// No speculation: one token a step.
    #[default]
    None,
    /// Prompt lookup: n-grams of the text so far ([`NgramDrafter`]).
    Ngram,
    /// The model's own multi-token-prediction head (Qwen 3.5's MTP block,
    /// [`MtpDrafter`](super::MtpDrafter)): a file without one is refused
    /// ([`SpecError::NoMtp`]).
    Mtp,
}

impl SpecType {
    /// Every type.
    pub const ALL: [SpecType; 3] = [SpecType::None, SpecType::Ngram, SpecType::Mtp];

    /// Its name, as the command line and requests spell it.
    pub const fn name(self) -> &'static str {
        match self {
            SpecType::None => "none",
            SpecType::Ngram => "ngram",
            SpecType::Mtp => "mtp",
        }
    }

    /// The type named `name`.
    pub fn from_name(name: &str) -> Option<SpecType> {
        SpecType::ALL.into_iter().find(|t| t.name() == name)
    }
}

/// What speculation a sequence uses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpecParams {
    /// How drafts are made.
    pub kind: SpecType,
    /// The most drafted tokens a step verifies (llama.cpp's `--draft-max`).
    pub draft_max: usize,
    /// The fewest drafted tokens worth a verification (`--draft-min`).
    pub draft_min: usize,
    /// The n-grams looked up, longest first.
    pub drafter: NgramDrafter,
    /// What a verification step costs: the model that seeds the engine's
    /// table of step times ([`StepTimes`](super::StepTimes)), and what a
    /// drafted token costs to make.
    pub cost: StepCost,
}

impl Default for SpecParams {
    fn default() -> Self {
        SpecParams {
            kind: SpecType::None,
            draft_max: 8,
            draft_min: 1,
            drafter: NgramDrafter::default(),
            cost: StepCost::MEASURED,
        }
    }
}

/// Why a model cannot verify drafts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// Its state cannot be cut back to a drafted position: a hybrid
    /// model's recurrent state folds every position in, and the model keeps
    /// no states after the rows of a step to go back to.
    #[error(
        "speculative decoding needs a model whose state can be cut back to a position; {arch} cannot here: {reason}"
    )]
    NoRewind {
        /// The model's architecture.
        arch: &'static str,
        /// Why not.
        reason: String,
    },
    /// A draft model whose tokens are not the target's.
    #[error(
        "the draft model's vocabulary ({draft} tokens) or end-of-text token is not the target's ({target} tokens)"
    )]
    VocabMismatch {
        /// The target's vocabulary size.
        target: usize,
        /// The draft model's.
        draft: usize,
    },
    /// `--spec-type mtp` on a file without a multi-token-prediction block.
    #[error(
        "--spec-type mtp drafts with the model's own multi-token-prediction block; this {arch} file holds none \
         (Qwen 3.5 files converted with their MTP layer do: nextn_predict_layers)"
    )]
    NoMtp {
        /// The model's architecture.
        arch: &'static str,
    },
    /// A model whose steps cannot give the hidden states the head reads.
    #[error(
        "--spec-type mtp reads the model's hidden states in its steps: not with --split-mode tensor or over ranks"
    )]
    NoHidden,
    /// The head's block could not be read.
    #[error("the multi-token-prediction head: {0}")]
    Head(String),
}

/// Whether `model` can verify drafts now: its state per sequence is a KV
/// cache indexed by position (rejected positions are overwritten by the
/// next step; sliding-window rings keep more rows than a step writes), or
/// a hybrid model's recurrent state that keeps its states after each row
/// of a step ([`Model::keep_states`], which [`prepare_model`] asks for), so
/// it can be cut back to the accepted drafts ([`Model::cut_back`]).
pub fn check_model(model: &Model) -> Result<(), SpecError> {
    match model.rewind_rows() {
        Some(0) => Err(SpecError::NoRewind {
            arch: model.config().arch.name(),
            reason: "its recurrent layers keep no states after the rows of a step (Model::keep_states)".into(),
        }),
        _ => Ok(()),
    }
}

/// Prepares `model` to verify up to `drafts` drafted tokens a step (over
/// all the sequences of a step): a hybrid model keeps its recurrent states
/// after each of them ([`Model::keep_states`]); then [`check_model`].
pub fn prepare_model(model: &mut Model, drafts: usize) -> Result<(), SpecError> {
    let arch = model.config().arch.name();
    model.keep_states(drafts.max(1)).map_err(|e| SpecError::NoRewind { arch, reason: e.to_string() })?;
    check_model(model)
}
