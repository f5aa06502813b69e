//! Picking the next token from a row of logits, the way llama.cpp's common
//! sampler does.

use std::cmp::Ordering;
use std::collections::VecDeque;
use std::sync::Arc;

/// The seed [`SamplingParams::default`] uses. llama.cpp's default seed means
/// "pick a random one"; Baton's default is fixed so runs reproduce unless the
/// caller chooses another seed.
pub const DEFAULT_SEED: u64 = 0xBA70_5EED;

/// Tokens of history a new [`Sampler`] reserves room for (more grow the
/// history as they are accepted).
const INITIAL_HISTORY: usize = 256;

/// How a [`Sampler`] picks tokens. Each filter has a value that turns it off;
/// [`Default`] gives llama.cpp's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingParams {
    /// Divides the logits before the draw: below 1 sharpens, above 1 flattens.
    /// `0` means greedy (argmax after the repetition penalty); negative, NaN
    /// or infinite is an error.
    pub temperature: f32,
    /// Keep only the `top_k` most likely tokens; `0` turns the filter off.
    pub top_k: usize,
    /// Keep the smallest set of most likely tokens whose probabilities sum to
    /// at least `top_p`; must lie in `(0, 1]`, and `1` turns the filter off.
    pub top_p: f32,
    /// Drop tokens whose probability is below `min_p` times the largest one;
    /// must lie in `[0, 1]`, and `0` turns the filter off.
    pub min_p: f32,
    /// Divides the positive logits (multiplies the others) of recently
    /// accepted tokens; must be finite and above 0, and `1` turns it off.
    pub repeat_penalty: f32,
    /// How many of the most recently accepted tokens the penalties look at;
    /// `0` turns them off. Any value is accepted: the history holds at most
    /// this many tokens and grows only as tokens are accepted, so a window
    /// larger than a sequence costs nothing (callers bound it to their
    /// context, as llama.cpp does).
    pub repeat_last_n: usize,
    /// Subtracted from the logit of every token among the last
    /// `repeat_last_n` accepted ones (OpenAI's `presence_penalty`); must be
    /// finite, `0` turns it off.
    pub presence_penalty: f32,
    /// Subtracted from a token's logit once per time it is among the last
    /// `repeat_last_n` accepted ones (OpenAI's `frequency_penalty`); must
    /// be finite, `0` turns it off.
    pub frequency_penalty: f32,
    /// Seeds the PRNG of the draw.
    pub seed: u64,
    /// Added to tokens' logits before anything else (OpenAI's and
    /// llama.cpp's `logit_bias`); empty turns it off.
    pub logit_bias: LogitBias,
}

/// Biases added to the logits of some tokens before the penalties and the
/// filters, as llama.cpp's `logit_bias` sampler does: -100 all but bans a
/// token, +100 all but forces it, `-inf` bans it. A token named several
/// times gets the sum. Tokens outside a row's vocabulary are passed over
/// (callers check ids against their model's vocabulary).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogitBias(Arc<[(u32, f32)]>);

impl LogitBias {
    /// The biases of `entries`, `(token, bias)` each.
    pub fn new(entries: impl IntoIterator<Item = (u32, f32)>) -> LogitBias {
        LogitBias(entries.into_iter().collect())
    }

    /// Whether no token is biased.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The `(token, bias)` entries, in the order given.
    pub fn entries(&self) -> &[(u32, f32)] {
        &self.0
    }
}

impl Default for SamplingParams {
    /// llama.cpp's defaults: temperature 0.8, top-k 40, top-p 0.95, min-p
    /// 0.05, no repetition penalty over a window of 64, and [`DEFAULT_SEED`].
    fn default() -> Self {
        Self {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            repeat_last_n: 64,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            seed: DEFAULT_SEED,
            logit_bias: LogitBias::default(),
        }
    }
}

impl SamplingParams {
    /// Greedy decoding: temperature 0 and every filter off; the repetition
    /// penalty is off too (set [`Self::repeat_penalty`] to use one).
    pub fn greedy() -> Self {
        Self { temperature: 0.0, top_k: 0, top_p: 1.0, min_p: 0.0, ..Self::default() }
    }

    /// Whether these parameters pick the argmax instead of drawing.
    pub fn is_greedy(&self) -> bool {
        self.temperature == 0.0
    }

