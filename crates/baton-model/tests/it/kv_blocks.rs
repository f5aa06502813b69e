//! The paged KV cache (`LoadOptions::kv_blocks`, the default on the CPU):
//! the same bits as a slot per sequence for every cache kind (every
//! position, rings, a quantized type, recurrent state beside it), a prefix
//! copied between slots held once and copied only where a slot writes into
//! a block it shares, and a pool that runs out refusing the step, never
//! corrupting another sequence.

use baton_core::DType;
use baton_model::{KvPool, LoadOptions, Logits, Model, ModelError, SeqStep};
use baton_synth::SynthShape;
use baton_testkit::synth::synth_model;

fn load(path: &std::path::Path, cache: DType, (blocks, pool): (bool, Option<usize>)) -> Model {
    let options = LoadOptions {
        context: Some(512),
        batch: 64,
        slots: 4,
        cache_type: cache,
        kv_blocks: blocks,
        kv_pool: pool.map_or(KvPool::default(), KvPool::Blocks),
        ..LoadOptions::default()
    };
    Model::load(path, baton_cpu::open(&["cpu"]).expect("cpu").remove(0), &options).expect("load")
}

fn tokens(n: usize, seed: u32) -> Vec<u32> {
    (0..n as u32).map(|i| (i * 29 + seed * 7 + 3) % 500).collect()
}

/// Every logit of slot `slot` evaluating `tokens` from position `from`,
/// 64 at a time.
fn all_logits(model: &mut Model, slot: usize, tokens: &[u32], from: usize) -> Vec<f32> {
    let mut out = Vec::new();
    for (i, chunk) in tokens.chunks(64).enumerate() {
        out.extend_from_slice(model.eval_slot(slot, chunk, from + i * 64, Logits::All).expect("eval"));
    }
    out
}

/// Prompts of three slots (of mixed lengths, 64 at a time), then eight
/// batched decode steps of all three: every logit.
fn run(model: &mut Model) -> Vec<f32> {
    let mut out = Vec::new();
    let prompts = [tokens(150, 1), tokens(64, 2), tokens(201, 3)];
    for (slot, prompt) in prompts.iter().enumerate() {
        out.extend(all_logits(model, slot, prompt, 0));
    }
    for step in 0..8u32 {
        let next: Vec<[u32; 1]> = (0..3u32).map(|s| [(step * 31 + s * 5) % 500]).collect();
        let seqs: Vec<SeqStep<'_>> =
            (0..3).map(|s| SeqStep { slot: s, past: prompts[s].len() + step as usize, tokens: &next[s] }).collect();
        out.extend_from_slice(model.eval_batch(&seqs).expect("decode"));
    }
    out
}

#[test]
fn a_paged_cache_gives_the_bits_of_a_slot_per_sequence() {
    for (shape, cache) in [
        (SynthShape::Tiny, DType::F32),
        (SynthShape::Tiny256, DType::Q8_0),
        (SynthShape::Gemma3, DType::F16),
        (SynthShape::Qwen35, DType::F32),
    ] {
        let (_dir, path) = synth_model("kv-blocks", shape, DType::Q8_0, 9);
        let mut paged = load(&path, cache, (true, None));
        let mut slots = load(&path, cache, (false, None));
        assert!(paged.kv_blocks().is_some() && slots.kv_blocks().is_none(), "{shape}");
        assert!(run(&mut paged) == run(&mut slots), "{shape} {cache}: paged logits differ");
        let usage = paged.kv_blocks().expect("paged");
        // 158, 72 and 209 positions: 3 + 2 + 4 blocks of 64, none shared.
        assert_eq!((usage.used, usage.shared, usage.held), (9, 0, 9), "{shape}");
    }
}

#[test]
fn a_shared_prefix_is_held_once_and_each_slot_goes_on_with_the_bits_of_evaluating_it() {
    let (_dir, path) = synth_model("kv-blocks-share", SynthShape::Tiny256, DType::Q8_0, 9);
    let mut paged = load(&path, DType::F16, (true, None));
    let mut fresh = load(&path, DType::F16, (false, None));
    let prefix = tokens(300, 4);
    all_logits(&mut paged, 0, &prefix, 0);
    for to in 1..4 {
        assert!(paged.copy_prefix(0, to, 300).expect("share"));
    }
    let usage = paged.kv_blocks().expect("paged");
    assert_eq!((usage.used, usage.shared, usage.held), (5, 5, 20), "300 positions in 5 blocks, held by 4 slots");
    // Each slot goes on differently from position 300 (inside the fifth
    // block: each writer gets its own copy of that block only).
    for slot in 1..4 {
        let rest = tokens(20, 10 + slot as u32);
        let got = all_logits(&mut paged, slot, &rest, 300);
        let want = all_logits(&mut fresh, 0, &[prefix.clone(), rest].concat(), 0);
        let vocab = fresh.config().vocab;
        assert!(got == want[300 * vocab..], "slot {slot}: a shared prefix changed the logits");
    }
    let usage = paged.kv_blocks().expect("paged");
    assert_eq!((usage.used, usage.shared), (8, 4), "three copies of the last block; four blocks still shared");
    paged.clear_slot(0).expect("clear");
    assert_eq!(paged.kv_blocks().expect("paged").used, 7, "slot 0's own last block freed");
}

