//! A hybrid model's slot cut back after a verification step: the step
//! keeps the recurrent state after each of its rows (`Model::keep_states`),
//! and `Model::cut_back` puts the one after the last accepted position
//! back, with the bits of decoding only those tokens one by one; a
//! position the last step kept nothing for is a typed error.

use baton_core::DType;
use baton_model::{Logits, Model, ModelError, SeqStep};
use baton_synth::SynthShape;
use baton_testkit::synth::synth_model;

use super::batch::{devices, options};

fn bits(logits: &[f32]) -> Vec<u32> {
    logits.iter().map(|x| x.to_bits()).collect()
}

fn load(path: &std::path::Path, slots: usize) -> Model {
    Model::load(path, devices(&["cpu"]).remove(0), &options(slots)).expect("load")
}

/// The last token's logits of `tokens` evaluated afresh, in one slot.
fn fresh(path: &std::path::Path, tokens: &[u32]) -> Vec<u32> {
    bits(load(path, 1).eval_prompt(tokens, 0).expect("fresh"))
}

const CASES: [(SynthShape, DType); 2] = [(SynthShape::Qwen35, DType::F32), (SynthShape::Qwen35Moe, DType::Q8_0)];

/// A step of five tokens after a prompt gives each row the bits decoding
/// them one at a time gives, and cut back to each of its positions the
/// slot goes on as if only the tokens up to there had been evaluated.
#[test]
fn a_step_cut_back_to_any_of_its_positions_goes_on_as_decoding_one_by_one() {
    for (shape, dtype) in CASES {
        let what = format!("{shape} {dtype}");
        let (_dir, path) = synth_model("hybrid-rewind", shape, dtype, 31);
        let prompt: Vec<u32> = (0..10).map(|i| (i * 37 + 11) % 512).collect();
        let step = [17u32, 230, 4, 99, 301];
        let next = 77u32;
        // Plain decoding: one token a step.
        let mut plain = load(&path, 1);
        plain.eval_prompt(&prompt, 0).expect("prompt");
        let mut one_by_one = Vec::new();
        for (j, &token) in step.iter().enumerate() {
            one_by_one.extend(bits(plain.eval(&[token], prompt.len() + j, Logits::Last).expect("decode")));
        }
        let mut model = load(&path, 1);
        let kv_cache = model.memory().kv_cache;
        model.keep_states(4).expect("keep states");
        assert_eq!(model.rewind_rows(), Some(4));
        assert!(model.kept_state_bytes() > 0);
        assert_eq!(model.memory().kv_cache, kv_cache + model.kept_state_bytes() as u64, "counted with the cache");
        model.eval_prompt(&prompt, 0).expect("prompt");
        let at_prompt = model.save_checkpoint(0).expect("checkpoint").expect("taken");
        for accepted in 0..step.len() {
            assert!(model.restore_prefix(0, &at_prompt).expect("restore"));
            let rows = bits(model.eval(&step, prompt.len(), Logits::All).expect("verify"));
            assert_eq!(rows, one_by_one, "{what}: a verification step's rows are plain decoding's");
            let len = prompt.len() + accepted + 1;
            model.cut_back(0, len).expect("cut back");
            let end = prompt.len() + step.len();
            assert!(model.resumable(0, len) && model.resumable(0, end) == (len == end));
            let got = bits(model.eval(&[next], len, Logits::Last).expect("go on"));
            let whole: Vec<u32> = prompt.iter().chain(&step[..=accepted]).chain([&next]).copied().collect();
            assert_eq!(got, fresh(&path, &whole), "{what}: cut back to {len}, then one more token");
        }
    }
}