    /// Checks every parameter's range; [`Sampler::sample`] returns the same
    /// error, so a caller can use this to reject bad settings up front.
    pub fn validate(&self) -> Result<(), SamplingError> {
        if !(self.temperature >= 0.0 && self.temperature.is_finite()) {
            return Err(SamplingError::InvalidTemperature { temperature: self.temperature });
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(SamplingError::InvalidTopP { top_p: self.top_p });
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            return Err(SamplingError::InvalidMinP { min_p: self.min_p });
        }
        if !(self.repeat_penalty > 0.0 && self.repeat_penalty.is_finite()) {
            return Err(SamplingError::InvalidRepeatPenalty { repeat_penalty: self.repeat_penalty });
        }
        for (name, value) in
            [("presence_penalty", self.presence_penalty), ("frequency_penalty", self.frequency_penalty)]
        {
            if !value.is_finite() {
                return Err(SamplingError::InvalidPenalty { name, value });
            }
        }
        if let Some(&(token, bias)) =
            self.logit_bias.entries().iter().find(|(_, bias)| bias.is_nan() || *bias == f32::INFINITY)
        {
            return Err(SamplingError::InvalidLogitBias { token, bias });
        }
        Ok(())
    }
}

/// Why a token could not be sampled.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SamplingError {
    /// The logits row has no entries.
    #[error("the logits row is empty: it needs one logit per vocabulary entry")]
    EmptyLogits,
    /// The logits row has more entries than `u32` token ids can name.
    #[error("the logits row has {vocab_size} entries, more than u32 token ids can name")]
    VocabTooLarge {
        /// The length of the row.
        vocab_size: usize,
    },
    /// A logit is NaN (+inf counts as the largest finite value, -inf masks
    /// a token out).
    #[error("logit {index} is {value}: logits must be numbers (-inf masks a token)")]
    InvalidLogit {
        /// The token id of the bad logit.
        index: usize,
        /// Its value.
        value: f32,
    },
    /// Every logit is -inf after the repetition penalty, so no token has any
    /// probability.
    #[error("all {vocab_size} logits are -inf: every token is masked out")]
    AllMasked {
        /// The length of the row.
        vocab_size: usize,
    },
    /// The temperature is negative, NaN or infinite.
    #[error("temperature {temperature} is invalid: use 0 for greedy or a finite positive value")]
    InvalidTemperature {
        /// The rejected value.
        temperature: f32,
    },
    /// `top_p` lies outside `(0, 1]`.
    #[error("top_p {top_p} is outside (0, 1]; 1 turns top-p off")]
    InvalidTopP {
        /// The rejected value.
        top_p: f32,
    },
    /// `min_p` lies outside `[0, 1]`.
    #[error("min_p {min_p} is outside [0, 1]; 0 turns min-p off")]
    InvalidMinP {
        /// The rejected value.
        min_p: f32,
    },
    /// The repetition penalty is zero, negative, NaN or infinite.
    #[error("repeat_penalty {repeat_penalty} is invalid: it must be finite and above 0; 1 turns it off")]
    InvalidRepeatPenalty {
        /// The rejected value.
        repeat_penalty: f32,
    },
    /// A presence or frequency penalty is NaN or infinite.
    #[error("{name} {value} is invalid: it must be finite; 0 turns it off")]
    InvalidPenalty {
        /// Which penalty.
        name: &'static str,
        /// The rejected value.
        value: f32,
    },
    /// A logit bias is NaN or +inf.
    #[error("the logit bias {bias} of token {token} is invalid: it must be a number (-inf bans the token)")]
    InvalidLogitBias {
        /// The biased token.
        token: u32,
        /// The rejected bias.
        bias: f32,
    },
}

/// One token still in the running: its id and its logit after the repetition
/// penalty (before the temperature).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    /// The token id (index into the logits row).
    pub id: u32,
    /// The logit after the repetition penalty.
    pub logit: f32,
}

