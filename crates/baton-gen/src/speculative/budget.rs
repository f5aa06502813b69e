//! How many drafted tokens a step verifies: as many as pay for themselves
//! given how often drafts have been accepted, none when drafting does not
//! pay.
//!
//! The rule. A step of `r` rows costs what the engine's steps of `r` rows
//! took ([`StepTimes`]: measured as it runs, seeded by a cost model), and
//! each drafted token `per_draft` steps of one row to make (a draft
//! model's). If each drafted token is accepted with probability `a` given
//! the ones before it were, a sequence's `k` drafts yield `a + … + a^k`
//! tokens beyond its one on average. In a step that carries `r` rows
//! without them (one for a sequence decoding alone; a server's step carries
//! the other sequences' too) the `k` drafted rows cost what a step of
//! `r + k` rows takes beyond one of `r` (the marginal cost given the
//! step's other rows), and the budget picks the `k` (up to the draft's
//! length and `draft_max`) that gives the step the most tokens per unit of
//! cost, and
//! drafts nothing when that `k` is below `draft_min` or gains less than
//! [`MIN_GAIN`] over the step without drafts (a margin for the estimate's
//! noise: a text that does not repeat must not pay for drafts). So the
//! more a row costs beside the step's others, the surer a draft must be. `a` is
//! estimated per length of the matched n-gram (a long match is likelier to
//! continue than a one-token one), as a moving average over the drafted
//! tokens verified; when a draft is not verified, its first token is still
//! compared with the token the step gives, for free, so that a text that
//! starts repeating turns drafting back on.

use super::step_times::StepTimes;

/// The least gain (tokens per unit of cost, against a plain step's 1) for
/// which a step verifies drafts.
pub const MIN_GAIN: f64 = 1.03;

/// The weight of the latest observation in the acceptance estimates.
const RATE_WEIGHT: f64 = 0.15;

/// The weight of the latest timing in a drafted token's cost.
const COST_WEIGHT: f64 = 0.25;

/// How far [`DraftBudget::relax`] moves an estimate back to the prior.
const RELAX_WEIGHT: f64 = 0.02;

/// The acceptance assumed before any observation.
const PRIOR: f64 = 0.5;

/// Choices of the number of drafted tokens a step verifies.
#[derive(Debug, Clone)]
pub struct DraftBudget {
    draft_max: usize,
    draft_min: usize,
    /// Making a drafted token, in steps of one row.
    per_draft: f64,
    /// Per matched n-gram length (index n - 1): the acceptance estimate.
    rates: Vec<f64>,
}

impl DraftBudget {
    /// A budget of at most `draft_max` drafted tokens a step, at least
    /// `draft_min` when drafting at all, for n-grams up to `max_n` long,
    /// each drafted token costing `per_draft` steps of one row to make.
    pub fn new(draft_max: usize, draft_min: usize, max_n: usize, per_draft: f64) -> DraftBudget {
        DraftBudget { draft_max, draft_min: draft_min.max(1), per_draft, rates: vec![PRIOR; max_n.max(1)] }
    }

    /// What making a drafted token costs, in steps of one row.
    pub fn per_draft(&self) -> f64 {
        self.per_draft
    }

    /// Moves the cost of making a drafted token toward `measured` (steps
    /// of one row, as timed): a moving average, so one slow draft (the
    /// machine preempted it) does not stop drafting.
    pub fn observe_per_draft(&mut self, measured: f64) {
        if measured.is_finite() && measured >= 0.0 {
            self.per_draft += COST_WEIGHT * (measured - self.per_draft);
        }
    }

    /// The acceptance estimate for drafts from a match of `matched` tokens.
    pub fn rate(&self, matched: usize) -> f64 {
        self.rates.get(matched.saturating_sub(1)).copied().unwrap_or(PRIOR)
    }

