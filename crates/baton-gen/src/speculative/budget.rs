//! How many drafted tokens a step verifies: as many as pay for themselves
//! given how often drafts have been accepted, none when drafting does not
//! pay.
//!
//! The rule. A step of `r` rows costs `1 + per_row × (r - 1)` times a step
//! of one row, and `fixed` more when it verifies drafts ([`StepCost`],
//! measured on the model; see [`StepCost::MEASURED`]). If each drafted
//! token is accepted with probability `a` given the ones before it were, a
//! sequence's `k` drafts yield `a + … + a^k` tokens beyond its one on
//! average. In a step that carries `r` rows without them (one for a
//! sequence decoding alone; a server's step carries the other sequences'
//! too) the budget picks the `k` (up to the draft's length and
//! `draft_max`) that gives the step the most tokens per unit of cost, and
//! drafts nothing when that `k` is below `draft_min` or gains less than
//! [`MIN_GAIN`] over the step without drafts (a margin for the estimate's
//! noise: a text that does not repeat must not pay for drafts). So the
//! more rows a step already carries, the surer a draft must be. `a` is
//! estimated per length of the matched n-gram (a long match is likelier to
//! continue than a one-token one), as a moving average over the drafted
//! tokens verified; when a draft is not verified, its first token is still
//! compared with the token the step gives, for free, so that a text that
//! starts repeating turns drafting back on.

/// What a verification step costs beyond a step of one row, in steps of
/// one row: `fixed + per_row × k` for `k` drafted tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepCost {
    /// A verifying step's own cost (another plan, every row's logits).
    pub fixed: f64,
    /// Each drafted row's.
    pub per_row: f64,
    /// Making each drafted token (a draft model's step; 0 for n-grams).
    pub per_draft: f64,
}

impl StepCost {
    /// SmolLM2-135M Q4_1 on the CPU backend (AMD EPYC Zen 5, a busy
    /// machine): steps of 2, 3, 5 and 9 rows measured at 1.19, 1.24, 1.51
    /// and 2.10 times one row (`baton bench spec` prints these).
    pub const MEASURED: StepCost = StepCost { fixed: 0.06, per_row: 0.13, per_draft: 0.0 };

    /// Rows that cost nothing: every draft found is verified.
    pub const FREE: StepCost = StepCost { fixed: 0.0, per_row: 0.0, per_draft: 0.0 };

    /// The cost of a step of `rows` rows (at least one) that verifies
    /// `k` drafts besides them, in steps of one row.
    pub fn of(self, rows: usize, k: usize) -> f64 {
        let base = 1.0 + self.per_row * rows.saturating_sub(1) as f64;
        match k {
            0 => base,
            k => base + self.fixed + (self.per_row + self.per_draft) * k as f64,
        }
    }
}

/// The least gain (tokens per unit of cost, against a plain step's 1) for
/// which a step verifies drafts.
pub const MIN_GAIN: f64 = 1.03;

/// The weight of the latest observation in the acceptance estimates.
const RATE_WEIGHT: f64 = 0.15;

/// How far [`DraftBudget::relax`] moves an estimate back to the prior.
const RELAX_WEIGHT: f64 = 0.02;

/// The acceptance assumed before any observation.
const PRIOR: f64 = 0.5;

/// Choices of the number of drafted tokens a step verifies.
#[derive(Debug, Clone)]
pub struct DraftBudget {
    draft_max: usize,
    draft_min: usize,
    cost: StepCost,
    /// Per matched n-gram length (index n - 1): the acceptance estimate.
    rates: Vec<f64>,
}

impl DraftBudget {
    /// A budget of at most `draft_max` drafted tokens a step, at least
    /// `draft_min` when drafting at all, for n-grams up to `max_n` long,
    /// with verification steps costing `cost`.
    pub fn new(draft_max: usize, draft_min: usize, max_n: usize, cost: StepCost) -> DraftBudget {
        DraftBudget { draft_max, draft_min: draft_min.max(1), cost, rates: vec![PRIOR; max_n.max(1)] }
    }

    /// The acceptance estimate for drafts from a match of `matched` tokens.
    pub fn rate(&self, matched: usize) -> f64 {
        self.rates.get(matched.saturating_sub(1)).copied().unwrap_or(PRIOR)
    }