/// Picks tokens from logits rows with a fixed [`SamplingParams`], remembering
/// the accepted tokens for the repetition penalty, with the chain below.
///
/// Picking the next token from a row of logits, the way llama.cpp's common
/// sampler does.
///
/// A [`Sampler`] runs this chain over one logits row (one `f32` per vocabulary
/// entry), in llama.cpp's default order (`penalties -> top-k -> top-p ->
/// min-p -> temperature -> dist`):
///
/// 0. **Logit bias**: each [`SamplingParams::logit_bias`] entry is added to
///    its token's logit (a masked token stays masked; `-inf` masks one).
/// 1. **Repetition penalty**: every distinct token among the last
///    [`SamplingParams::repeat_last_n`] accepted tokens has its logit divided by
///    [`SamplingParams::repeat_penalty`] when positive, multiplied when zero or
///    negative. A token repeated several times is penalized once. Then each
///    of them has [`SamplingParams::presence_penalty`] subtracted once and
///    [`SamplingParams::frequency_penalty`] once per occurrence (llama.cpp's
///    and OpenAI's additive penalties).
/// 2. **Greedy** (`temperature == 0`): the argmax of the penalized row, ties
///    going to the lowest id. The filters below cannot change the argmax, so
///    greedy stops here.
/// 3. **Top-k**: keep the `top_k` highest logits (ties: lowest id first).
/// 4. **Top-p**: with the survivors sorted by probability (softmax at
///    temperature 1), keep the smallest prefix whose probabilities sum to at
///    least `top_p`, and at least one token.
/// 5. **Min-p**: drop every token whose probability is below `min_p` times the
///    largest probability.
/// 6. **Temperature and draw**: divide the surviving logits by `temperature`,
///    take the softmax and draw one token with the sampler's seeded PRNG.
///
/// # Determinism
///
/// The same parameters, seed, accepted tokens and logits give the same
/// tokens. The PRNG is a fixed algorithm (xoshiro256**, seeded through
/// splitmix64), every survivor list is put in a total order (logit descending,
/// then id ascending) before it is summed, and sums and the draw use `f64`.
/// The only platform-dependent step is `f64::exp` from the system math
/// library, which may differ in the last bit between platforms; that can only
/// change a draw whose uniform number lands within about 1e-16 of a boundary.
///
/// # Allocation
///
/// The sampler keeps its candidate, history and scratch buffers between calls:
/// once it has seen the largest vocabulary it is used with, [`Sampler::sample`]
/// and [`Sampler::accept`] allocate nothing.
#[derive(Debug, Clone)]
pub struct Sampler {
    params: SamplingParams,
    /// `params.validate()`, computed once; `sample` returns it while set.
    params_error: Option<SamplingError>,
    rng: Xoshiro256StarStar,
    /// The last `repeat_last_n` accepted tokens, oldest first.
    history: VecDeque<u32>,
    /// Scratch: the distinct tokens of `history`, for the penalty.
    penalized: Vec<u32>,
    /// The tokens still in the running; holds the full row while filtering.
    candidates: Vec<Candidate>,
}

impl Sampler {
    /// A sampler with an empty history and its PRNG seeded from
    /// `params.seed`. Invalid parameters are reported by every
    /// [`Sampler::sample`] call (or up front by [`SamplingParams::validate`]).
    pub fn new(params: SamplingParams) -> Self {
        Self {
            params_error: params.validate().err(),
            rng: Xoshiro256StarStar::from_seed(params.seed),
            // The window may be far larger than any sequence (a request's
            // `repeat_last_n` is the caller's number): reserve at most a
            // typical window, and let the history grow as tokens come.
            history: VecDeque::with_capacity(params.repeat_last_n.min(INITIAL_HISTORY)),
            params,
            penalized: Vec::new(),
            candidates: Vec::new(),
        }
    }

    /// The parameters this sampler was built with.
    pub fn params(&self) -> &SamplingParams {
        &self.params
    }

    /// Records `token` as generated, for the repetition penalty. Call it with
    /// every token that enters the sequence (prompt tokens too, if they
    /// should be penalized), typically right after [`Sampler::sample`].
    pub fn accept(&mut self, token: u32) {
        let window = self.params.repeat_last_n;
        if window == 0 {
            return;
        }
        if self.history.len() == window {
            self.history.pop_front();
        }
        self.history.push_back(token);
    }

    /// Forgets the accepted tokens and reseeds the PRNG from
    /// [`SamplingParams::seed`], so the sampler repeats its first sequence.
    pub fn reset(&mut self) {
        self.history.clear();
        self.rng = Xoshiro256StarStar::from_seed(self.params.seed);
    }

    /// The tokens that survived the filters of the last successful
    /// [`Sampler::sample`] call, in the order the draw walked them (logit
    /// descending, then id, once a filter has sorted them; id order
    /// otherwise). After a greedy call, only the chosen token.
    pub fn candidates(&self) -> &[Candidate] {
        &self.candidates
    }

