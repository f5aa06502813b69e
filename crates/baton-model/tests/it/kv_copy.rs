//! `Model::copy_prefix`, `save_prefix` and `restore_prefix`: a slot given
//! another slot's first positions by a copy on the device, or by a write
//! of what was saved to host memory, continues with the bits of evaluating
//! them, for the toys (every position kept), Gemma 3's rings, and a q8_0
//! cache; what cannot be served is refused with `false` or `None`.

use baton_core::DType;
use baton_model::{LoadOptions, Logits, Model};
use baton_synth::SynthShape;
use baton_testkit::synth::synth_model;

fn load(shape: SynthShape, cache: DType, batch: usize) -> (baton_testkit::TempDir, Model) {
    let (dir, path) = synth_model("kv-copy", shape, DType::Q8_0, 5);
    let options = LoadOptions { context: Some(256), batch, slots: 3, cache_type: cache, ..LoadOptions::default() };
    let model = Model::load(&path, baton_cpu::open(&["cpu"]).expect("cpu").remove(0), &options).expect("load");
    (dir, model)
}

/// Logits of slot `slot` evaluating `tokens[from..]` from position `from`,
/// 16 at a time, every position's.
fn rest(model: &mut Model, slot: usize, tokens: &[u32], from: usize) -> Vec<f32> {
    let mut out = Vec::new();
    let mut at = from;
    for chunk in tokens[from..].chunks(16) {
        out.extend_from_slice(model.eval_slot(slot, chunk, at, Logits::All).expect("eval"));
        at += chunk.len();
    }
    out
}

#[test]
fn a_copied_prefix_continues_with_the_bits_of_an_evaluated_one() {
    for (shape, cache) in
        [(SynthShape::Tiny, DType::F32), (SynthShape::Tiny256, DType::Q8_0), (SynthShape::Gemma3, DType::F16)]
    {
        let (_dir, mut model) = load(shape, cache, 16);
        let tokens: Vec<u32> = (0..120u32).map(|i| (i * 29 + 3) % 512).collect();
        // Slot 0 evaluates all of it; slot 1 takes its first 96 positions by
        // copy (slot 0 went no further than 120: its rings still hold
        // them), after slot 2 wrote other tokens there's nothing shared.
        let whole = rest(&mut model, 0, &tokens, 0);
        let other: Vec<u32> = (0..100u32).map(|i| (i * 7 + 1) % 512).collect();
        rest(&mut model, 1, &other, 0);
        assert!(model.copy_prefix(0, 1, 96).expect("copy"), "{shape}");
        let vocab = model.config().vocab;
        let copied = rest(&mut model, 1, &tokens, 96);
        assert!(copied == whole[96 * vocab..], "{shape} {cache}: a copied prefix changes the logits");
        // The source goes on unchanged.
        assert!(
            rest(&mut model, 0, &[tokens.clone(), vec![5, 6]].concat(), 120)
                == rest(&mut model, 1, &[tokens.clone(), vec![5, 6]].concat(), 120)
        );
    }
}

#[test]
fn copies_that_cannot_be_served_are_refused() {
    // Gemma 3's rings of 64 rows (window 8, batches of 16): after 200
    // positions, the ring no longer holds what position 100 needs.
    let (_dir, mut model) = load(SynthShape::Gemma3, DType::F32, 16);
    let tokens: Vec<u32> = (0..200u32).map(|i| (i * 13 + 5) % 512).collect();
    rest(&mut model, 0, &tokens, 0);
    assert!(!model.copy_prefix(0, 1, 100).expect("no error"), "a ring that lost the window");
    assert!(model.copy_prefix(0, 1, 150).expect("copy"), "a ring that holds it");
    assert!(model.copy_prefix(0, 0, 10).expect("copy to itself"));
    assert!(model.copy_prefix(0, 3, 10).is_err(), "no slot 3");
    assert!(model.copy_prefix(0, 1, 257).is_err(), "past the context");
}

#[test]
fn a_saved_prefix_written_back_continues_with_the_bits_of_an_evaluated_one() {
    for (shape, cache) in
        [(SynthShape::Tiny, DType::F32), (SynthShape::Tiny256, DType::Q8_0), (SynthShape::Gemma3, DType::F16)]
    {
        let (_dir, mut model) = load(shape, cache, 16);
        let tokens: Vec<u32> = (0..120u32).map(|i| (i * 31 + 9) % 512).collect();
        let whole = rest(&mut model, 0, &tokens, 0);
        let saved = model.save_prefix(0, 96).expect("save").expect("served");
        assert_eq!(saved.len(), 96);
        assert!(saved.bytes() > 0);
        // Slot 0 is reused for other tokens; slot 2 gets the saved prefix.
        let other: Vec<u32> = (0..100u32).map(|i| (i * 7 + 1) % 512).collect();
        rest(&mut model, 0, &other, 0);
        rest(&mut model, 2, &other, 0);
        assert!(model.restore_prefix(2, &saved).expect("restore"));
        let vocab = model.config().vocab;
        assert!(
            rest(&mut model, 2, &tokens, 96) == whole[96 * vocab..],
            "{shape} {cache}: a restored prefix changes the logits"
        );
    }
    // Refused: a ring that lost the window, no position; and a slot or a
    // geometry the cache does not have is an error.
    let (_dir, mut model) = load(SynthShape::Gemma3, DType::F32, 16);
    let tokens: Vec<u32> = (0..200u32).map(|i| (i * 13 + 5) % 512).collect();
    rest(&mut model, 0, &tokens, 0);
    assert!(model.save_prefix(0, 100).expect("no error").is_none());
    assert!(model.save_prefix(0, 0).expect("no error").is_none());
    let saved = model.save_prefix(0, 150).expect("save").expect("served");
    // Its rings (64 rows, window 8) hold positions up to 200: a prompt that
    // parts from it at 150 may resume there, one that parts at 100 may not.
    assert!(model.restorable(&saved, 150) && model.restorable(&saved, 143) && model.restorable(&saved, 0));
    assert!(!model.restorable(&saved, 142) && !model.restorable(&saved, 100));
    assert!(model.restore_prefix(1, &saved).expect("restore"));
    assert!(model.resumable(1, 143) && !model.resumable(1, 142), "the restored slot's frontier is the saved one");
    assert!(model.restore_prefix(3, &saved).is_err(), "no slot 3");
    let (_dir2, mut other) = load(SynthShape::Tiny, DType::F32, 16);
    assert!(other.restore_prefix(0, &saved).is_err(), "another model's prefix");
}
