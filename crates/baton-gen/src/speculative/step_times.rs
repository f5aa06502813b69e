//! What a step of `r` rows costs, as the engine measures it while it runs:
//! the mean seconds of its steps per total row count, with a cost model
//! ([`StepCost`]) standing in where no step of that count has been timed.
//!
//! A step's cost is not linear in its rows, and depends on the machine
//! (a one-sequence step of 9 rows costs about 2x one row on Zen 5; a
//! server step of 8 sequences about 2.7x one): the budget reads the cost
//! of the rows drafts add to a step from what steps of those counts took.
//! A row count timed [`TRUSTED_SAMPLES`] times (after its first step,
//! which builds the step's plan) reads its own mean; one not
//! timed reads the line between the nearest timed counts below and above
//! it, or, beyond the last (or before the first), the nearest timed count
//! scaled by the model's ratio of the two counts; with nothing timed, the
//! model itself.

use std::collections::BTreeMap;

/// What a verification step costs beyond a step of one row, in steps of
/// one row: `fixed + per_row × k` for `k` drafted tokens (the model that
/// seeds [`StepTimes`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepCost {
    /// A verifying step's own cost (another plan, every row's logits).
    pub fixed: f64,
    /// Each drafted row's.
    pub per_row: f64,
    /// Making each drafted token (a draft model's step; 0 for n-grams).
    pub per_draft: f64,
    /// Whether the steps' measured times replace the model as they come
    /// ([`StepTimes::observe`]); a model that does not learn is a fixed
    /// cost (tests that want every draft verified).
    pub learned: bool,
}

impl StepCost {
    /// SmolLM2-135M Q4_1 on the CPU backend (AMD EPYC Zen 5, a busy
    /// machine): steps of 2, 3, 5 and 9 rows measured at 1.19, 1.24, 1.51
    /// and 2.10 times one row (`baton bench spec` prints these); replaced
    /// by the engine's own step times as it runs.
    pub const MEASURED: StepCost = StepCost { fixed: 0.06, per_row: 0.13, per_draft: 0.0, learned: true };

    /// Rows that cost nothing, whatever steps take: every draft found is
    /// verified.
    pub const FREE: StepCost = StepCost { fixed: 0.0, per_row: 0.0, per_draft: 0.0, learned: false };

    /// The cost of a step of `rows` rows (at least one) that verifies
    /// `k` drafts besides them, in steps of one row.
    pub fn of(self, rows: usize, k: usize) -> f64 {
        let base = 1.0 + self.per_row * rows.saturating_sub(1) as f64;
        match k {
            0 => base,
            k => base + self.fixed + (self.per_row + self.per_draft) * k as f64,
        }
    }

    /// The model's cost of a step of `rows` rows in all, in steps of one
    /// row: a step of several rows verifies drafts (one sequence's view).
    fn rows(self, rows: usize) -> f64 {
        match rows {
            0 | 1 => 1.0,
            r => 1.0 + self.fixed + self.per_row * (r - 1) as f64,
        }
    }
}

/// Timings of a row count before its mean is read as its cost.
pub const TRUSTED_SAMPLES: u32 = 3;

/// The most timings a mean weighs equally; later ones move it as a moving
/// average of this length (a machine's load changes).
const WINDOW: u32 = 32;

/// A timing above this many times the table's estimate counts as this many
/// (a step that built a new plan, or that the operating system preempted,
/// says little about rows).
const OUTLIER: f64 = 3.0;

/// One row count's timings.
#[derive(Debug, Clone, Copy)]
struct Timed {
    mean_s: f64,
    samples: u32,
}

/// A trusted row count and its mean seconds.
type Trusted = (usize, f64);

/// The engine's step times per total row count, seeded by a [`StepCost`].
#[derive(Debug, Clone)]
pub struct StepTimes {
    model: StepCost,
    timed: BTreeMap<usize, Timed>,
}

impl StepTimes {
    /// A table with nothing timed yet: `model` answers until steps are
    /// timed (and always, when it does not learn).
    pub fn new(model: StepCost) -> StepTimes {
        StepTimes { model, timed: BTreeMap::new() }
    }

    /// The model that seeds the table.
    pub fn model(&self) -> StepCost {
        self.model
    }