    /// Picks the next token id from `logits`, one entry per vocabulary token.
    ///
    /// Runs the chain of the [`Sampler`] docs; a non-greedy call consumes
    /// exactly one PRNG output. Does not record the token: call
    /// [`Sampler::accept`] for that.
    ///
    /// # Errors
    ///
    /// The parameter errors of [`SamplingParams::validate`];
    /// [`SamplingError::EmptyLogits`], [`SamplingError::VocabTooLarge`],
    /// [`SamplingError::InvalidLogit`] (NaN) for a bad row;
    /// [`SamplingError::AllMasked`] when every logit is -inf. Whenever it
    /// returns `Ok`, at least the best candidate survived every filter: no
    /// accepted parameters and no logits (+inf, -inf, huge ranges) leave
    /// the draw without a token.
    pub fn sample(&mut self, logits: &[f32]) -> Result<u32, SamplingError> {
        if let Some(error) = &self.params_error {
            return Err(error.clone());
        }
        check_logits(logits)?;
        if self.params.is_greedy() && !self.penalizes() && self.params.logit_bias.is_empty() {
            // The row's best, as `load_candidates` then `argmax` find it,
            // without copying the row.
            let best = best_of(logits);
            self.candidates.clear();
            if best.logit == f32::NEG_INFINITY {
                return Err(SamplingError::AllMasked { vocab_size: logits.len() });
            }
            self.candidates.push(best);
            return Ok(best.id);
        }
        self.load_candidates(logits);

        let best = self.argmax();
        if best.logit == f32::NEG_INFINITY {
            self.candidates.clear();
            return Err(SamplingError::AllMasked { vocab_size: logits.len() });
        }
        if self.params.is_greedy() {
            self.candidates.clear();
            self.candidates.push(best);
            return Ok(best.id);
        }

        self.apply_top_k();
        self.apply_top_p();
        self.apply_min_p();
        Ok(self.draw())
    }

    /// Whether a penalty changes some logit (penalties set and a history).
    fn penalizes(&self) -> bool {
        let SamplingParams {
            repeat_penalty: penalty, presence_penalty: presence, frequency_penalty: frequency, ..
        } = self.params;
        !((penalty == 1.0 && presence == 0.0 && frequency == 0.0) || self.history.is_empty())
    }

    /// Fills `candidates` with the whole row, in id order, and applies the
    /// logit bias and the repetition penalty. Every logit it leaves is finite or -inf: +inf
    /// (in the row, or from dividing by a tiny penalty) becomes
    /// `f32::MAX`, so the filters' differences from the best logit stay
    /// numbers.
    fn load_candidates(&mut self, logits: &[f32]) {
        self.candidates.clear();
        // `check_logits` bounded the length by u32::MAX + 1, so the ids fit.
        self.candidates.extend(
            logits.iter().enumerate().map(|(id, &logit)| Candidate { id: id as u32, logit: logit.min(f32::MAX) }),
        );

        for &(token, bias) in self.params.logit_bias.entries() {
            // A masked token stays masked; -inf masks one.
            if let Some(candidate) = self.candidates.get_mut(token as usize) {
                candidate.logit = match (candidate.logit, bias) {
                    (f32::NEG_INFINITY, _) | (_, f32::NEG_INFINITY) => f32::NEG_INFINITY,
                    (logit, bias) => finite(logit + bias),
                };
            }
        }
        if !self.penalizes() {
            return;
        }
        let SamplingParams {
            repeat_penalty: penalty, presence_penalty: presence, frequency_penalty: frequency, ..
        } = self.params;
        self.penalized.clear();
        self.penalized.extend(self.history.iter().copied());
        self.penalized.sort_unstable();
        // Each distinct token once, with the number of times it occurs.
        let mut start = 0;
        while start < self.penalized.len() {
            let token = self.penalized[start];
            let count = self.penalized[start..].iter().take_while(|&&t| t == token).count();
            start += count;
            // A token outside this row's vocabulary has nothing to penalize,
            // and a masked one stays masked.
            let Some(candidate) = self.candidates.get_mut(token as usize) else { continue };
            if candidate.logit == f32::NEG_INFINITY {
                continue;
            }
            let mut logit = candidate.logit;
            if penalty != 1.0 {
                if logit <= 0.0 {
                    logit *= penalty;
                } else {
                    logit /= penalty;
                }
            }
            // A penalty lowers or raises a token; it never masks one out nor
            // makes it infinite, however extreme its value.
            candidate.logit = finite(logit - (presence + frequency * count as f32));
        }
    }

    /// The highest logit of `candidates` (which is not empty), ties going to
    /// the earliest entry.
    fn argmax(&self) -> Candidate {
        let mut best = self.candidates[0];
        for &candidate in &self.candidates[1..] {
            if candidate.logit > best.logit {
                best = candidate;
            }
        }
        best
    }