#[test]
fn a_full_pool_refuses_the_step_and_a_cleared_slot_makes_room() {
    let (_dir, path) = synth_model("kv-blocks-full", SynthShape::Tiny, DType::Q8_0, 9);
    let mut model = load(&path, DType::F32, (true, Some(4)));
    let a = tokens(200, 5);
    let first = all_logits(&mut model, 0, &a, 0);
    let vocab = model.config().vocab;
    let err = model.eval_slot(1, &tokens(10, 6), 0, Logits::Last).expect_err("no free block");
    assert!(matches!(err, ModelError::PoolFull(_)), "{err}");
    assert!(err.to_string().contains("has 0 free; this step needs 1"), "{err}");
    // Slot 0 was not touched: evaluating it again gives the same bits.
    assert_eq!(model.eval_slot(0, &a[199..], 199, Logits::Last).expect("again"), &first[199 * vocab..]);
    model.clear_slot(0).expect("clear");
    model.eval_slot(1, &tokens(10, 6), 0, Logits::Last).expect("room after the clear");
    assert!(model.clear_slot(4).is_err(), "no slot 4");
}

/// The pool sized in positions or bytes holds the blocks they make, each
/// of the bytes the cache's layers give a block (Gemma 3's rings and
/// qwen35's recurrent layers are outside it); a size below one block is
/// refused, naming it.
#[test]
fn a_pool_sized_in_positions_or_bytes_holds_those_blocks() {
    for shape in [SynthShape::Tiny, SynthShape::Gemma3, SynthShape::Qwen35] {
        let (_dir, path) = synth_model("kv-blocks-size", shape, DType::Q8_0, 9);
        let with = |pool: KvPool| {
            let options =
                LoadOptions { context: Some(512), batch: 64, slots: 4, kv_pool: pool, ..LoadOptions::default() };
            Model::load(&path, baton_cpu::open(&["cpu"]).expect("cpu").remove(0), &options)
        };
        let whole = with(KvPool::default()).expect("load");
        let size = whole.kv_pool_size().expect("paged");
        assert_eq!((size.blocks, size.whole, size.budget), (32, 32, None), "{shape:?}: every slot's context");
        assert_eq!(size.block_bytes, whole.kv_block_bytes(), "{shape:?}");
        let outside = whole.memory().kv_cache - 32 * size.block_bytes as u64;
        let positions = with(KvPool::Positions(130)).expect("load");
        assert_eq!(positions.kv_blocks().expect("paged").blocks, 3, "{shape:?}: 130 positions round up");
        assert_eq!(positions.memory().kv_cache, outside + 3 * size.block_bytes as u64, "{shape:?}");
        let bytes = with(KvPool::Bytes(5 * size.block_bytes as u64 + 1)).expect("load");
        assert_eq!(bytes.kv_blocks().expect("paged").blocks, 5, "{shape:?}");
        let err = with(KvPool::Bytes(size.block_bytes as u64 - 1)).err().expect("below one block");
        assert!(err.to_string().contains("less than one block"), "{err}");
    }
}

/// A batched step refused midway (the first sequence got its blocks, and a
/// copy of the block it shares; the second found none): every slot still
/// reads what it wrote, and the step tried again once there is room gives
/// the bits of a slot per sequence.
#[test]
fn a_batched_step_refused_midway_leaves_every_slot_readable() {
    let (_dir, path) = synth_model("kv-blocks-midway", SynthShape::Tiny, DType::Q8_0, 9);
    // 100 positions in slot 0 (2 blocks) shared by slot 1, 60 in slot 2
    // (1 block): one block of the pool of 4 is free.
    let mut model = load(&path, DType::F32, (true, Some(4)));
    let mut fresh = load(&path, DType::F32, (false, None));
    let shared = tokens(100, 7);
    all_logits(&mut model, 0, &shared, 0);
    assert!(model.copy_prefix(0, 1, 100).expect("share"));
    let third = tokens(60, 8);
    all_logits(&mut model, 2, &third, 0);
    // Slot 1 writes into the block it shares (a copy: the free block);
    // slot 2 then needs a block of its own for positions 64..: none.
    let (a, b) = ([11u32], tokens(8, 9));
    let seqs = [SeqStep { slot: 1, past: 100, tokens: &a }, SeqStep { slot: 2, past: 60, tokens: &b }];
    let err = model.eval_batch(&seqs).expect_err("no block for slot 2");
    assert!(matches!(err, ModelError::PoolFull(_)), "{err}");
    model.clear_slot(0).expect("clear");
    let got = model.eval_batch(&seqs).expect("room after the clear").to_vec();
    let vocab = fresh.config().vocab;
    let want_a = all_logits(&mut fresh, 0, &[shared.clone(), a.to_vec()].concat(), 0);
    let want_b = all_logits(&mut fresh, 1, &[third.clone(), b.clone()].concat(), 0);
    assert!(got[..vocab] == want_a[100 * vocab..], "slot 1 reads the copy of the block it shared");
    assert!(got[vocab..] == want_b[67 * vocab..], "slot 2's last row");
}