    /// How many of `proposed` drafted tokens (from a match of `matched`
    /// tokens) to verify in a step that carries `rows` rows without them
    /// (each row a token), steps costing what `times` says: 0 when drafting
    /// does not pay.
    pub fn choose(&self, matched: usize, proposed: usize, rows: usize, times: &StepTimes) -> usize {
        let most = proposed.min(self.draft_max);
        if matched == 0 || most < self.draft_min {
            return 0;
        }
        let a = self.rate(matched);
        let rows = rows.max(1);
        let base = times.cost(rows);
        let plain = rows as f64 / base;
        let (mut best, mut best_gain) = (0, MIN_GAIN);
        let (mut expected, mut power, mut step) = (rows as f64, 1.0, base);
        for k in 1..=most {
            power *= a;
            expected += power;
            // Rows never make a step cheaper (a timing's noise may say so).
            step = step.max(times.cost(rows + k));
            let gain = expected / (step + self.per_draft * k as f64) / plain;
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
    use super::super::step_times::StepCost;
    use super::*;

    /// The table seeded by the measured model, nothing timed.
    fn seeded() -> StepTimes {
        StepTimes::new(StepCost::MEASURED)
    }

    #[test]
    fn drafts_more_as_acceptance_grows() {
        let times = seeded();
        let mut budget = DraftBudget::new(8, 1, 3, 0.0);
        let first = budget.choose(3, 8, 1, &times);
        assert!(first >= 1, "the prior drafts: {first}");
        for _ in 0..20 {
            budget.record(3, 8, 8);
        }
        let later = budget.choose(3, 8, 1, &times);
        assert!(later > first, "after accepted drafts {later} > {first}");
        assert_eq!(later, 8, "near-certain acceptance verifies all it may");
        // Never more than proposed or than draft_max.
        assert_eq!(budget.choose(3, 2, 1, &times), 2);
        let mut capped = DraftBudget::new(4, 1, 3, 0.0);
        capped.record(3, 8, 8);
        assert_eq!(capped.choose(3, 8, 1, &times), 4, "at most draft_max");
    }

    #[test]
    fn stops_drafting_when_drafts_are_rejected_and_resumes_when_they_match() {
        let times = seeded();
        let mut budget = DraftBudget::new(8, 1, 3, 0.0);
        for _ in 0..20 {
            budget.record(1, 2, 0);
        }
        assert_eq!(budget.choose(1, 8, 1, &times), 0, "rate {} pays for no row", budget.rate(1));
        // Other match lengths keep their own estimate.
        assert!(budget.choose(3, 8, 1, &times) > 0);
        // Unverified drafts' first tokens matching bring it back.
        for _ in 0..20 {
            budget.record(1, 1, 1);
        }
        assert!(budget.choose(1, 8, 1, &times) > 0, "rate {}", budget.rate(1));
    }

    #[test]
    fn a_step_carrying_other_rows_asks_surer_drafts() {
        let times = seeded();
        let mut budget = DraftBudget::new(8, 1, 3, 0.0);
        budget.record(2, 2, 1);
        let alone = budget.choose(2, 8, 1, &times);
        assert!(alone > 0, "alone, rate {} drafts", budget.rate(2));
        assert_eq!(budget.choose(2, 8, 8, &times), 0, "beside 7 others, rate {} does not pay", budget.rate(2));
        for _ in 0..30 {
            budget.record(2, 8, 8);
        }
        assert!(budget.choose(2, 8, 8, &times) > 0, "near-certain drafts pay beside others too");
    }

    #[test]
    fn rows_beside_others_are_drafted_as_their_measured_marginal_cost_allows() {
        let mut budget = DraftBudget::new(8, 1, 3, 0.0);
        budget.record(2, 8, 8);
        budget.record(2, 8, 8);
        let rate = budget.rate(2);
        // A step of 8 sequences takes 2.7 one-row steps (issue 29's table).
        // Rows beyond them cheap (0.1 of a step each): drafts pay.
        let cheap = StepTimes::timed_at(&[(1, 0.010), (8, 0.027), (16, 0.035)]);
        let k = budget.choose(2, 8, 8, &cheap);
        assert!(k > 0, "rate {rate}, rows at 0.1 beside 8 others: {k} drafts");
        // Rows beyond them as dear as the 8 rows' own (0.35 each): no number
        // of drafts at this rate pays, where the seed model's line (0.13 a
        // row) still drafts.
        let dear = StepTimes::timed_at(&[(1, 0.010), (8, 0.027), (16, 0.055)]);
        assert_eq!(budget.choose(2, 8, 8, &dear), 0, "rate {rate}, rows at 0.35 beside 8 others");
        assert!(budget.choose(2, 8, 8, &seeded()) > 0, "the seed model drafts at rate {rate}");
    }

    #[test]
    fn one_sequence_drafts_by_its_own_steps_times() {
        let mut budget = DraftBudget::new(8, 1, 3, 0.0);
        budget.record(2, 2, 1);
        let rate = budget.rate(2);
        // 9 rows at 1.4 one-row steps: drafts at this rate pay.
        let cheap = StepTimes::timed_at(&[(1, 0.010), (9, 0.014)]);
        assert!(budget.choose(2, 8, 1, &cheap) > 0, "rate {rate}, 9 rows at 1.4");
        // Every row as dear as a step: nothing below certainty pays.
        let dear = StepTimes::timed_at(&[(1, 0.010), (2, 0.020), (9, 0.090)]);
        assert_eq!(budget.choose(2, 8, 1, &dear), 0, "rate {rate}, rows as dear as steps");
        // A draft model's tokens cost their steps too.
        let mut drafting = DraftBudget::new(8, 1, 1, 1.0);
        drafting.record(1, 2, 1);
        assert_eq!(drafting.choose(1, 8, 1, &cheap), 0, "drafts that cost a step each, rate {rate}");
    }

    #[test]
    fn a_drafts_measured_cost_stops_drafting_when_it_does_not_pay() {
        let cheap = StepTimes::timed_at(&[(1, 0.010), (9, 0.014)]);
        let mut budget = DraftBudget::new(8, 1, 1, 0.0);
        budget.record(1, 2, 1);
        assert!(budget.choose(1, 8, 1, &cheap) > 0, "free drafts at rate {} pay", budget.rate(1));
        // Drafts timed at two one-row steps each (a head on the host).
        for _ in 0..20 {
            budget.observe_per_draft(2.0);
        }
        assert!((budget.per_draft() - 2.0).abs() < 0.01, "the cost moved to the timings: {}", budget.per_draft());
        assert_eq!(budget.choose(1, 8, 1, &cheap), 0, "drafts dearer than a step at rate {}", budget.rate(1));
        // A timing that is not a number changes nothing.
        budget.observe_per_draft(f64::NAN);
        assert!((budget.per_draft() - 2.0).abs() < 0.01);
    }

    #[test]
    fn rows_timed_cheaper_than_fewer_rows_cost_the_fewer_rows_cost() {
        let mut budget = DraftBudget::new(8, 1, 3, 0.0);
        for _ in 0..30 {
            budget.record(1, 2, 0);
        }
        // Noise says 9 rows are cheaper than 1: a draft that is never
        // accepted still gains nothing.
        let noisy = StepTimes::timed_at(&[(1, 0.010), (2, 0.012), (9, 0.008)]);
        assert_eq!(budget.choose(1, 8, 1, &noisy), 0, "rate {}", budget.rate(1));
    }

    #[test]
    fn no_match_or_a_short_draft_drafts_nothing() {
        let budget = DraftBudget::new(8, 3, 3, 0.0);
        assert_eq!(budget.choose(0, 8, 1, &seeded()), 0);
        assert_eq!(budget.choose(3, 2, 1, &seeded()), 0, "fewer than draft_min proposed");
        let mut cheap = DraftBudget::new(8, 1, 3, 0.0);
        cheap.record(2, 1, 0);
        assert!(cheap.choose(2, 8, 1, &StepTimes::new(StepCost::FREE)) > 0, "free rows always pay");
    }
}
