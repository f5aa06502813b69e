//! Speculative decoding changes no token: one sequence decoded with n-gram
//! drafts verified in steps of several rows gives the tokens, and the bits
//! of every row drawn from, that decoding one token a step gives; greedy
//! and seeded sampling, with penalties and stop strings, on synthetic
//! models and, behind `reference-tests`, on SmolLM2 over many prompts. The
//! drafted and accepted counts are printed, and the tests check that drafts
//! were both accepted and rejected (so both paths ran).

use std::path::Path;

use baton_core::DType;
use baton_gen::speculative::{
    Decoding, DraftAsk, Drawn, ModelDrafter, NgramDrafter, SpecError, SpecParams, SpecStats, SpecType, Speculation,
    StepCost, StepTimes,
};
use baton_gen::{LogitBias, Sampler, SamplingParams, StopMatcher};
use baton_model::{LoadOptions, Model};
use baton_synth::SynthShape;
use baton_testkit::synth::synth_model;

pub(super) fn load(path: &Path) -> Model {
    let device =
        baton_cpu::open_with(&["cpu"], &baton_cpu::OpenOptions::default().with_threads(2)).expect("cpu").remove(0);
    let options = LoadOptions { context: Some(256), cache_type: DType::F16, batch: 16, ..LoadOptions::default() };
    Model::load(path, device, &options).expect("load")
}

/// What one decoding gave: its tokens, each drawn row's bits hashed, and
/// whether a stop string ended it.
#[derive(Debug, PartialEq)]
pub(super) struct Output {
    pub(super) tokens: Vec<u32>,
    pub(super) rows: Vec<u64>,
    pub(super) stopped: bool,
}

pub(super) fn hash(row: &[f32]) -> u64 {
    row.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, x| (h ^ u64::from(x.to_bits())).wrapping_mul(0x100_0000_01b3))
}

/// Decodes up to `n` tokens after `prompt`, as `baton run` does, with
/// speculation as `spec` says (or none), ending at a stop string of `stops`.
pub(super) fn decode(
    model: &mut Model,
    prompt: &[u32],
    sampling: &SamplingParams,
    mut spec: Option<Speculation>,
    n: usize,
    stops: &[String],
) -> (Output, SpecStats) {
    let mut sampler = Sampler::new(sampling.clone());
    prompt.iter().for_each(|&t| sampler.accept(t));
    let tokenizer = model.shared_tokenizer();
    let mut decoder = tokenizer.stream_decoder(false);
    let mut matcher = StopMatcher::new(stops.to_vec());
    let mut out = Output { tokens: Vec::new(), rows: Vec::new(), stopped: false };
    let mut draw = |row: &[f32]| -> Result<Drawn, baton_model::ModelError> {
        out.rows.push(hash(row));
        let token = sampler.sample(row).expect("sample");
        sampler.accept(token);
        out.tokens.push(token);
        let piece = decoder.push(token)?.unwrap_or_default();
        if matcher.push(&piece).stopped {
            out.stopped = true;
            return Ok(Drawn::End);
        }
        Ok(Drawn::Token(token))
    };
    // A drafter that reads the hidden states gets the prompt's.
    let logits = baton_gen::speculative::eval_prompt(model, spec.as_mut(), prompt).expect("prompt");
    let first = draw(logits).expect("draw");
    if let Drawn::Token(first) = first {
        let tokens = prompt.iter().copied().chain([first]).collect();
        let mut times = StepTimes::new(spec.as_ref().map_or(StepCost::MEASURED, |s| s.params().cost));
        let times = &mut times;
        let mut decoding = Decoding { model, slot: 0, past: prompt.len(), tokens, left: n - 1, times };
        decoding.run(spec.as_mut(), &|| false, &mut draw).expect("decode");
    }
    (out, spec.map(|s| s.stats()).unwrap_or_default())
}

/// Adds `stats` to `total`.
pub(super) fn add(total: &mut SpecStats, stats: SpecStats) {
    total.drafted += stats.drafted;
    total.accepted += stats.accepted;
    total.steps += stats.steps;
}

pub(super) fn samplings() -> Vec<(&'static str, SamplingParams)> {
    let seeded = SamplingParams { temperature: 0.8, top_k: 40, top_p: 0.95, seed: 7, ..SamplingParams::default() };
    let penalized = SamplingParams {
        repeat_penalty: 1.1,
        repeat_last_n: 32,
        presence_penalty: 0.2,
        frequency_penalty: 0.1,
        seed: 11,
        ..seeded.clone()
    };
    vec![("greedy", SamplingParams::greedy()), ("seeded", seeded), ("penalized", penalized)]
}

