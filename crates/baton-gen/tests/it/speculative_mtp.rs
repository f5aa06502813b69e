//! Drafting with the model's own multi-token-prediction head
//! (`--spec-type mtp`) on the qwen35 and qwen35moe toys (f32): the output
//! (tokens and each drawn row's bits) is plain decoding's, greedy and
//! sampled, over several prompts; the drafter's chain after rejected drafts
//! is a fresh head's over the kept positions; a file without the block is
//! refused. The toys' weights are random, so the head rarely guesses the
//! model's token: the acceptance is printed, not asserted.

use std::path::Path;

use baton_core::DType;
use baton_gen::speculative::{
    prepare_model, MtpDrafter, SpecError, SpecParams, SpecStats, SpecType, Speculation, StepCost,
};
use baton_gen::{Sampler, SamplingParams};
use baton_model::MtpHead;
use baton_synth::SynthShape;
use baton_testkit::synth::synth_model;

use super::speculative::{add, decode, load, samplings, synthetic_prompts};

fn mtp(draft_max: usize, cost: StepCost) -> SpecParams {
    SpecParams { kind: SpecType::Mtp, draft_max, cost, ..SpecParams::default() }
}

#[test]
fn mtp_drafting_changes_no_token_on_qwen35_toys() {
    for shape in [SynthShape::Qwen35, SynthShape::Qwen35Moe] {
        let (_dir, path) = synth_model("spec-mtp", shape, DType::F32, 5);
        let mut model = load(&path);
        prepare_model(&mut model, 8).expect("keeps states");
        let vocab = model.config().vocab as u32;
        let mut total = SpecStats::default();
        for (p, prompt) in synthetic_prompts(vocab).iter().enumerate() {
            for (name, sampling) in samplings() {
                let (plain, _) = decode(&mut model, prompt, &sampling, None, 40, &[]);
                // Free rows verify every draft the head makes; the learned
                // cost drafts as the head's measured cost allows.
                for params in [mtp(4, StepCost::FREE), mtp(8, StepCost::FREE), mtp(8, StepCost::MEASURED)] {
                    let drafter = MtpDrafter::open(&path, &model).expect("the toy holds a head");
                    let spec = Some(Speculation::with_mtp(params, drafter));
                    let (got, stats) = decode(&mut model, prompt, &sampling, spec, 40, &[]);
                    assert!(
                        got == plain,
                        "{shape}, prompt {p}, {name}, draft max {} ({:?}): the head's drafts changed the output\n  \
                         plain {:?}\n  mtp   {:?}",
                        params.draft_max,
                        params.cost,
                        plain.tokens,
                        got.tokens
                    );
                    add(&mut total, stats);
                }
            }
        }
        eprintln!(
            "{shape} f32, mtp: {} drafted tokens in {} steps, {} accepted ({:.1}%)",
            total.drafted,
            total.steps,
            total.accepted,
            100.0 * total.acceptance()
        );
        assert!(total.drafted > 0, "{shape}: the head drafted nothing, so nothing was verified");
    }
}

/// The drafts of `k` tokens after `tokens[..len]` as their definition says,
/// on a fresh head: a row per kept position (the model's hidden state at
/// `p`, the token at `p + 1`), then the chain from the last one (each next
/// row reads the head's own output hidden state and the draft before it).
fn drafts_by_definition(path: &Path, hidden: &[f32], tokens: &[u32], (len, k): (usize, usize)) -> Vec<u32> {
    let mut head = MtpHead::open(path).expect("open").expect("head");
    let dim = head.config().dim;
    let row = |p: usize| &hidden[p * dim..(p + 1) * dim];
    for p in 0..len - 2 {
        head.forward(row(p), tokens[p + 1], p).expect("kept row");
    }
    let mut greedy = Sampler::new(SamplingParams::greedy());
    let (mut state, mut token) = (row(len - 2).to_vec(), tokens[len - 1]);
    let mut drafts = Vec::new();
    for position in len - 2..len - 2 + k {
        let (logits, out) = head.forward_hidden(&state, token, position).expect("chained row");
        token = greedy.sample(&logits).expect("greedy");
        drafts.push(token);
        state = out;
    }
    drafts
}

