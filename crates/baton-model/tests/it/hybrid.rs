//! A hybrid model's recurrent state (the qwen35 and qwen35moe toys: three
//! Gated DeltaNet layers and one attention layer): batched steps keep each
//! sequence's bits, the state holds exactly the positions its slot
//! evaluated (an evaluation goes on from there or starts again at 0), and
//! it moves between slots and host memory whole.

use baton_core::DType;
use baton_model::{Logits, Model, ModelError};
use baton_synth::SynthShape;
use baton_testkit::synth::synth_model;

use super::batch::{assert_batched_match_alone, devices, options};

/// Sequences of different lengths, joining at different steps, prompts in
/// chunks of 3 and 32, attention in slots and per sequence, on one device
/// and split by layer over two: each sequence's logits are those it gets
/// alone in a one-slot model, bit for bit.
#[test]
fn batched_sequences_through_recurrent_layers_match_each_sequence_alone() {
    let cases =
        [(SynthShape::Qwen35, DType::F32), (SynthShape::Qwen35, DType::Q8_0), (SynthShape::Qwen35Moe, DType::Q8_0)];
    for (shape, dtype) in cases {
        let (_dir, path) = synth_model("batch-hybrid", shape, dtype, 23);
        assert_batched_match_alone(&path, &format!("{shape} {dtype}"));
    }
}

fn bits(logits: &[f32]) -> Vec<u32> {
    logits.iter().map(|x| x.to_bits()).collect()
}

/// The state holds the positions the slot evaluated: going on from there
/// works, starting again from 0 gives a fresh sequence's bits, and
/// anything else is refused with an error that says where it can go on.
#[test]
fn a_recurrent_state_goes_on_from_its_end_or_starts_again() {
    let (_dir, path) = synth_model("hybrid-state", SynthShape::Qwen35, DType::F32, 7);
    let mut model = Model::load(&path, devices(&["cpu"]).remove(0), &options(2)).expect("load");
    let prompt: Vec<u32> = (0..10).map(|i| (i * 37 + 11) % 512).collect();
    let whole = bits(model.eval_prompt(&prompt, 0).expect("prompt"));
    assert!(model.resumable(0, 10) && model.resumable(0, 0));
    assert!(!model.resumable(0, 5) && !model.resumable(0, 11));
    let err = model.eval(&prompt[5..], 5, Logits::Last).expect_err("from the middle");
    assert!(matches!(err, ModelError::StateRewound { slot: 0, past: 5, at: 10 }), "{err}");
    assert!(err.to_string().contains("goes on from 10"), "{err}");
    // In pieces: the same bits as in one step.
    let first = model.eval(&prompt[..4], 0, Logits::Last).expect("first piece");
    assert_ne!(bits(first), whole);
    let rest = bits(model.eval(&prompt[4..], 4, Logits::Last).expect("the rest"));
    assert_eq!(rest, whole, "a prompt in two steps ends as in one");
    // Another sequence in the slot starts from a zero state.
    let other: Vec<u32> = (0..6).map(|i| (i * 53 + 2) % 512).collect();
    let fresh = {
        let mut alone = Model::load(&path, devices(&["cpu"]).remove(0), &options(1)).expect("load");
        bits(alone.eval_prompt(&other, 0).expect("fresh"))
    };
    assert_eq!(bits(model.eval_prompt(&other, 0).expect("again")), fresh);
}

/// A slot's state copied to another slot, or saved to host memory and
/// restored, serves exactly its length: the copy goes on with the bits the
/// source would give; a shorter length is not served.
#[test]
fn a_recurrent_state_moves_whole_between_slots_and_host_memory() {
    let (_dir, path) = synth_model("hybrid-move", SynthShape::Qwen35Moe, DType::Q8_0, 9);
    let mut model = Model::load(&path, devices(&["cpu"]).remove(0), &options(3)).expect("load");
    let prompt: Vec<u32> = (0..12).map(|i| (i * 29 + 3) % 512).collect();
    model.eval_prompt(&prompt, 0).expect("prompt");
    let next = [42u32, 7];
    assert!(!model.copy_prefix(0, 1, 8).expect("a shorter copy"), "a state of 12 positions is not one of 8");
    assert!(model.copy_prefix(0, 1, 12).expect("copy"));
    assert!(model.save_prefix(0, 8).expect("shorter save").is_none());
    let saved = model.save_prefix(0, 12).expect("save").expect("saved");
    assert!(model.restorable(&saved, 12) && model.restorable(&saved, 0) && !model.restorable(&saved, 6));
    let want = bits(model.eval_slot(0, &next, 12, Logits::Last).expect("source goes on"));
    assert_eq!(bits(model.eval_slot(1, &next, 12, Logits::Last).expect("copy goes on")), want);
    assert!(model.restore_prefix(2, &saved).expect("restore"));
    assert_eq!(bits(model.eval_slot(2, &next, 12, Logits::Last).expect("restored goes on")), want);
}

