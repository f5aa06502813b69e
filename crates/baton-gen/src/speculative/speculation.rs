//! One sequence's speculation: drafts made, the budget consulted, the
//! outcome of each step recorded.

use baton_model::ModelError;

use super::budget::DraftBudget;
use super::draft_model::ModelDrafter;
use super::mtp::MtpDrafter;
use super::ngram::Draft;
use super::params::{SpecParams, SpecType};
use super::step_times::StepTimes;

/// Drafted and accepted token counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SpecStats {
    /// Drafted tokens verified.
    pub drafted: u64,
    /// Of those, the ones accepted.
    pub accepted: u64,
    /// Verification steps (steps that carried drafts).
    pub steps: u64,
}

impl SpecStats {
    /// Accepted over drafted (0 when nothing was drafted).
    pub fn acceptance(&self) -> f64 {
        if self.drafted == 0 {
            0.0
        } else {
            self.accepted as f64 / self.drafted as f64
        }
    }
}

/// One sequence's speculation: its drafter, its budget and its counts.
#[derive(Debug)]
pub struct Speculation {
    params: SpecParams,
    /// A draft model, drafting in place of the n-grams.
    model: Option<Box<ModelDrafter>>,
    /// The model's own prediction head, drafting in place of the n-grams.
    mtp: Option<Box<MtpDrafter>>,
    budget: DraftBudget,
    stats: SpecStats,
    /// The draft of the step in flight: its matched length, and the tokens
    /// proposed whether verified or not (the first is compared with the
    /// step's token when nothing was verified).
    pending: Option<Draft>,
    verified: usize,
    /// Whether the budget drafted for the last step (an MTP head's steps
    /// read their hidden states only then).
    drafting: bool,
}

impl Speculation {
    /// Speculation as `params` says (`None` for [`SpecType::None`] or a
    /// `draft_max` of 0, and for [`SpecType::Mtp`], whose head
    /// [`with_mtp`](Self::with_mtp) takes).
    pub fn new(params: SpecParams) -> Option<Speculation> {
        if matches!(params.kind, SpecType::None | SpecType::Mtp) || params.draft_max == 0 {
            return None;
        }
        let budget = DraftBudget::new(params.draft_max, params.draft_min, params.drafter.max_n, params.cost.per_draft);
        Some(Speculation::with_parts(params, budget, (None, None)))
    }

    /// Speculation with a draft model (`-md`) in place of the n-grams:
    /// `params`' draft counts and cost, whatever its type.
    pub fn with_model(params: SpecParams, drafter: ModelDrafter) -> Speculation {
        let params = SpecParams { kind: SpecType::Ngram, ..params };
        let budget = DraftBudget::new(params.draft_max, params.draft_min, 1, params.cost.per_draft);
        let model = Some(Box::new(drafter));
        Speculation::with_parts(params, budget, (model, None))
    }

    /// Speculation with the model's own prediction head (`--spec-type
    /// mtp`): `params`' draft counts, and its cost per drafted token as the
    /// prior until the head's rows are timed (a cost model that learns
    /// replaces it by the head's measured seconds per draft over a one-row
    /// step's). Hand it each step's hidden states
    /// ([`observe_hidden`](Self::observe_hidden)).
    pub fn with_mtp(params: SpecParams, drafter: MtpDrafter) -> Speculation {
        let params = SpecParams { kind: SpecType::Mtp, ..params };
        let budget = DraftBudget::new(params.draft_max, params.draft_min, 1, params.cost.per_draft);
        let mtp = Some(Box::new(drafter));
        Speculation::with_parts(params, budget, (None, mtp))
    }

    /// Whether its drafter reads the model's hidden states (an MTP head
    /// before its context's end, while its budget drafts: a step after one
    /// that drafted nothing reads none, and the head restarts at the next
    /// step the budget drafts for): hand it those of the positions the
    /// sequence keeps ([`observe_hidden`](Self::observe_hidden)).
    pub fn wants_hidden(&self) -> bool {
        self.drafting && self.mtp.as_ref().is_some_and(|m| m.reads_hidden())
    }

    /// The model's final hidden states (`dim` values a row) of positions
    /// `from..` that the sequence keeps: the prompt's, then each step's
    /// rows up to its last accepted one. Nothing without an MTP head.
    pub fn observe_hidden(&mut self, from: usize, hidden: &[f32]) -> Result<(), ModelError> {
        match self.mtp.as_mut() {
            Some(mtp) => mtp.observe(from, hidden),
            None => Ok(()),
        }
    }

    /// Speculation whose drafts a draft model shared by several sequences
    /// makes ([`ModelDrafter::draft_batch`], the server's `-md`): ask
    /// [`model_drafts`](Self::model_drafts) how many, then
    /// [`offer`](Self::offer) what the model drafted. `params`' draft counts
    /// and cost, whatever its type.
    pub fn with_shared_model(params: SpecParams) -> Speculation {
        let params = SpecParams { kind: SpecType::Ngram, ..params };
        let budget = DraftBudget::new(params.draft_max, params.draft_min, 1, params.cost.per_draft);
        Speculation::with_parts(params, budget, (None, None))
    }