fn ngram(draft_max: usize, cost: StepCost) -> SpecParams {
    SpecParams {
        kind: SpecType::Ngram,
        draft_max,
        drafter: NgramDrafter { max_n: 3, min_n: 1 },
        cost,
        ..SpecParams::default()
    }
}

/// Every prompt, sampling and draft setting: speculation gives what plain
/// decoding gives. Returns the counts over all of them.
fn check_exact(model: &mut Model, what: &str, prompts: &[Vec<u32>], n: usize) -> SpecStats {
    check_exact_with(model, what, prompts, n, &samplings())
}

/// As [`check_exact`], with each of `samplings`.
fn check_exact_with(
    model: &mut Model,
    what: &str,
    prompts: &[Vec<u32>],
    n: usize,
    samplings: &[(&str, SamplingParams)],
) -> SpecStats {
    let mut total = SpecStats::default();
    let mut stopped = 0;
    for (p, prompt) in prompts.iter().enumerate() {
        for (name, sampling) in samplings {
            let (plain, _) = decode(model, prompt, sampling, None, n, &[]);
            // A stop string the plain output holds: both runs end there.
            let tokenizer = model.shared_tokenizer();
            let stop = tokenizer.decode(&plain.tokens[n / 2..n / 2 + 2]).expect("decode");
            let stops: Vec<String> = [stop].into_iter().filter(|s| !s.trim().is_empty()).collect();
            let (plain_stopped, _) = decode(model, prompt, sampling, None, n, &stops);
            stopped += usize::from(plain_stopped.stopped);
            // Free rows draft whenever a draft is found (rejections
            // too); the default cost model drafts as the budget says.
            for spec in [ngram(8, StepCost::FREE), ngram(3, StepCost::FREE), ngram(8, StepCost::MEASURED)] {
                for (want, stops) in [(&plain, &[][..]), (&plain_stopped, &stops[..])] {
                    let (got, stats) = decode(model, prompt, sampling, Speculation::new(spec), n, stops);
                    assert!(
                        &got == want,
                        "{what}, prompt {p}, {name}, draft max {} ({:?}), stops {stops:?}: \
                         speculation changed the output\n  plain {:?}\n  spec  {:?}",
                        spec.draft_max,
                        spec.cost,
                        want.tokens,
                        got.tokens
                    );
                    add(&mut total, stats);
                }
            }
        }
    }
    eprintln!(
        "{what}: {} drafted tokens in {} steps, {} accepted ({:.0}%); {stopped} plain runs ended at a stop string",
        total.drafted,
        total.steps,
        total.accepted,
        100.0 * total.acceptance()
    );
    assert!(stopped > 0, "{what}: no run ended at a stop string");
    assert!(total.accepted > 0 && total.accepted < total.drafted, "{what}: drafts both accepted and rejected");
    total
}

pub(super) fn synthetic_prompts(vocab: u32) -> Vec<Vec<u32>> {
    let phrase: Vec<u32> = (0..7).map(|i| (i * 37 + 11) % vocab).collect();
    vec![
        // A phrase repeated: what n-grams draft.
        phrase.iter().cycle().take(30).copied().collect(),
        // No repeat.
        (0..20).map(|i| (i * 53 + 3) % vocab).collect(),
        // One token.
        vec![5],
    ]
}

#[test]
fn speculation_changes_no_token_on_synthetic_models() {
    for (shape, dtype) in [
        (SynthShape::Tiny, DType::F32),
        (SynthShape::Tiny, DType::Q8_0),
        (SynthShape::Gemma3, DType::Q8_0),
        (SynthShape::Qwen3Moe, DType::Q8_0),
    ] {
        let (_dir, path) = synth_model("spec-exact", shape, dtype, 5);
        let mut model = load(&path);
        let vocab = model.config().vocab as u32;
        check_exact(&mut model, &format!("{shape} {dtype}"), &synthetic_prompts(vocab), 40);
    }
}