    /// Records that a step of `rows` rows in all took `seconds` (ignored
    /// for a model that does not learn, an empty step, or a time that is
    /// not a positive number). The first step of a row count is not
    /// recorded (it builds the step's plan); a time above [`OUTLIER`] times
    /// what the table says for the count counts as that much (a new shape's
    /// plan, a step the operating system preempted).
    pub fn observe(&mut self, rows: usize, seconds: f64) {
        if !self.model.learned || rows == 0 || !(seconds > 0.0 && seconds.is_finite()) {
            return;
        }
        let bound = self.estimate(rows).map_or(f64::INFINITY, |s| OUTLIER * s);
        let Some(timed) = self.timed.get_mut(&rows) else {
            self.timed.insert(rows, Timed { mean_s: 0.0, samples: 0 });
            return;
        };
        timed.samples = (timed.samples + 1).min(WINDOW);
        timed.mean_s += (seconds.min(bound) - timed.mean_s) / timed.samples as f64;
    }

    /// The mean seconds of a timed count (trusted only).
    fn trusted(&self, rows: usize) -> Option<f64> {
        self.timed.get(&rows).filter(|t| t.samples >= TRUSTED_SAMPLES).map(|t| t.mean_s)
    }

    /// The nearest trusted count at or below `rows` and at or above it.
    fn neighbours(&self, rows: usize) -> (Option<Trusted>, Option<Trusted>) {
        let trusted = |(&r, t): (&usize, &Timed)| (t.samples >= TRUSTED_SAMPLES).then_some((r, t.mean_s));
        let below = self.timed.range(..=rows).rev().find_map(trusted);
        let above = self.timed.range(rows..).find_map(trusted);
        (below, above)
    }

    /// The estimated seconds of a step of `rows` rows (at least one), in
    /// the model's units (a one-row step is 1) while nothing is timed.
    pub fn seconds(&self, rows: usize) -> f64 {
        self.estimate(rows).unwrap_or_else(|| self.model.rows(rows.max(1)))
    }

    /// The estimated seconds of a step of `rows` rows once some row count
    /// is trusted (timed [`TRUSTED_SAMPLES`] times); `None` before.
    pub fn timed_seconds(&self, rows: usize) -> Option<f64> {
        self.estimate(rows)
    }

    /// The estimated seconds of a step of `rows` rows from the trusted
    /// counts; `None` while none is trusted.
    fn estimate(&self, rows: usize) -> Option<f64> {
        let rows = rows.max(1);
        if let Some(mean) = self.trusted(rows) {
            return Some(mean);
        }
        let model = |r: usize| self.model.rows(r);
        match self.neighbours(rows) {
            (Some((lo, lo_s)), Some((hi, hi_s))) => Some(lo_s + (hi_s - lo_s) * (rows - lo) as f64 / (hi - lo) as f64),
            (Some((near, near_s)), None) | (None, Some((near, near_s))) => Some(near_s * model(rows) / model(near)),
            (None, None) => None,
        }
    }

    /// The cost of a step of `rows` rows, in steps of one row.
    pub fn cost(&self, rows: usize) -> f64 {
        self.seconds(rows) / self.seconds(1)
    }

    /// The row counts timed, with their mean seconds and timings (for
    /// reports).
    pub fn timed(&self) -> impl Iterator<Item = (usize, f64, u32)> + '_ {
        self.timed.iter().filter(|(_, t)| t.samples > 0).map(|(&rows, t)| (rows, t.mean_s, t.samples))
    }
}

