//! Behaviour of `baton_gen::Sampler`: the llama.cpp chain
//! (penalty, top-k, top-p, min-p, temperature, draw), determinism, the error
//! cases and the absence of per-token allocation.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use baton_gen::{Sampler, SamplingError, SamplingParams, DEFAULT_SEED};

/// Counts the allocations made by the current thread, so a test can check
/// that steady-state sampling allocates nothing while other tests run on
/// other threads.
struct CountingAllocator;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged, so `System`'s guarantees hold; the counter is a const-initialized
// thread-local `Cell` without a destructor, which never allocates.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|count| count.set(count.get() + 1));
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` through `alloc` or `realloc` above.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|count| count.set(count.get() + 1));
        // SAFETY: same contract as our caller's; `ptr` came from `System`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

fn allocations_on_this_thread() -> usize {
    ALLOCATIONS.with(Cell::get)
}

/// Sampling with temperature 1 and every filter off: the plain softmax draw.
fn unfiltered(seed: u64) -> SamplingParams {
    SamplingParams {
        temperature: 1.0,
        top_k: 0,
        top_p: 1.0,
        min_p: 0.0,
        repeat_penalty: 1.0,
        repeat_last_n: 64,
        presence_penalty: 0.0,
        frequency_penalty: 0.0,
        seed,
        logit_bias: Default::default(),
    }
}

/// Deterministic pseudo-random logits in [-scale, scale] (a 64-bit LCG, so
/// the tests need no PRNG crate).
fn test_logits(vocab_size: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut state = seed.wrapping_mul(2).wrapping_add(1);
    (0..vocab_size)
        .map(|_| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let unit = (state >> 40) as f32 / (1u64 << 24) as f32;
            (unit * 2.0 - 1.0) * scale
        })
        .collect()
}

/// Logits whose softmax is exactly `probabilities` (up to rounding).
fn logits_of(probabilities: &[f64]) -> Vec<f32> {
    probabilities.iter().map(|p| p.ln() as f32).collect()
}

fn sorted_ids(sampler: &Sampler) -> Vec<u32> {
    let mut ids: Vec<u32> = sampler.candidates().iter().map(|c| c.id).collect();
    ids.sort_unstable();
    ids
}

fn draws(sampler: &mut Sampler, logits: &[f32], count: usize) -> Vec<u32> {
    (0..count).map(|_| sampler.sample(logits).expect("valid logits and parameters")).collect()
}

#[test]
fn defaults_match_llama_cpp() {
    let params = SamplingParams::default();
    assert_eq!(params.temperature, 0.8);
    assert_eq!(params.top_k, 40);
    assert_eq!(params.top_p, 0.95);
    assert_eq!(params.min_p, 0.05);
    assert_eq!(params.repeat_penalty, 1.0);
    assert_eq!(params.repeat_last_n, 64);
    assert_eq!(params.seed, DEFAULT_SEED);
    assert_eq!(params.validate(), Ok(()));
    assert!(!params.is_greedy());
    assert!(SamplingParams::greedy().is_greedy());
    assert_eq!(SamplingParams::greedy().validate(), Ok(()));
}

#[test]
fn greedy_picks_the_argmax() {
    let mut sampler = Sampler::new(SamplingParams::greedy());
    let logits = [0.1, -2.0, 3.5, 3.4, f32::NEG_INFINITY, 0.0];
    for _ in 0..3 {
        assert_eq!(sampler.sample(&logits), Ok(2));
    }
    let row = test_logits(49152, 11, 8.0);
    let expected = row.iter().enumerate().fold(0, |best, (i, &l)| if l > row[best] { i } else { best });
    assert_eq!(sampler.sample(&row), Ok(expected as u32));
    assert_eq!(sampler.candidates().len(), 1);
    assert_eq!(sampler.candidates()[0].id, expected as u32);
}

#[test]
fn greedy_ties_go_to_the_lowest_id() {
    let mut sampler = Sampler::new(SamplingParams::greedy());
    assert_eq!(sampler.sample(&[1.0, 5.0, 2.0, 5.0, 5.0]), Ok(1));
    assert_eq!(sampler.sample(&[7.0, 7.0]), Ok(0));
    // +0 and -0 are equal logits, so the lower id wins here too.
    assert_eq!(sampler.sample(&[-1.0, -0.0, 0.0]), Ok(1));
    // +inf counts as the largest finite logit (as in the filters): a tie.
    assert_eq!(sampler.sample(&[0.0, f32::MAX, f32::INFINITY]), Ok(1));
    assert_eq!(sampler.sample(&[f32::NEG_INFINITY, f32::NEG_INFINITY, -f32::MAX]), Ok(2));
}

#[test]
fn top_k_one_equals_greedy_at_any_temperature() {
    let mut greedy = Sampler::new(SamplingParams::greedy());
    for temperature in [0.01, 0.5, 1.0, 2.0, 100.0] {
        let mut sampler = Sampler::new(SamplingParams { temperature, top_k: 1, ..unfiltered(5) });
        for row_seed in 0..20 {
            let row = test_logits(1000, row_seed, 4.0);
            assert_eq!(
                sampler.sample(&row),
                greedy.sample(&row),
                "top_k 1 at temperature {temperature}, row {row_seed}"
            );
        }
        // Ties: top-k keeps the lowest id, like greedy.
        assert_eq!(sampler.sample(&[0.0, 3.0, 3.0, 1.0]), Ok(1));
    }
}

#[test]
fn top_k_keeps_the_k_highest_logits() {
    let row = test_logits(5000, 3, 6.0);
    let mut ranked: Vec<u32> = (0..row.len() as u32).collect();
    ranked.sort_by(|&a, &b| row[b as usize].total_cmp(&row[a as usize]).then(a.cmp(&b)));
    let mut expected: Vec<u32> = ranked[..40].to_vec();
    expected.sort_unstable();

    let mut sampler = Sampler::new(SamplingParams { top_k: 40, ..unfiltered(1) });
    let token = sampler.sample(&row).expect("valid row");
    assert_eq!(sorted_ids(&sampler), expected);
    assert!(expected.contains(&token), "drew {token} outside the top 40");
    // The survivors are walked from the most likely down.
    let logits: Vec<f32> = sampler.candidates().iter().map(|c| c.logit).collect();
    assert!(logits.windows(2).all(|w| w[0] >= w[1]), "not sorted: {logits:?}");
}

#[test]
fn top_k_is_exact_on_sorted_and_tied_rows() {
    let vocab_size = 5000u32;
    let ascending: Vec<f32> = (0..vocab_size).map(|i| i as f32 * 1e-3).collect();
    let descending: Vec<f32> = ascending.iter().rev().copied().collect();
    let flat = vec![0.0f32; vocab_size as usize];
    let mut with_ties = test_logits(vocab_size as usize, 8, 1.0);
    for id in [4000, 17, 2500, 4999, 1023, 1024] {
        with_ties[id] = 2.0;
    }
    let cases: [(&str, &[f32], Vec<u32>); 4] = [
        ("ascending", &ascending, (vocab_size - 40..vocab_size).collect()),
        ("descending", &descending, (0..40).collect()),
        ("flat", &flat, (0..40).collect()),
        ("tied maxima", &with_ties, vec![17, 1023, 1024, 2500]),
    ];
    for (name, row, expected) in cases {
        let mut sampler = Sampler::new(SamplingParams { top_k: expected.len(), ..unfiltered(6) });
        sampler.sample(row).expect("valid row");
        assert_eq!(sorted_ids(&sampler), expected, "top-{} of the {name} row", expected.len());
    }
}

#[test]
fn top_p_keeps_the_smallest_prefix_reaching_p() {
    let logits = logits_of(&[0.05, 0.5, 0.15, 0.3]);
    // Sorted: 1 (0.5), 3 (0.3), 2 (0.15), 0 (0.05); cumulative 0.5, 0.8, 0.95, 1.
    let cases: [(f32, &[u32]); 5] =
        [(0.3, &[1]), (0.6, &[1, 3]), (0.9, &[1, 2, 3]), (0.99, &[0, 1, 2, 3]), (1.0, &[0, 1, 2, 3])];
    for (top_p, expected) in cases {
        let mut sampler = Sampler::new(SamplingParams { top_p, ..unfiltered(2) });
        let drawn = draws(&mut sampler, &logits, 2000);
        assert_eq!(sorted_ids(&sampler), expected, "kept set for top_p {top_p}");
        let mut seen: Vec<u32> = drawn.clone();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen, expected, "tokens drawn with top_p {top_p}");
    }
}

#[test]
fn top_p_always_keeps_at_least_one_token() {
    let mut sampler = Sampler::new(SamplingParams { top_p: f32::MIN_POSITIVE, ..unfiltered(3) });
    let logits = [1.0, 1.0, 1.0];
    assert_eq!(sampler.sample(&logits), Ok(0));
    assert_eq!(sorted_ids(&sampler), [0]);
}

#[test]
fn min_p_drops_tokens_below_the_fraction_of_the_max() {
    // Relative to the max (0.4): 0.25 -> 0.625, 0.2 -> 0.5, 0.1 -> 0.25, 0.05 -> 0.125.
    let logits = logits_of(&[0.2, 0.05, 0.4, 0.1, 0.25]);
    let cases: [(f32, &[u32]); 5] =
        [(0.0, &[0, 1, 2, 3, 4]), (0.1, &[0, 1, 2, 3, 4]), (0.2, &[0, 2, 3, 4]), (0.55, &[2, 4]), (1.0, &[2])];
    for (min_p, expected) in cases {
        let mut sampler = Sampler::new(SamplingParams { min_p, ..unfiltered(4) });
        let drawn = draws(&mut sampler, &logits, 2000);
        assert_eq!(sorted_ids(&sampler), expected, "kept set for min_p {min_p}");
        let mut seen = drawn;
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen, expected, "tokens drawn with min_p {min_p}");
    }
}

#[test]
fn filters_chain_in_llama_cpp_order() {
    // top-k 3 keeps {2, 4, 0} (0.4, 0.25, 0.2; renormalized 0.47, 0.29, 0.24);
    // top-p 0.7 then keeps {2, 4} (0.47 + 0.29 >= 0.7); min-p 0.7 keeps
    // only 2 (0.25 / 0.4 < 0.7).
    let logits = logits_of(&[0.2, 0.05, 0.4, 0.1, 0.25]);
    let mut sampler = Sampler::new(SamplingParams { top_k: 3, top_p: 0.7, ..unfiltered(5) });
    sampler.sample(&logits).expect("valid row");
    assert_eq!(sorted_ids(&sampler), [2, 4]);

    let mut sampler = Sampler::new(SamplingParams { top_k: 3, top_p: 0.7, min_p: 0.7, ..unfiltered(5) });
    assert_eq!(sampler.sample(&logits), Ok(2));
    assert_eq!(sorted_ids(&sampler), [2]);
}

#[test]
fn repetition_penalty_changes_the_argmax() {
    let params = SamplingParams { repeat_penalty: 1.5, repeat_last_n: 2, ..SamplingParams::greedy() };
    let mut sampler = Sampler::new(params);
    let positive = [2.0, 1.5, -1.0];
    assert_eq!(sampler.sample(&positive), Ok(0));
    sampler.accept(0);
    // 2.0 / 1.5 = 1.33 < 1.5.
    assert_eq!(sampler.sample(&positive), Ok(1));

    // Negative logits are multiplied: -1.0 * 1.5 = -1.5 < -1.2.
    let negative = [-1.0, -1.2];
    assert_eq!(sampler.sample(&negative), Ok(1));

    // Token 0 leaves the window of 2 after two more tokens.
    sampler.accept(7);
    assert_eq!(sampler.sample(&positive), Ok(1));
    sampler.accept(8);
    assert_eq!(sampler.sample(&positive), Ok(0));

    // reset forgets the history.
    sampler.accept(0);
    assert_eq!(sampler.sample(&positive), Ok(1));
    sampler.reset();
    assert_eq!(sampler.sample(&positive), Ok(0));
}

#[test]
fn repetition_penalty_applies_once_per_distinct_token() {
    let mut sampler = Sampler::new(SamplingParams { repeat_penalty: 1.5, ..SamplingParams::greedy() });
    for _ in 0..3 {
        sampler.accept(0);
    }
    // Once: 2.0 / 1.5 = 1.33 > 1.0; three times would give 0.59 < 1.0.
    assert_eq!(sampler.sample(&[2.0, 1.0]), Ok(0));
}

#[test]
fn presence_and_frequency_penalties_subtract_per_token_and_per_occurrence() {
    // Token 0 accepted 3 times, token 1 once, token 2 never.
    let history = [0, 1, 0, 0];
    let logits = [3.0, 2.2, 2.0];
    let pick = |presence_penalty, frequency_penalty| {
        let mut sampler =
            Sampler::new(SamplingParams { presence_penalty, frequency_penalty, ..SamplingParams::greedy() });
        for t in history {
            sampler.accept(t);
        }
        sampler.sample(&logits)
    };
    // Off: the largest logit.
    assert_eq!(pick(0.0, 0.0), Ok(0));
    // Presence 0.5: 2.5, 1.7, 2.0.
    assert_eq!(pick(0.5, 0.0), Ok(0));
    // Presence 0.9: 2.1, 1.3, 2.0 (each repeated token pays once).
    assert_eq!(pick(0.9, 0.0), Ok(0));
    // Frequency 0.4: 3.0 - 1.2 = 1.8, 1.8, 2.0 (token 0 pays three times).
    assert_eq!(pick(0.0, 0.4), Ok(2));
    // A negative presence penalty favours what was said: 3.5, 2.7, 2.0.
    assert_eq!(pick(-0.5, 0.0), Ok(0));
    let bad = SamplingParams { frequency_penalty: f32::NAN, ..SamplingParams::greedy() };
    assert!(bad.validate().is_err());
}

#[test]
fn repetition_penalty_of_one_or_an_empty_window_changes_nothing() {
    let logits = [2.0, 1.5];
    for (repeat_penalty, repeat_last_n) in [(1.0, 64), (1.5, 0)] {
        let mut sampler = Sampler::new(SamplingParams { repeat_penalty, repeat_last_n, ..SamplingParams::greedy() });
        sampler.accept(0);
        assert_eq!(sampler.sample(&logits), Ok(0), "penalty {repeat_penalty} over {repeat_last_n} tokens");
    }
}

#[test]
fn accepted_tokens_outside_the_vocabulary_are_ignored() {
    let mut sampler = Sampler::new(SamplingParams { repeat_penalty: 2.0, ..SamplingParams::greedy() });
    sampler.accept(1_000_000);
    sampler.accept(u32::MAX);
    assert_eq!(sampler.sample(&[1.0, 3.0]), Ok(1));
}

#[test]
fn the_same_seed_reproduces_the_sequence() {
    let logits = test_logits(49152, 21, 5.0);
    let run = |params: SamplingParams| {
        let mut sampler = Sampler::new(params);
        (0..200)
            .map(|_| {
                let token = sampler.sample(&logits).expect("valid row");
                sampler.accept(token);
                token
            })
            .collect::<Vec<u32>>()
    };
    let params = SamplingParams { temperature: 1.5, repeat_penalty: 1.1, ..SamplingParams::default() };
    let first = run(params.clone());
    assert_eq!(first, run(params.clone()), "same seed, same parameters, same row");

    let mut sampler = Sampler::new(params.clone());
    let before_reset: Vec<u32> = draws(&mut sampler, &logits, 50);
    sampler.reset();
    assert_eq!(draws(&mut sampler, &logits, 50), before_reset, "reset reseeds");

    let other = run(SamplingParams { seed: 1, ..params.clone() });
    assert_ne!(first, other, "seeds {} and 1 drew the same 200 tokens", params.seed);
}

#[test]
fn sequences_are_pinned_across_platforms() {
    // The draw depends only on the seed, the rows and the arithmetic in
    // `sampling.rs`; a change here means every seeded run changes.
    let logits = logits_of(&[0.1, 0.2, 0.3, 0.4]);
    let mut sampler = Sampler::new(unfiltered(DEFAULT_SEED));
    let drawn = draws(&mut sampler, &logits, 16);
    assert_eq!(drawn, [1, 3, 3, 1, 2, 0, 2, 3, 0, 2, 3, 2, 3, 1, 2, 0], "the pinned sequence of DEFAULT_SEED");
}

#[test]
fn draws_follow_the_softmax() {
    // Temperature 1, no filters: the draw frequencies must match the softmax.
    // With a fixed seed the statistic is a fixed number, so the bound cannot
    // fail by chance; 40 with 7 degrees of freedom is a p-value of about 1e-6
    // for a correct sampler, and a biased one lands far above it.
    let logits = [0.0f32, 1.0, -1.0, 2.0, 0.5, -3.0, 1.5, 0.25];
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let weights: Vec<f64> = logits.iter().map(|&l| f64::from(l - max).exp()).collect();
    let total: f64 = weights.iter().sum();

    let draws_count = 200_000;
    let mut counts = [0usize; 8];
    let mut sampler = Sampler::new(unfiltered(DEFAULT_SEED));
    for _ in 0..draws_count {
        counts[sampler.sample(&logits).expect("valid row") as usize] += 1;
    }
    let chi_square: f64 = counts
        .iter()
        .zip(&weights)
        .map(|(&observed, &weight)| {
            let expected = draws_count as f64 * weight / total;
            (observed as f64 - expected).powi(2) / expected
        })
        .sum();
    assert!(
        chi_square < 40.0,
        "chi-square {chi_square:.2} over 7 degrees of freedom; counts {counts:?}, weights {weights:?}"
    );
}

#[test]
fn temperature_sharpens_and_flattens_the_draws() {
    let logits = [1.0f32, 0.0];
    let share_of_zero = |temperature: f32| {
        let mut sampler = Sampler::new(SamplingParams { temperature, ..unfiltered(9) });
        let drawn = draws(&mut sampler, &logits, 20_000);
        drawn.iter().filter(|&&t| t == 0).count() as f64 / drawn.len() as f64
    };
    // Softmax shares of token 0: t=0.25 -> 0.982, t=1 -> 0.731, t=4 -> 0.562.
    let cold = share_of_zero(0.25);
    let warm = share_of_zero(1.0);
    let hot = share_of_zero(4.0);
    assert!((cold - 0.982).abs() < 0.01, "share at t=0.25: {cold}");
    assert!((warm - 0.731).abs() < 0.02, "share at t=1: {warm}");
    assert!((hot - 0.562).abs() < 0.02, "share at t=4: {hot}");
}

#[test]
fn masked_tokens_are_never_drawn() {
    let logits = [f32::NEG_INFINITY, 0.0, f32::NEG_INFINITY, 0.0];
    let mut sampler = Sampler::new(unfiltered(13));
    for token in draws(&mut sampler, &logits, 1000) {
        assert!(token == 1 || token == 3, "drew masked token {token}");
    }
}

#[test]
fn bad_logits_are_errors() {
    for params in [SamplingParams::default(), SamplingParams::greedy()] {
        let mut sampler = Sampler::new(params);
        assert_eq!(sampler.sample(&[]), Err(SamplingError::EmptyLogits));
        assert!(matches!(
            sampler.sample(&[0.0, f32::NAN, 1.0]),
            Err(SamplingError::InvalidLogit { index: 1, value }) if value.is_nan()
        ));
        assert_eq!(sampler.sample(&[f32::NEG_INFINITY; 3]), Err(SamplingError::AllMasked { vocab_size: 3 }));
        // The sampler still works after an error.
        assert_eq!(sampler.sample(&[0.0, 9.0, 0.0]), Ok(1));
    }
}

#[test]
fn bad_parameters_are_errors() {
    let base = SamplingParams::default();
    let cases = [
        (SamplingParams { temperature: -0.5, ..base.clone() }, SamplingError::InvalidTemperature { temperature: -0.5 }),
        (
            SamplingParams { temperature: f32::INFINITY, ..base.clone() },
            SamplingError::InvalidTemperature { temperature: f32::INFINITY },
        ),
        (SamplingParams { top_p: 0.0, ..base.clone() }, SamplingError::InvalidTopP { top_p: 0.0 }),
        (SamplingParams { top_p: 1.5, ..base.clone() }, SamplingError::InvalidTopP { top_p: 1.5 }),
        (SamplingParams { min_p: -0.1, ..base.clone() }, SamplingError::InvalidMinP { min_p: -0.1 }),
        (SamplingParams { min_p: 1.1, ..base.clone() }, SamplingError::InvalidMinP { min_p: 1.1 }),
        (
            SamplingParams { repeat_penalty: 0.0, ..base.clone() },
            SamplingError::InvalidRepeatPenalty { repeat_penalty: 0.0 },
        ),
        (
            SamplingParams { repeat_penalty: -1.0, ..base.clone() },
            SamplingError::InvalidRepeatPenalty { repeat_penalty: -1.0 },
        ),
    ];
    for (params, expected) in cases {
        assert_eq!(params.validate(), Err(expected.clone()), "{params:?}");
        let mut sampler = Sampler::new(params.clone());
        assert_eq!(sampler.sample(&[0.0, 1.0]), Err(expected), "{params:?}");
    }

    let nan_cases = [
        SamplingParams { temperature: f32::NAN, ..base.clone() },
        SamplingParams { top_p: f32::NAN, ..base.clone() },
        SamplingParams { min_p: f32::NAN, ..base.clone() },
        SamplingParams { repeat_penalty: f32::NAN, ..base.clone() },
    ];
    for params in nan_cases {
        assert!(params.validate().is_err(), "NaN accepted in {params:?}");
        assert!(Sampler::new(params.clone()).sample(&[0.0]).is_err(), "{params:?}");
    }
}

#[test]
fn error_messages_name_the_bad_value() {
    let message = SamplingError::InvalidTopP { top_p: 1.5 }.to_string();
    assert!(message.contains("1.5"), "{message}");
    let message = SamplingError::InvalidLogit { index: 17, value: f32::NAN }.to_string();
    assert!(message.contains("17") && message.contains("NaN"), "{message}");
}

#[test]
fn steady_state_sampling_does_not_allocate() {
    let vocab_size = 49152;
    let rows: Vec<Vec<f32>> = (0..4).map(|seed| test_logits(vocab_size, seed, 6.0)).collect();
    let configurations = [
        SamplingParams { repeat_penalty: 1.1, ..SamplingParams::default() },
        SamplingParams { top_k: 0, repeat_penalty: 1.1, ..SamplingParams::default() },
        SamplingParams { repeat_penalty: 1.1, ..SamplingParams::greedy() },
        unfiltered(3),
    ];
    for params in configurations {
        let mut sampler = Sampler::new(params.clone());
        // Warm up: the first call sizes the candidate buffer, and the history
        // fills its window.
        for i in 0..(params.repeat_last_n + 2) {
            let token = sampler.sample(&rows[i % rows.len()]).expect("valid row");
            sampler.accept(token);
        }
        let before = allocations_on_this_thread();
        for i in 0..50 {
            let token = sampler.sample(&rows[i % rows.len()]).expect("valid row");
            sampler.accept(token);
        }
        let allocations = allocations_on_this_thread() - before;
        assert_eq!(allocations, 0, "allocations in 50 steady-state samples with {params:?}");
    }
}

#[test]
fn positive_infinity_counts_as_the_largest_logit() {
    for params in [SamplingParams::default(), SamplingParams::greedy()] {
        let mut sampler = Sampler::new(params.clone());
        assert_eq!(sampler.sample(&[0.0, 1.0, f32::INFINITY]), Ok(2), "{params:?}");
    }
}

/// The hostile request of issue 32: default sampling (min-p on) with a
/// repetition penalty so small that dividing a positive logit by it gives
/// +inf; the min-p filter then computed exp(inf - inf) = NaN and dropped
/// every candidate, and the draw indexed an empty list.
#[test]
fn a_tiny_repetition_penalty_still_gives_a_token() {
    let logits = test_logits(500, 3, 4.0);
    for penalty in [1e-45, f32::MIN_POSITIVE, 1e-30, 1e30, f32::MAX] {
        let mut sampler = Sampler::new(SamplingParams { repeat_penalty: penalty, ..SamplingParams::default() });
        for token in 0..64 {
            sampler.accept(token * 7);
        }
        for _ in 0..8 {
            let token = sampler.sample(&logits).unwrap_or_else(|e| panic!("penalty {penalty}: {e}"));
            assert!((token as usize) < logits.len());
            sampler.accept(token);
        }
    }
}

#[test]
fn a_huge_penalty_window_allocates_only_what_it_holds() {
    for window in [100_000_000_000usize, 1 << 62, usize::MAX] {
        let mut sampler = Sampler::new(SamplingParams { repeat_last_n: window, ..SamplingParams::default() });
        for token in 0..100 {
            sampler.accept(token);
        }
        assert!(sampler.sample(&test_logits(200, 5, 2.0)).is_ok(), "window {window}");
    }
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    /// Any logit the model could produce, and some it should not: huge
    /// magnitudes, ±inf, subnormals.
    fn logit() -> impl Strategy<Value = f32> {
        prop_oneof![
            4 => -30.0f32..30.0,
            1 => prop::num::f32::NORMAL | prop::num::f32::SUBNORMAL | prop::num::f32::ZERO,
            1 => Just(f32::INFINITY),
            1 => Just(f32::NEG_INFINITY),
            1 => Just(f32::MAX),
            1 => Just(-f32::MAX),
        ]
    }

    /// A value of every range the sampler accepts, with its extremes.
    fn positive() -> impl Strategy<Value = f32> {
        prop_oneof![Just(1e-45f32), Just(f32::MIN_POSITIVE), Just(1.0), Just(f32::MAX), 1e-6f32..1e6]
    }

    fn params() -> impl Strategy<Value = SamplingParams> {
        (
            (prop_oneof![Just(0.0f32), positive()], 0usize..70, prop_oneof![Just(1.0f32), 1e-6f32..1.0]),
            (0.0f32..=1.0, positive(), 0usize..200),
            (-1e30f32..1e30, -1e30f32..1e30, any::<u64>()),
        )
            .prop_map(
                |((temperature, top_k, top_p), (min_p, repeat_penalty, repeat_last_n), (presence, frequency, seed))| {
                    SamplingParams {
                        temperature,
                        top_k,
                        top_p,
                        min_p,
                        repeat_penalty,
                        repeat_last_n,
                        presence_penalty: presence,
                        frequency_penalty: frequency,
                        seed,
                        logit_bias: Default::default(),
                    }
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// For any accepted parameters and any logits with one token not
        /// masked out, sampling returns a token of the row, and one whose
        /// logit was not -inf.
        #[test]
        fn accepted_parameters_always_give_a_token(
            params in params(),
            logits in prop::collection::vec(logit(), 1..64),
            history in prop::collection::vec(0u32..80, 0..40),
        ) {
            prop_assume!(params.validate().is_ok());
            prop_assume!(logits.iter().any(|&l| l != f32::NEG_INFINITY));
            let mut sampler = Sampler::new(params.clone());
            for &token in &history {
                sampler.accept(token);
            }
            for _ in 0..3 {
                let token = sampler.sample(&logits);
                prop_assert!(token.is_ok(), "{params:?} on {logits:?}: {token:?}");
                let token = token.unwrap_or_default() as usize;
                prop_assert!(token < logits.len());
                prop_assert!(logits[token] != f32::NEG_INFINITY, "drew masked token {token} of {logits:?}");
                sampler.accept(token as u32);
            }
        }
    }
}