/// A checkpoint at the end of a prompt lets the slot resume there after it
/// went on with other tokens: the state is written back, the keys and
/// values of the prompt are still in the slot, and a new continuation gets
/// the bits of evaluating prompt and continuation afresh.
#[test]
fn a_checkpoint_resumes_a_slot_at_the_prompt_it_held() {
    let (_dir, path) = synth_model("hybrid-checkpoint", SynthShape::Qwen35, DType::Q8_0, 4);
    let prompt: Vec<u32> = (0..9).map(|i| (i * 41 + 6) % 512).collect();
    let (answer, next) = ([5u32, 6, 7], [300u32, 301, 302, 303]);
    let fresh = {
        let mut alone = Model::load(&path, devices(&["cpu"]).remove(0), &options(1)).expect("load");
        let whole: Vec<u32> = prompt.iter().chain(&next).copied().collect();
        bits(alone.eval_prompt(&whole, 0).expect("fresh"))
    };
    let mut model = Model::load(&path, devices(&["cpu"]).remove(0), &options(2)).expect("load");
    model.eval_prompt(&prompt, 0).expect("prompt");
    let checkpoint = model.save_checkpoint(0).expect("checkpoint").expect("taken");
    assert_eq!(checkpoint.len(), prompt.len());
    assert!(checkpoint.bytes() > 0 && model.save_checkpoint(1).expect("empty slot").is_none());
    model.eval(&answer, prompt.len(), Logits::Last).expect("an answer");
    assert!(!model.resumable(0, prompt.len()), "the state went on past the prompt");
    assert!(model.restore_prefix(0, &checkpoint).expect("restore"));
    assert!(model.resumable(0, prompt.len()));
    assert_eq!(bits(model.eval(&next, prompt.len(), Logits::Last).expect("resumed")), fresh);
}

/// The chunked delta rule (`delta_chunk`, prompts taken 4 rows at a time,
/// a prompt of 19 so the last chunk is short; then a second step going on
/// from the state it left) gives the row-by-row form's logits at every
/// position to float rounding (the bits may differ: it is off by default).
#[test]
fn the_chunked_delta_rule_agrees_with_the_row_by_row_one() {
    let (_dir, path) = synth_model("hybrid-chunked", SynthShape::Qwen35Moe, DType::F32, 5);
    let load = |chunk: usize| {
        let options = baton_model::LoadOptions { delta_chunk: chunk, ..options(1) };
        Model::load(&path, devices(&["cpu"]).remove(0), &options).expect("load")
    };
    let prompt: Vec<u32> = (0..19).map(|i| (i * 31 + 5) % 512).collect();
    let next: Vec<u32> = (0..6).map(|i| (i * 17 + 9) % 512).collect();
    let (mut rows, mut chunked) = (load(0), load(4));
    let mut differ = false;
    for (tokens, past) in [(&prompt, 0), (&next, prompt.len())] {
        let want = rows.eval(tokens, past, Logits::All).expect("row by row").to_vec();
        let got = chunked.eval(tokens, past, Logits::All).expect("chunked").to_vec();
        assert_eq!(got.len(), want.len());
        let scale = want.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        let worst = got.iter().zip(&want).fold(0.0f32, |m, (g, w)| m.max((g - w).abs()));
        assert!(worst <= 1e-4 * scale, "past {past}: largest difference {worst} against logits up to {scale}");
        differ |= got.iter().zip(&want).any(|(g, w)| g.to_bits() != w.to_bits());
    }
    assert!(differ, "the chunked form ran (its sums go in another order, so some bits differ)");
}