    /// Keeps the `top_k` best candidates, sorted. Without top-k, sorts the
    /// full row only when top-p needs the order.
    fn apply_top_k(&mut self) {
        let k = self.params.top_k;
        if k > 0 && k < self.candidates.len() {
            self.discard_below_a_chunk_threshold(k);
        }
        if k > 0 && k < self.candidates.len() {
            self.candidates.select_nth_unstable_by(k - 1, by_rank);
            self.candidates.truncate(k);
            // Sorting the survivors makes their order (and so the draw)
            // independent of how the selection arranged them.
            self.candidates.sort_unstable_by(by_rank);
        } else if self.params.top_p < 1.0 {
            self.candidates.sort_unstable_by(by_rank);
        }
    }

    /// Shrinks the row before the top-`k` selection without changing its
    /// result: the `k`-th best logit `t` of a leading chunk has at least `k`
    /// candidates at or above it, so every top-`k` candidate has a logit
    /// `>= t` and dropping those below `t` loses none of them. On real
    /// logits a chunk of `16 k` leaves a few percent of the row for the
    /// selection; on adversarial rows (ascending logits) it leaves them all
    /// and costs one extra pass.
    fn discard_below_a_chunk_threshold(&mut self, k: usize) {
        let chunk = k.saturating_mul(16).max(1024);
        if chunk >= self.candidates.len() {
            return;
        }
        let (_, kth, _) = self.candidates[..chunk].select_nth_unstable_by(k - 1, by_rank);
        let threshold = kth.logit;
        self.candidates.retain(|candidate| candidate.logit >= threshold);
    }

    /// Keeps the smallest prefix of the sorted candidates whose softmax
    /// probabilities sum to at least `top_p` (at least one).
    fn apply_top_p(&mut self) {
        let top_p = self.params.top_p;
        if top_p >= 1.0 {
            return;
        }
        let max = f64::from(self.candidates[0].logit);
        let weight = |candidate: &Candidate| (f64::from(candidate.logit) - max).exp();
        let total: f64 = self.candidates.iter().map(weight).sum();
        let target = f64::from(top_p) * total;
        let mut cumulative = 0.0;
        let mut keep = self.candidates.len();
        for (index, candidate) in self.candidates.iter().enumerate() {
            cumulative += weight(candidate);
            if cumulative >= target {
                keep = index + 1;
                break;
            }
        }
        self.candidates.truncate(keep);
    }

    /// Drops candidates whose probability is below `min_p` times the largest;
    /// the largest itself always stays.
    fn apply_min_p(&mut self) {
        let min_p = f64::from(self.params.min_p);
        if min_p <= 0.0 {
            return;
        }
        let best = self.argmax();
        let max = f64::from(best.logit);
        // p_i / p_max = exp(logit_i - max_logit), whatever the normalization;
        // the best candidate stays whatever rounding says.
        self.candidates
            .retain(|candidate| candidate.id == best.id || (f64::from(candidate.logit) - max).exp() >= min_p);
    }

    /// Draws one candidate from the softmax of the logits divided by the
    /// temperature. `candidates` is not empty (every filter keeps the best
    /// one) and its best logit is finite, so the best weighs exactly 1 and
    /// the total is at least 1 for any positive temperature.
    fn draw(&mut self) -> u32 {
        let temperature = f64::from(self.params.temperature);
        let best = self.argmax();
        let max = f64::from(best.logit);
        let weight = |candidate: &Candidate| {
            let w = ((f64::from(candidate.logit) - max) / temperature).exp();
            // 0 / tiny is 0 (weight 1), and -inf / t is -inf (weight 0): no
            // NaN, but say so rather than rely on it.
            if w.is_nan() {
                0.0
            } else {
                w
            }
        };
        let total: f64 = self.candidates.iter().map(weight).sum();
        let threshold = self.rng.next_f64() * total;

        let mut cumulative = 0.0;
        let mut last_possible = best.id;
        for candidate in &self.candidates {
            let w = weight(candidate);
            if w > 0.0 {
                last_possible = candidate.id;
            }
            cumulative += w;
            if cumulative > threshold {
                return candidate.id;
            }
        }
        // Rounding left the threshold at or above the running sum: the
        // threshold is below the total, so it belongs to the last token with
        // any weight.
        last_possible
    }
}