#[cfg(test)]
impl StepTimes {
    /// A table seeded by [`StepCost::MEASURED`] whose steps of each count
    /// took the seconds given, each timed [`TRUSTED_SAMPLES`] times after
    /// its first.
    pub(super) fn timed_at(steps: &[(usize, f64)]) -> StepTimes {
        let mut times = StepTimes::new(StepCost::MEASURED);
        for _ in 0..=TRUSTED_SAMPLES {
            for &(rows, seconds) in steps {
                times.observe(rows, seconds);
            }
        }
        times
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn the_model_answers_until_steps_are_timed() {
        let times = StepTimes::new(StepCost::MEASURED);
        for rows in [1, 2, 5, 9, 64] {
            let expected = StepCost::MEASURED.of(1, rows - 1);
            assert!(close(times.cost(rows), expected), "{rows} rows: {} against {expected}", times.cost(rows));
        }
    }

    #[test]
    fn timed_counts_replace_the_model_and_counts_between_read_the_line() {
        let times = StepTimes::timed_at(&[(1, 0.010), (9, 0.030)]);
        assert!(close(times.cost(9), 3.0), "9 rows timed at 3x: {}", times.cost(9));
        // Between timed counts: the line through them.
        assert!(close(times.cost(5), 2.0), "5 rows: {}", times.cost(5));
        // Beyond the last: the last scaled by the model's ratio.
        let expected = 3.0 * StepCost::MEASURED.of(1, 16) / StepCost::MEASURED.of(1, 8);
        assert!(close(times.cost(17), expected), "17 rows: {} against {expected}", times.cost(17));
    }

    #[test]
    fn a_count_timed_fewer_times_than_trusted_is_not_read() {
        let mut times = StepTimes::timed_at(&[(1, 0.010)]);
        // The first timing (the plan's) and all but one of the rest.
        for _ in 0..TRUSTED_SAMPLES {
            times.observe(2, 0.015);
        }
        let expected = StepCost::MEASURED.of(1, 1);
        assert!(close(times.cost(2), expected), "2 rows: {} against the model's {expected}", times.cost(2));
        times.observe(2, 0.015);
        assert!(close(times.cost(2), 1.5), "2 rows once trusted: {}", times.cost(2));
    }

    #[test]
    fn without_a_one_row_timing_costs_are_scaled_from_the_nearest_count() {
        let mut times = StepTimes::timed_at(&[(8, 0.027)]);
        // One row: 8 rows' time scaled down by the model; cost(8) is then
        // the model's (only one count is timed).
        assert!(close(times.cost(8), StepCost::MEASURED.of(1, 7)), "{}", times.cost(8));
        for _ in 0..=TRUSTED_SAMPLES {
            times.observe(1, 0.010);
        }
        assert!(close(times.cost(8), 2.7), "8 rows at 2.7x one: {}", times.cost(8));
    }

    #[test]
    fn the_mean_follows_a_window_and_bounds_outliers() {
        let mut times = StepTimes::timed_at(&[(1, 0.010)]);
        times.observe(1, 1.0);
        let bounded = (0.010 * TRUSTED_SAMPLES as f64 + OUTLIER * 0.010) / (TRUSTED_SAMPLES + 1) as f64;
        assert!(close(times.seconds(1), bounded), "{} against {bounded}", times.seconds(1));
        // A machine that got slower: the mean moves to its new times.
        for _ in 0..400 {
            times.observe(1, 0.020);
        }
        assert!((times.seconds(1) - 0.020).abs() < 1e-4, "{}", times.seconds(1));
    }

    #[test]
    fn a_new_counts_first_step_is_not_read_and_a_plans_time_is_bounded() {
        let mut times = StepTimes::timed_at(&[(1, 0.010), (8, 0.020)]);
        // 12 rows: its first step (the plan) is left out; the next, a new
        // shape's plan again, counts as OUTLIER times the table's estimate
        // (8 rows' time scaled by the model).
        times.observe(12, 0.500);
        assert_eq!(times.timed().filter(|t| t.0 == 12).count(), 0, "the first step is not recorded");
        let line = StepTimes::timed_at(&[(1, 0.010), (8, 0.020)]).seconds(12);
        times.observe(12, 0.500);
        let (_, mean, samples) = times.timed().find(|t| t.0 == 12).expect("12 rows timed");
        assert!(close(mean, OUTLIER * line) && samples == 1, "{mean} against {}", OUTLIER * line);
    }

    #[test]
    fn a_model_that_does_not_learn_and_bad_timings_change_nothing() {
        let mut free = StepTimes::new(StepCost::FREE);
        free.observe(9, 5.0);
        assert_eq!(free.cost(9), 1.0);
        assert_eq!(free.timed().count(), 0);
        let mut times = StepTimes::new(StepCost::MEASURED);
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            times.observe(3, bad);
        }
        times.observe(0, 1.0);
        assert_eq!(times.timed().count(), 0);
    }
}