    /// Speculation of `params` and `budget` with its drafter, nothing
    /// counted or pending yet.
    fn with_parts(
        params: SpecParams,
        budget: DraftBudget,
        (model, mtp): (Option<Box<ModelDrafter>>, Option<Box<MtpDrafter>>),
    ) -> Speculation {
        Speculation {
            params,
            budget,
            model,
            mtp,
            stats: SpecStats::default(),
            pending: None,
            verified: 0,
            drafting: true,
        }
    }

    /// How many tokens a draft model should draft for a step with at most
    /// `room` drafts, carrying `rows` rows without them, steps costing what
    /// `times` says: 0 when drafts do not pay now (the step is then settled
    /// as one without drafts). Pair a count above 0 with
    /// [`offer`](Self::offer).
    pub fn model_drafts(&mut self, room: usize, (rows, times): (usize, &StepTimes)) -> usize {
        let k = self.budget.choose(1, self.params.draft_max.min(room), rows, times);
        if k == 0 {
            self.budget.relax(1);
            self.pending = Some(Draft::default());
            self.verified = 0;
        }
        k
    }

    /// Takes the draft model's `tokens` for the step that
    /// [`model_drafts`](Self::model_drafts) asked for: the drafts to verify
    /// (as many as pay). Pair it with [`settle`](Self::settle).
    pub fn offer(&mut self, tokens: Vec<u32>, (rows, times): (usize, &StepTimes)) -> &[u32] {
        self.verified = self.budget.choose(1, tokens.len(), rows, times);
        let draft = self.pending.insert(Draft { tokens, matched: 1 });
        &draft.tokens[..self.verified]
    }

    /// The drafts to verify after `history` (prompt and tokens so far, the
    /// token to evaluate next last), at most `room` of them, in a step that
    /// carries `rows` rows without them (1 for a sequence decoding alone),
    /// steps costing what `times` says: empty when none are found or they
    /// do not pay. Pair each call with [`settle`](Self::settle). An error
    /// only from a draft model's step.
    pub fn draft(
        &mut self,
        history: &[u32],
        room: usize,
        (rows, times): (usize, &StepTimes),
    ) -> Result<&[u32], ModelError> {
        let room = self.params.draft_max.min(room);
        if self.mtp.is_some() {
            return self.draft_mtp(history, room, (rows, times));
        }
        if self.model.is_some() {
            // A draft model's tokens cost a step each: as many as pay.
            let tokens = match self.model_drafts(room, (rows, times)) {
                0 => return Ok(&[]),
                k => self.model.as_mut().map(|m| m.draft(history, k)).transpose()?.unwrap_or_default(),
            };
            return Ok(self.offer(tokens, (rows, times)));
        }
        let draft = self.params.drafter.draft(history, room);
        self.verified = self.budget.choose(draft.matched, draft.tokens.len(), rows, times);
        let draft = self.pending.insert(draft);
        Ok(&draft.tokens[..self.verified])
    }

    /// The head's drafts, as many as pay at its measured cost.
    fn draft_mtp(
        &mut self,
        history: &[u32],
        room: usize,
        (rows, times): (usize, &StepTimes),
    ) -> Result<&[u32], ModelError> {
        let k = self.model_drafts(room, (rows, times));
        let Some(mtp) = self.mtp.as_mut() else { return Ok(&[]) };
        let tokens = match k {
            0 => {
                mtp.bound_waiting();
                Vec::new()
            }
            k => mtp.draft(history, k)?,
        };
        let seconds = mtp.take_seconds(tokens.len());
        self.drafting = k > 0;
        // What a drafted token costs, in one-row steps as the engine's
        // steps are timed (a cost that does not learn stays fixed).
        if let (true, false, Some(step)) = (self.params.cost.learned, tokens.is_empty(), times.timed_seconds(1)) {
            self.budget.observe_per_draft(seconds / tokens.len() as f64 / step);
        }
        if k == 0 {
            return Ok(&[]);
        }
        Ok(self.offer(tokens, (rows, times)))
    }

    /// Records the outcome of the step that [`draft`](Self::draft)
    /// prepared: `accepted` drafts taken, and `next`, the token the first
    /// row not accepted gave (`None` when the sequence ended there).
    pub fn settle(&mut self, accepted: usize, next: Option<u32>) {
        let Some(draft) = self.pending.take() else { return };
        if self.verified > 0 {
            self.stats.steps += 1;
            self.stats.drafted += self.verified as u64;
            self.stats.accepted += accepted as u64;
            self.budget.record(draft.matched, self.verified, accepted);
        } else if let (Some(&first), Some(next)) = (draft.tokens.first(), next) {
            // Not verified: whether it would have been accepted, for free.
            self.budget.record(draft.matched, 1, usize::from(first == next));
        }
    }

    /// Takes back its draft model (for another decoding), leaving it
    /// without drafts from a model.
    pub fn take_model(&mut self) -> Option<ModelDrafter> {
        self.model.take().map(|m| *m)
    }

    /// Takes back its prediction head's drafter (for another sequence),
    /// leaving it without drafts from a head.
    pub fn take_mtp(&mut self) -> Option<MtpDrafter> {
        self.mtp.take().map(|m| *m)
    }

    /// What a drafted token costs the budget now, in one-row steps (the
    /// prior, or what the head's rows were measured to cost).
    pub fn per_draft(&self) -> f64 {
        self.budget.per_draft()
    }

    /// Its parameters.
    pub fn params(&self) -> &SpecParams {
        &self.params
    }

    /// The counts so far.
    pub fn stats(&self) -> SpecStats {
        self.stats
    }
}
