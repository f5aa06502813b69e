//! Sliding-window layers whose cache is a ring of their last positions
//! (Gemma 3's local layers when the context is longer than the window and
//! a prompt batch): the logits are bit for bit those of a cache of every
//! position, the cache is smaller, and an evaluation that would need
//! positions the ring has lost is refused.

use std::path::Path;

use baton_core::DType;
use baton_model::{LoadOptions, Logits, Model, ModelError};
use baton_synth::SynthShape;
use baton_testkit::synth::synth_model;

/// The Gemma 3 toy (local layers see 8 positions) with a context of 256,
/// evaluated in batches of `batch`.
fn gemma(path: &Path, batch: usize, cache: DType) -> Model {
    let options = LoadOptions { context: Some(256), batch, cache_type: cache, ..LoadOptions::default() };
    Model::load(path, baton_cpu::open(&["cpu"]).expect("cpu").remove(0), &options).expect("load")
}

/// Logits of 200 tokens fed 16 at a time, then 20 decoded one by one.
fn transcript(model: &mut Model) -> Vec<Vec<f32>> {
    let tokens: Vec<u32> = (0..220u32).map(|i| (i * 37 + 11) % 512).collect();
    let mut out = Vec::new();
    for (i, chunk) in tokens[..200].chunks(16).enumerate() {
        out.push(model.eval(chunk, i * 16, Logits::All).expect("eval").to_vec());
    }
    for (i, &t) in tokens[200..].iter().enumerate() {
        out.push(model.eval(&[t], 200 + i, Logits::Last).expect("eval").to_vec());
    }
    out
}

#[test]
fn a_ring_gives_the_bits_of_a_cache_of_every_position() {
    for cache in [DType::F32, DType::Q8_0] {
        let (_dir, path) = synth_model("ring-bits", SynthShape::Gemma3, DType::Q8_0, 3);
        // Batches of 16: rings of 64 rows (8 + 16, in blocks of 64); batches
        // of 256: no ring (it would be no smaller than the context).
        let mut ring = gemma(&path, 16, cache);
        let mut whole = gemma(&path, 256, cache);
        let (ring_kv, whole_kv) = (ring.memory().kv_cache, whole.memory().kv_cache);
        // 5 of the toy's 6 layers are local: 5 x 64 + 256 rows against 6 x 256.
        assert_eq!(ring_kv * 6 * 256, whole_kv * (5 * 64 + 256), "{cache}: KV bytes {ring_kv} against {whole_kv}");
        assert!(transcript(&mut ring) == transcript(&mut whole), "{cache}: the ring's logits differ");
    }
}

#[test]
fn a_rewind_past_what_the_ring_holds_is_refused() {
    let (_dir, path) = synth_model("ring-rewind", SynthShape::Gemma3, DType::F32, 3);
    let mut model = gemma(&path, 16, DType::F32);
    let tokens: Vec<u32> = (0..200u32).map(|i| (i * 13 + 5) % 512).collect();
    model.eval_prompt(&tokens, 0).expect("prompt");
    // The ring holds 64 rows for a window of 8: going back 57 positions
    // from the furthest written is fine, further is not.
    assert!(model.resumable(0, 143) && !model.resumable(0, 142) && model.resumable(0, 0));
    let err = model.eval(&tokens[100..101], 100, Logits::Last).expect_err("a rewind too deep");
    assert!(matches!(err, ModelError::RingRewound { slot: 0, past: 100, reach: 57 }), "{err}");
    assert!(err.to_string().contains("evaluate from position 0"), "{err}");
    model.eval(&tokens[150..151], 150, Logits::Last).expect("a rewind the ring allows");
    // Starting over from 0 resets what the ring may have lost.
    model.eval_prompt(&tokens[..20], 0).expect("from 0");
    model.eval(&tokens[10..11], 10, Logits::Last).expect("a rewind within the new run");
}

/// The keys and values a decode step reads (`decode_kv_bytes`, the
/// roofline of `baton bench` at a depth): a local layer reads its window's
/// rows, a global one every position, in the cache's types.
#[test]
fn a_decode_step_reads_the_rows_each_layer_sees() {
    for cache in [DType::F16, DType::Q8_0] {
        let (_dir, path) = synth_model("ring-read", SynthShape::Gemma3, DType::Q8_0, 3);
        // No ring: 6 layers of 256 rows, so one layer's row of keys and
        // values is the cache's bytes over 6 x 256.
        let whole = gemma(&path, 256, cache);
        let kv = whole.memory().kv_cache as usize;
        assert_eq!(kv % (6 * 256), 0, "{cache}: {kv} bytes");
        let row = kv / (6 * 256);
        // 5 local layers see 8 positions at most; the global one all.
        assert_eq!(whole.decode_kv_bytes(100), (5 * 8 + 100) * row, "{cache} at 100 positions");
        assert_eq!(whole.decode_kv_bytes(4), 6 * 4 * row, "{cache} at 4 positions");
        assert_eq!(whole.decode_kv_bytes(0), 0, "{cache} at no position");
    }
}