/// Hybrid models (Gated DeltaNet layers beside attention) with n-gram
/// drafts: each verification step's recurrent state is cut back to the
/// accepted drafts (from the states it kept after each row), and the output
/// (tokens and each drawn row's bits) is plain decoding's. The random toys'
/// text never repeats, so the samplings bias three tokens (`logit_bias`):
/// the text is then made of them, and n-grams find drafts that hold.
#[test]
fn ngram_speculation_changes_no_token_on_hybrid_models() {
    let biased: Vec<(&str, SamplingParams)> = samplings()
        .into_iter()
        .map(|(name, s)| (name, SamplingParams { logit_bias: LogitBias::new([(3, 20.0), (7, 20.0), (11, 20.0)]), ..s }))
        .collect();
    for (shape, dtype) in [(SynthShape::Qwen35, DType::F32), (SynthShape::Qwen35Moe, DType::Q8_0)] {
        let (_dir, path) = synth_model("spec-exact-hybrid", shape, dtype, 5);
        let mut model = load(&path);
        baton_gen::speculative::prepare_model(&mut model, 8).expect("keeps states");
        let vocab = model.config().vocab as u32;
        check_exact_with(&mut model, &format!("{shape} {dtype}"), &synthetic_prompts(vocab), 40, &biased);
    }
}

/// A hybrid model verifies drafts once it keeps its recurrent states after
/// each row of a step (`prepare_model`), not before, and not with the
/// chunked delta rule (whose bits depend on how a prompt is split).
#[test]
fn a_recurrent_model_verifies_drafts_once_it_keeps_its_states() {
    let (_dir, path) = synth_model("spec-hybrid", SynthShape::Qwen35, DType::Q8_0, 5);
    let mut model = load(&path);
    let refused = baton_gen::speculative::check_model(&model).expect_err("keeps no states yet");
    assert!(matches!(&refused, SpecError::NoRewind { arch: "qwen35", .. }), "{refused}");
    baton_gen::speculative::prepare_model(&mut model, 4).expect("prepared");
    assert!(baton_gen::speculative::check_model(&model).is_ok());
    assert_eq!(model.rewind_rows(), Some(4));
    let device = baton_cpu::open(&["cpu"]).expect("cpu").remove(0);
    let options = LoadOptions { context: Some(64), batch: 16, delta_chunk: 4, ..LoadOptions::default() };
    let mut chunked = Model::load(&path, device, &options).expect("load");
    let refused = baton_gen::speculative::prepare_model(&mut chunked, 4).expect_err("chunked");
    assert!(refused.to_string().contains("delta-chunk"), "{refused}");
    let (_dir, path) = synth_model("spec-plain", SynthShape::Qwen3Moe, DType::Q8_0, 5);
    assert!(baton_gen::speculative::check_model(&load(&path)).is_ok());
}

/// A draft model of the same vocabulary (`-md`): the model itself (its
/// greedy drafts all hold when decoding is greedy) and one of other
/// weights (most are rejected); the output is plain decoding's either way.
/// Hybrid models too, target and draft (a draft slot's recurrent state
/// goes back to its checkpoint when its drafts are rejected).
#[test]
fn a_draft_models_drafts_change_no_token() {
    a_draft_model_changes_no_token(SynthShape::Tiny);
    a_draft_model_changes_no_token(SynthShape::Qwen35);
}

fn a_draft_model_changes_no_token(shape: SynthShape) {
    let (_dir, path) = synth_model("spec-target", shape, DType::F32, 5);
    let (_other_dir, other) = synth_model("spec-draft", shape, DType::Q8_0, 6);
    let mut model = load(&path);
    baton_gen::speculative::prepare_model(&mut model, 4).expect("keeps states where it must");
    let prompts = synthetic_prompts(model.config().vocab as u32);
    let params = SpecParams { kind: SpecType::Ngram, draft_max: 4, cost: StepCost::FREE, ..SpecParams::default() };
    for (draft_path, what) in [(&path, "itself"), (&other, "other weights")] {
        let mut total = SpecStats::default();
        for prompt in &prompts {
            for (name, sampling) in samplings() {
                let (plain, _) = decode(&mut model, prompt, &sampling, None, 32, &[]);
                let drafter = ModelDrafter::new(load(draft_path), &model).expect("same vocabulary");
                let spec = Speculation::with_model(params, drafter);
                let (got, stats) = decode(&mut model, prompt, &sampling, Some(spec), 32, &[]);
                assert!(got == plain, "{shape} draft model {what}, {name}: the output changed");
                total.drafted += stats.drafted;
                total.accepted += stats.accepted;
                if what == "itself" && name == "greedy" {
                    assert_eq!(stats.accepted, stats.drafted, "greedy drafts of the model itself all hold");
                }
            }
        }
        eprintln!("{shape} draft model {what}: {} drafted, {} accepted", total.drafted, total.accepted);
        // Itself: drafts accepted; other weights: nearly all rejected.
        let held = match what {
            "itself" => total.accepted > 0,
            _ => total.accepted * 20 < total.drafted,
        };
        assert!(total.drafted > 0 && held, "{shape} draft model {what}: {total:?}");
    }
}