    /// How many of `proposed` drafted tokens (from a match of `matched`
    /// tokens) to verify in a step that carries `rows` rows without them
    /// (each row a token): 0 when drafting does not pay.
    pub fn choose(&self, matched: usize, proposed: usize, rows: usize) -> usize {
        let most = proposed.min(self.draft_max);
        if matched == 0 || most < self.draft_min {
            return 0;
        }
        let a = self.rate(matched);
        let rows = rows.max(1);
        let plain = rows as f64 / self.cost.of(rows, 0);
        let (mut best, mut best_gain) = (0, MIN_GAIN);
        let mut expected = rows as f64;
        let mut power = 1.0;
        for k in 1..=most {
            power *= a;
            expected += power;
            let gain = expected / self.cost.of(rows, k) / plain;
            if gain > best_gain {
                (best, best_gain) = (k, gain);
            }
        }
        if best < self.draft_min {
            0
        } else {
            best
        }
    }

    /// Moves the estimate for matches of `matched` tokens a little back
    /// toward the prior: for drafts that cost something to make, which are
    /// not made (so not scored) while they do not pay, so that drafting is
    /// tried again now and then.
    pub fn relax(&mut self, matched: usize) {
        if let Some(rate) = self.rates.get_mut(matched.saturating_sub(1)) {
            *rate += RELAX_WEIGHT * (PRIOR - *rate);
        }
    }

    /// Records a verified draft from a match of `matched` tokens:
    /// `accepted` of its `drafted` tokens were taken (the first rejected
    /// one, if any, counts as a miss; those after it tell nothing).
    pub fn record(&mut self, matched: usize, drafted: usize, accepted: usize) {
        let Some(rate) = self.rates.get_mut(matched.saturating_sub(1)).filter(|_| matched > 0) else { return };
        for _ in 0..accepted.min(drafted) {
            *rate += RATE_WEIGHT * (1.0 - *rate);
        }
        if accepted < drafted {
            *rate -= RATE_WEIGHT * *rate;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drafts_more_as_acceptance_grows() {
        let mut budget = DraftBudget::new(8, 1, 3, StepCost::MEASURED);
        let first = budget.choose(3, 8, 1);
        assert!(first >= 1, "the prior drafts: {first}");
        for _ in 0..20 {
            budget.record(3, 8, 8);
        }
        let later = budget.choose(3, 8, 1);
        assert!(later > first, "after accepted drafts {later} > {first}");
        assert_eq!(later, 8, "near-certain acceptance verifies all it may");
        // Never more than proposed or than draft_max.
        assert_eq!(budget.choose(3, 2, 1), 2);
        let mut capped = DraftBudget::new(4, 1, 3, StepCost::MEASURED);
        capped.record(3, 8, 8);
        assert_eq!(capped.choose(3, 8, 1), 4, "at most draft_max");
    }

    #[test]
    fn stops_drafting_when_drafts_are_rejected_and_resumes_when_they_match() {
        let mut budget = DraftBudget::new(8, 1, 3, StepCost::MEASURED);
        for _ in 0..20 {
            budget.record(1, 2, 0);
        }
        assert_eq!(budget.choose(1, 8, 1), 0, "rate {} pays for no row", budget.rate(1));
        // Other match lengths keep their own estimate.
        assert!(budget.choose(3, 8, 1) > 0);
        // Unverified drafts' first tokens matching bring it back.
        for _ in 0..20 {
            budget.record(1, 1, 1);
        }
        assert!(budget.choose(1, 8, 1) > 0, "rate {}", budget.rate(1));
    }

    #[test]
    fn a_step_carrying_other_rows_asks_surer_drafts() {
        let mut budget = DraftBudget::new(8, 1, 3, StepCost::MEASURED);
        budget.record(2, 2, 1);
        let alone = budget.choose(2, 8, 1);
        assert!(alone > 0, "alone, rate {} drafts", budget.rate(2));
        assert_eq!(budget.choose(2, 8, 8), 0, "beside 7 others, rate {} does not pay", budget.rate(2));
        for _ in 0..30 {
            budget.record(2, 8, 8);
        }
        assert!(budget.choose(2, 8, 8) > 0, "near-certain drafts pay beside others too");
    }

    #[test]
    fn no_match_or_a_short_draft_drafts_nothing() {
        let budget = DraftBudget::new(8, 3, 3, StepCost::MEASURED);
        assert_eq!(budget.choose(0, 8, 1), 0);
        assert_eq!(budget.choose(3, 2, 1), 0, "fewer than draft_min proposed");
        let mut cheap = DraftBudget::new(8, 1, 3, StepCost::FREE);
        cheap.record(2, 1, 0);
        assert!(cheap.choose(2, 8, 1) > 0, "free rows always pay");
    }
}
