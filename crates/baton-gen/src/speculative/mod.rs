//! Speculative decoding that changes no token: drafted tokens are verified
//! in one step of several rows, and each row's token is drawn exactly as
//! plain decoding would draw it.
//!
//! Why no token changes: a model step is batch-invariant (a row's logits
//! are the same bits whatever else the step evaluates), so the row of
//! position `p` in a verification step holds the logits plain decoding
//! would compute at `p`, as long as the tokens before `p` are the ones
//! plain decoding would have chosen. The caller draws each row's token with
//! its own sampler, exactly as without speculation (one draw per position:
//! the same random stream, penalties, constraints and stops), and
//! [`verify`] walks the rows while the drawn token equals the draft: the
//! first row whose token differs from the draft gives the next token, and
//! the rows after it are never drawn from. The sequence's slot is then cut
//! back to the accepted positions ([`Model::cut_back`](baton_model::Model::cut_back)):
//! an attention model's rejected positions stay in the cache beyond the
//! sequence's length, where the next step overwrites them (attention reads
//! positions below a row's own only); a hybrid model's recurrent state
//! becomes the one the step kept after the last accepted position (the
//! state after each row of a verification step is kept, taken row by row,
//! so it holds the bits of decoding those tokens one at a time).
//!
//! - `ngram.rs`: drafts by prompt lookup (no draft model).
//! - `draft_model.rs`: drafts by a smaller model of the same vocabulary.
//! - `mtp.rs`: drafts by the model's own multi-token-prediction head,
//!   which reads the hidden states of the steps.
//! - `budget.rs`: how many drafts a step verifies (none when it does not
//!   pay).
//! - `step_times.rs`: what a step of so many rows costs, as the engine's
//!   steps measure it.
//! - `params.rs`: the parameters, and which models can verify drafts.
//! - `speculation.rs`: one sequence's drafts, budget and counts.
//! - `verify.rs`: a step's rows walked while they confirm the drafts.
//! - `decode.rs`: one sequence decoded with speculation (`baton run`).

mod budget;
mod decode;
mod draft_model;
mod mtp;
mod ngram;
mod params;
mod speculation;
mod step_times;
mod verify;

pub use budget::{DraftBudget, MIN_GAIN};
pub use decode::{eval_prompt, Decoding};
pub use draft_model::{DraftAsk, ModelDrafter};
pub use mtp::{MtpDrafter, MAX_CATCH_UP};
pub use ngram::{Draft, NgramDrafter, MAX_NGRAM};
pub use params::{check_model, prepare_model, SpecError, SpecParams, SpecType};
pub use speculation::{SpecStats, Speculation};
pub use step_times::{StepCost, StepTimes, TRUSTED_SAMPLES};
pub use verify::{verify, Drawn, Verified};

#[cfg(test)]
mod tests;