/// Sequences drafting together (the server's draft model, a slot each)
/// get the drafts each gets alone: the greedy tokens of plain decoding of
/// the draft model, whatever else its steps carry, over histories longer
/// than one step's rows, then again after each history took some of its
/// drafts and a token of its own (the slots' caches kept and cut back; a
/// hybrid model's recurrent states back to their checkpoints), and after a
/// slot is given another sequence.
#[test]
fn drafts_made_together_are_each_sequences_drafts_alone() {
    drafts_together_are_drafts_alone(SynthShape::Tiny);
    drafts_together_are_drafts_alone(SynthShape::Qwen35);
}

fn drafts_together_are_drafts_alone(shape: SynthShape) {
    let (_dir, path) = synth_model("spec-batch-drafts", shape, DType::F32, 5);
    let mut plain = load(&path);
    let greedy_alone = |model: &mut Model, history: &[u32], k: usize| {
        let mut sampler = Sampler::new(SamplingParams::greedy());
        let mut tokens = history.to_vec();
        for _ in 0..k {
            let token = sampler.sample(model.eval_prompt(&tokens, 0).expect("eval")).expect("sample");
            tokens.push(token);
        }
        tokens.split_off(history.len())
    };
    let device = baton_cpu::open(&["cpu"]).expect("cpu").remove(0);
    let options = LoadOptions { context: Some(256), batch: 16, slots: 3, ..LoadOptions::default() };
    let mut drafter = ModelDrafter::new(Model::load(&path, device, &options).expect("load"), &plain).expect("same");
    let mut histories: Vec<Vec<u32>> =
        [5usize, 40, 17].iter().map(|&n| (0..n as u32).map(|i| (i * 7 + n as u32) % 500).collect()).collect();
    for round in 0..4 {
        if round == 3 {
            // Slot 0 drafts for another sequence.
            histories[0] = (0..9).map(|i| (i * 11 + 3) % 500).collect();
        }
        let asks: Vec<DraftAsk<'_>> =
            histories.iter().enumerate().map(|(slot, h)| DraftAsk { slot, history: h, k: 2 + slot }).collect();
        let drafts = drafter.draft_batch(&asks).expect("drafts");
        for (slot, history) in histories.iter_mut().enumerate() {
            let want = greedy_alone(&mut plain, history, 2 + slot);
            assert_eq!(drafts[slot], want, "{shape} round {round}, slot {slot}");
            // It takes its first draft and a token of its own.
            history.extend([drafts[slot][0], (round * 31 + slot as u32 * 3) % 500]);
        }
    }
    let twice =
        [DraftAsk { slot: 1, history: &histories[0], k: 2 }, DraftAsk { slot: 1, history: &histories[1], k: 2 }];
    assert!(drafter.draft_batch(&twice).is_err(), "one slot, two sequences");
    assert!(drafter.draft_batch(&[DraftAsk { slot: 3, history: &histories[0], k: 2 }]).is_err(), "no slot 3");
}

/// SmolLM2-135M over prompts that repeat (code to rewrite, a text to
/// quote) and prompts that do not.
#[cfg(feature = "reference-tests")]
#[test]
fn speculation_changes_no_token_on_smollm2() {
    let mut model = load(&baton_testkit::env::smollm2());
    let texts = [
        "Copy this code exactly:\nfn add(a: i32, b: i32) -> i32 {\n    a + b\n}\nfn sub(a: i32, b: i32) -> i32 {\n    a - b\n}\nCopy:\n",
        "Repeat after me: the quick brown fox jumps over the lazy dog. The quick brown fox",
        "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n\ndef fib2(n):\n",
        "The history of the Roman Empire spans",
        "List three colors:",
        "Q: What is the capital of France?\nA:",
    ];
    let options = baton_model::EncodeOptions { add_special: true, parse_special: true };
    let prompts: Vec<Vec<u32>> = texts.iter().map(|t| model.tokenizer().encode(t, options).expect("encode")).collect();
    check_exact(&mut model, "SmolLM2", &prompts, 32);
    // A draft model of another vocabulary is refused.
    let (_dir, tiny) = synth_model("spec-vocab", SynthShape::Tiny, DType::Q8_0, 1);
    let refused = ModelDrafter::new(load(&tiny), &model).expect_err("512 tokens against 49152");
    assert!(matches!(refused, SpecError::VocabMismatch { target: 49152, draft: 512 }), "{refused}");
}