/// The drafter after steps that accepted 0 to 3 of its drafts (its rows of
/// the rejected positions rewound), and after steps it did not draft for
/// (their hidden states primed later): each time, the drafts and the rows
/// a fresh head computes from the kept positions by definition (the
/// drafter's head splits its f32 output product, 128 KiB, over the CPU
/// device's threads; the fresh head runs on the calling thread: the same
/// drafts).
#[test]
fn the_drafters_chain_after_rejections_is_a_fresh_heads() {
    let (_dir, path) = synth_model("spec-mtp-rewind", SynthShape::Qwen35, DType::F32, 5);
    let mut model = load(&path);
    let vocab = model.config().vocab as u32;
    let tokens: Vec<u32> = (0..40).map(|i| (i * 53 + 3) % vocab).collect();
    // The model's hidden states of the whole text, as its steps give them.
    let hidden = model.eval_hidden(0, &tokens).expect("hidden states");
    let dim = model.config().dim;
    let mut drafter = MtpDrafter::open(&path, &model).expect("head");
    let prompt = 8;
    drafter.observe(0, &hidden[..prompt * dim]).expect("the prompt's rows");
    // (len, k): drafts after tokens[..len]; each step keeps its evaluated
    // token's row and the accepted drafts'. k = 0: a step not drafted for.
    let mut past = prompt;
    for (accepted, k) in [(0, 4), (2, 4), (1, 3), (0, 0), (3, 0), (0, 4), (3, 2), (1, 4)] {
        let len = past + 1;
        let drafts = drafter.draft(&tokens[..len], k).expect("drafts");
        assert_eq!(drafts, drafts_by_definition(&path, &hidden, &tokens, (len, k)), "after {len} tokens, {k} drafts");
        if k > 0 {
            assert_eq!(drafter.head().len(), len - 2 + k, "the head holds rows up to its last draft's");
        }
        drafter.observe(past, &hidden[past * dim..(past + 1 + accepted) * dim]).expect("the step's rows");
        past += 1 + accepted;
    }
    // Rows after a gap (steps that read none: drafting was off) restart
    // the head there: it drafts from the rows given since.
    drafter.observe(past + 2, &hidden[(past + 2) * dim..(past + 5) * dim]).expect("rows after a gap");
    assert_eq!(drafter.draft(&tokens[..past + 6], 2).expect("drafts").len(), 2);
    assert_eq!((drafter.head().start(), drafter.head().len()), (past + 2, past + 6), "restarted at the gap");
}

#[test]
fn a_file_without_a_prediction_block_is_refused() {
    let (_dir, path) = synth_model("spec-mtp-none", SynthShape::Qwen3, DType::F32, 3);
    let model = load(&path);
    let refused = MtpDrafter::open(&path, &model).expect_err("qwen3 toy: no head");
    assert!(matches!(refused, SpecError::NoMtp { arch: "qwen3" }), "{refused:?}");
    assert!(refused.to_string().contains("--spec-type mtp") && refused.to_string().contains("holds none"), "{refused}");
    assert_eq!(SpecType::from_name("mtp"), Some(SpecType::Mtp));
    assert!(Speculation::new(mtp(4, StepCost::FREE)).is_none(), "the head is given by with_mtp, never n-grams");
}

/// The head drafts up to its file's context (512 positions on the toys):
/// a model loaded with more gets no drafts past it, and its steps stop
/// reading their hidden states there.
#[test]
fn a_head_past_its_context_drafts_nothing_and_reads_no_hidden_states() {
    let (_dir, path) = synth_model("spec-mtp-context", SynthShape::Qwen35, DType::F32, 5);
    let model = load(&path);
    let mut drafter = MtpDrafter::open(&path, &model).expect("head");
    let (dim, context) = (drafter.head().config().dim, drafter.head().config().context);
    let tokens: Vec<u32> = (0..context as u32 + 2).map(|i| (i * 53 + 3) % 512).collect();
    let hidden: Vec<f32> = (0..(context + 1) * dim).map(|i| ((i * 7919) % 101) as f32 / 50.0 - 1.0).collect();
    drafter.observe(0, &hidden[..(context - 1) * dim]).expect("rows");
    assert!(drafter.reads_hidden());
    assert_eq!(drafter.draft(&tokens[..context], 4).expect("drafts").len(), 2, "two positions left before the end");
    drafter.observe(context - 1, &hidden[(context - 1) * dim..]).expect("rows");
    assert!(!drafter.reads_hidden(), "past the head's context");
    assert!(drafter.draft(&tokens[..context + 2], 4).expect("no drafts").is_empty());
}

/// A draft asked again after the same tokens, its step never evaluated (a
/// server step retried once the KV pool made room, or one the sequence did
/// not fit in), drafts nothing: the head's rows after the last observed
/// position are its earlier drafts'. The restarted drafter (another
/// sequence's) is a fresh one's: the same drafts.
#[test]
fn a_draft_asked_again_before_its_step_drafts_nothing_and_a_restart_forgets_all() {
    let (_dir, path) = synth_model("spec-mtp-again", SynthShape::Qwen35, DType::F32, 5);
    let mut model = load(&path);
    let vocab = model.config().vocab as u32;
    let tokens: Vec<u32> = (0..12).map(|i| (i * 53 + 3) % vocab).collect();
    let hidden = model.eval_hidden(0, &tokens[..11]).expect("hidden states");
    let mut drafter = MtpDrafter::open(&path, &model).expect("head");
    drafter.observe(0, &hidden).expect("the prompt's rows");
    let first = drafter.draft(&tokens, 3).expect("drafts");
    assert_eq!(first.len(), 3);
    assert!(drafter.draft(&tokens, 3).expect("asked again").is_empty(), "no second draft from the same rows");
    drafter.restart();
    assert_eq!((drafter.head().start(), drafter.head().len()), (0, 0), "a restarted head holds no row");
    drafter.observe(0, &hidden).expect("the prompt's rows again");
    assert_eq!(drafter.draft(&tokens, 3).expect("drafts"), first, "a restarted drafter drafts as a fresh one");
}