/// Lanes of the row scans below: independent comparisons the compiler
/// keeps in vector registers (an early-exit search or one running best
/// is one element at a time).
const SCAN_LANES: usize = 16;

/// Rejects an empty or oversized row and NaN logits.
fn check_logits(logits: &[f32]) -> Result<(), SamplingError> {
    if logits.is_empty() {
        return Err(SamplingError::EmptyLogits);
    }
    if u32::try_from(logits.len() - 1).is_err() {
        return Err(SamplingError::VocabTooLarge { vocab_size: logits.len() });
    }
    let chunks = logits.chunks_exact(SCAN_LANES);
    let tail = chunks.remainder();
    let mut nan = [false; SCAN_LANES];
    for chunk in chunks {
        for (seen, &logit) in nan.iter_mut().zip(chunk) {
            *seen |= logit.is_nan();
        }
    }
    if !nan.contains(&true) && !tail.iter().any(|logit| logit.is_nan()) {
        return Ok(());
    }
    match logits.iter().position(|&logit| logit.is_nan()) {
        Some(index) => Err(SamplingError::InvalidLogit { index, value: logits[index] }),
        None => Ok(()),
    }
}

/// The first candidate of the highest logit, `+inf` counting as
/// `f32::MAX` (what `load_candidates` then `argmax` pick), in two vector
/// passes: the highest value, then the first block of lanes holding it.
/// `logits` is not empty and has no NaN (`check_logits`).
fn best_of(logits: &[f32]) -> Candidate {
    let mut lanes = [f32::NEG_INFINITY; SCAN_LANES];
    let chunks = logits.chunks_exact(SCAN_LANES);
    let tail = chunks.remainder();
    for chunk in chunks {
        for (lane, &logit) in lanes.iter_mut().zip(chunk) {
            let logit = logit.min(f32::MAX);
            if logit > *lane {
                *lane = logit;
            }
        }
    }
    let best = lanes.iter().chain(tail).fold(f32::NEG_INFINITY, |best, &logit| best.max(logit.min(f32::MAX)));
    let at = |logit: &f32| logit.min(f32::MAX) == best;
    let block = logits.chunks(SCAN_LANES).position(|chunk| chunk.iter().any(at)).unwrap_or(0);
    let within = logits[block * SCAN_LANES..].iter().position(at).unwrap_or(0);
    // `check_logits` bounded the length by u32::MAX + 1.
    Candidate { id: (block * SCAN_LANES + within) as u32, logit: best }
}

/// A penalized logit the filters can compute with: clamped to the finite
/// range (NaN, which an extreme penalty's `inf - inf` could make, to the
/// lowest finite value).
fn finite(logit: f32) -> f32 {
    if logit.is_nan() {
        -f32::MAX
    } else {
        logit.clamp(-f32::MAX, f32::MAX)
    }
}

/// The sampler's total order: higher logit first, then lower id. Logits are
/// never NaN here (`check_logits`), so `partial_cmp` always answers.
fn by_rank(a: &Candidate, b: &Candidate) -> Ordering {
    b.logit.partial_cmp(&a.logit).unwrap_or(Ordering::Equal).then(a.id.cmp(&b.id))
}

/// xoshiro256** (Blackman and Vigna, <https://prng.di.unimi.it/>): a small,
/// fast 64-bit PRNG with a 2^256 - 1 period, seeded by running splitmix64
/// over the `u64` seed as its authors recommend. Same seed, same stream, on
/// every platform.
#[derive(Debug, Clone)]
struct Xoshiro256StarStar {
    state: [u64; 4],
}

impl Xoshiro256StarStar {
    /// Seeds the four state words with four splitmix64 outputs. splitmix64's
    /// output function is a bijection over distinct counter values, so at
    /// most one word is zero and the state is never all zero (the one state
    /// xoshiro must avoid).
    fn from_seed(seed: u64) -> Self {
        let mut splitmix = SplitMix64 { state: seed };
        Self { state: [splitmix.next_u64(), splitmix.next_u64(), splitmix.next_u64(), splitmix.next_u64()] }
    }

    fn next_u64(&mut self) -> u64 {
        let s = &mut self.state;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// A uniform number in `[0, 1)`: the top 53 bits over 2^53.
    fn next_f64(&mut self) -> f64 {
        const SCALE: f64 = 1.0 / (1u64 << 53) as f64;
        (self.next_u64() >> 11) as f64 * SCALE
    }
}

/// splitmix64 (Steele, Lea and Flood), used only to seed xoshiro.
struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests;