/// Two sequences verified in one batched step, each cut back to its own
/// position: each goes on with the bits of its accepted tokens alone.
#[test]
fn sequences_of_one_step_are_cut_back_each_to_its_own_position() {
    let (_dir, path) = synth_model("hybrid-rewind-batch", SynthShape::Qwen35Moe, DType::Q8_0, 12);
    let prompts: [Vec<u32>; 2] =
        [(0..7).map(|i| (i * 29 + 3) % 512).collect(), (0..12).map(|i| (i * 13 + 8) % 512).collect()];
    let steps: [&[u32]; 2] = [&[5, 6, 7, 8], &[40, 41, 42]];
    let accepted = [1, 2];
    let mut model = load(&path, 2);
    model.keep_states(5).expect("keep states");
    for (slot, prompt) in prompts.iter().enumerate() {
        model.eval_slot(slot, prompt, 0, Logits::Last).expect("prompt");
    }
    let seqs: Vec<SeqStep<'_>> =
        (0..2).map(|i| SeqStep { slot: i, past: prompts[i].len(), tokens: steps[i] }).collect();
    let ticket = model.submit_batch_rows(&seqs, &[false, false], &[true, true]).expect("submit");
    let rows = model.batch_logits(ticket).expect("rows").len();
    assert_eq!(rows, 7 * model.config().vocab);
    for i in 0..2 {
        model.cut_back(i, prompts[i].len() + accepted[i] + 1).expect("cut back");
    }
    for i in 0..2 {
        let len = prompts[i].len() + accepted[i] + 1;
        let got = bits(model.eval_slot(i, &[300], len, Logits::Last).expect("go on"));
        let whole: Vec<u32> = prompts[i].iter().chain(&steps[i][..=accepted[i]]).chain(&[300]).copied().collect();
        assert_eq!(got, fresh(&path, &whole), "slot {i} cut back to {len}");
    }
}

/// Only the positions of the slot's last step can be gone back to, and only
/// where states were kept: anything else is refused by name.
#[test]
fn a_cut_back_without_a_kept_state_is_refused() {
    let (_dir, path) = synth_model("hybrid-rewind-refused", SynthShape::Qwen35, DType::F32, 3);
    let prompt: Vec<u32> = (0..8).map(|i| (i * 7 + 1) % 512).collect();
    let mut model = load(&path, 1);
    model.eval_prompt(&prompt, 0).expect("prompt");
    model.eval(&[1, 2, 3], 8, Logits::All).expect("a step keeping nothing");
    let err = model.cut_back(0, 9).expect_err("no state kept");
    assert!(matches!(err, ModelError::NotKept { slot: 0, len: 9, at: 11, .. }), "{err}");
    model.cut_back(0, 11).expect("its own length is no cut");
    assert!(matches!(model.cut_back(0, 12), Err(ModelError::Input(_))), "beyond what it holds");
    model.keep_states(2).expect("keep states");
    model.eval(&[4, 5, 6], 11, Logits::All).expect("verify");
    let err = model.cut_back(0, 11).expect_err("the step's first token is in every kept state");
    assert!(matches!(&err, ModelError::NotKept { kept, .. } if *kept == (12..14)), "{err}");
    model.eval(&[7], 14, Logits::Last).expect("a later step");
    assert!(matches!(model.cut_back(0, 12), Err(ModelError::NotKept { .. })), "a later step forgets the kept rows");
    // A model without recurrent layers needs none: the next step overwrites.
    let (_d, plain) = synth_model("rewind-attention", SynthShape::Tiny, DType::F32, 3);
    let mut attention = load(&plain, 1);
    assert_eq!(attention.rewind_rows(), None);
    attention.eval_prompt(&prompt, 0).expect("prompt");
    attention.cut_back(0, 3).expect("attention forgets");
}

/// A chunked delta rule keeps no states (its bits depend on the split).
#[test]
fn a_chunked_delta_rule_keeps_no_states() {
    let (_dir, path) = synth_model("hybrid-rewind-chunked", SynthShape::Qwen35, DType::F32, 3);
    let options = baton_model::LoadOptions { delta_chunk: 4, ..options(1) };
    let mut model = Model::load(&path, devices(&["cpu"]).remove(0), &options).expect("load");
    assert!(matches!(model.keep_states(4), Err(ModelError::Input(m)) if m.contains("delta-chunk")));
}
