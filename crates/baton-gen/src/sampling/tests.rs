//! The sampler's unit tests: each filter of the chain, its errors, the
//! greedy scan against a running best.

use super::*;

/// `best_of` against the running best it replaces, on rows of few
/// distinct values (many ties), infinities, both zeros, every length
/// around the lanes and a vocabulary's, the best anywhere.
#[test]
fn best_of_is_the_first_of_the_highest_logits() {
    let running = |logits: &[f32]| {
        let mut best = Candidate { id: 0, logit: logits[0].min(f32::MAX) };
        for (id, &logit) in logits.iter().enumerate().skip(1) {
            if logit.min(f32::MAX) > best.logit {
                best = Candidate { id: id as u32, logit: logit.min(f32::MAX) };
            }
        }
        best
    };
    let values = [-1.0, 0.0, -0.0, 2.5, f32::INFINITY, f32::MAX, f32::NEG_INFINITY, -f32::MAX];
    let mut rng = Xoshiro256StarStar::from_seed(5);
    for len in (1..70).chain([1000, 49152]) {
        for round in 0..20 {
            let row: Vec<f32> = (0..len)
                .map(|_| {
                    let pick = rng.next_u64() as usize;
                    if round % 2 == 0 {
                        values[pick % values.len()]
                    } else {
                        (pick % 7) as f32 - 3.0
                    }
                })
                .collect();
            let (got, want) = (best_of(&row), running(&row));
            assert_eq!(
                (got.id, got.logit.to_bits() == want.logit.to_bits() || got.logit == want.logit),
                (want.id, true),
                "{row:?}"
            );
        }
    }
    assert_eq!(best_of(&[f32::NEG_INFINITY; 40]).id, 0);
}

#[test]
fn a_nan_anywhere_is_found_at_its_index() {
    for len in [1, 15, 16, 17, 49152] {
        for at in [0, len / 2, len - 1] {
            let mut row = vec![0.5f32; len];
            row[at] = f32::NAN;
            assert!(matches!(check_logits(&row), Err(SamplingError::InvalidLogit { index, .. }) if index == at));
        }
        assert_eq!(check_logits(&vec![0.5f32; len]), Ok(()));
    }
}

#[test]
fn xoshiro256_star_star_matches_the_reference_outputs() {
    // The reference implementation's first outputs from state [1, 2, 3, 4].
    let mut rng = Xoshiro256StarStar { state: [1, 2, 3, 4] };
    let expected = [11520, 0, 1509978240, 1215971899390074240];
    let actual: Vec<u64> = (0..4).map(|_| rng.next_u64()).collect();
    assert_eq!(actual, expected, "xoshiro256** stream from [1, 2, 3, 4]");
}

#[test]
fn splitmix64_matches_the_reference_outputs() {
    let mut splitmix = SplitMix64 { state: 1234567 };
    let expected =
        [6457827717110365317, 3203168211198807973, 9817491932198370423, 4593380528125082431, 16408922859458223821];
    let actual: Vec<u64> = (0..5).map(|_| splitmix.next_u64()).collect();
    assert_eq!(actual, expected, "splitmix64 stream from seed 1234567");
}

#[test]
fn next_f64_stays_in_the_unit_interval() {
    let mut rng = Xoshiro256StarStar::from_seed(7);
    for _ in 0..10_000 {
        let u = rng.next_f64();
        assert!((0.0..1.0).contains(&u), "uniform draw {u} outside [0, 1)");
    }
}

#[test]
fn ranking_breaks_ties_by_lowest_id() {
    let a = Candidate { id: 3, logit: 1.0 };
    let b = Candidate { id: 5, logit: 1.0 };
    let c = Candidate { id: 9, logit: 2.0 };
    assert_eq!(by_rank(&a, &b), Ordering::Less);
    assert_eq!(by_rank(&c, &a), Ordering::Less);
    assert_eq!(by_rank(&b, &c), Ordering::Greater);
}

/// A bias moves a token's logit before the draw: greedy picks the
/// token +100 lifts, never one -100 or -inf lowers, and a sampled draw
/// (top-k 1 after the bias) does the same; NaN and +inf are refused.
#[test]
fn logit_bias_is_added_before_greedy_and_sampled_draws() {
    let logits = [1.0, 3.0, 2.0, 0.5];
    let with = |bias: &[(u32, f32)], greedy: bool| {
        let base = if greedy { SamplingParams::greedy() } else { SamplingParams { top_k: 1, ..Default::default() } };
        let params = SamplingParams { logit_bias: LogitBias::new(bias.iter().copied()), ..base };
        Sampler::new(params).sample(&logits)
    };
    for greedy in [true, false] {
        assert_eq!(with(&[], greedy), Ok(1), "greedy {greedy}");
        assert_eq!(with(&[(1, -100.0)], greedy), Ok(2), "greedy {greedy}");
        assert_eq!(with(&[(1, f32::NEG_INFINITY), (2, -100.0)], greedy), Ok(0), "greedy {greedy}");
        assert_eq!(with(&[(3, 100.0)], greedy), Ok(3), "greedy {greedy}");
        assert_eq!(with(&[(3, 2.0), (3, 2.0)], greedy), Ok(3), "greedy {greedy}: biases of one token add up");
        assert_eq!(with(&[(99, 100.0)], greedy), Ok(1), "greedy {greedy}: outside the row");
    }
    let all = [(0, f32::NEG_INFINITY), (1, f32::NEG_INFINITY), (2, f32::NEG_INFINITY), (3, f32::NEG_INFINITY)];
    assert_eq!(with(&all, true), Err(SamplingError::AllMasked { vocab_size: 4 }));
    for bias in [f32::NAN, f32::INFINITY] {
        let params = SamplingParams { logit_bias: LogitBias::new([(2, bias)]), ..SamplingParams::greedy() };
        assert!(matches!(params.validate(), Err(SamplingError::InvalidLogitBias { token: 2, .. })), "{bias}");
    }
}
