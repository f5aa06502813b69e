//! Gemma 4 (the gemma4 and gemma4moe toys: sliding and full layers of
//! different head sizes, layers that read an earlier layer's keys and
//! values, per-layer embeddings, experts): batched steps keep each
//! sequence's bits, prefixes move between slots and host memory with
//! their bits, a q8_0 cache stays close to an f32 one, and metadata that
//! does not fit the tensors is named in the error.

use baton_core::DType;
use baton_model::{LoadOptions, Logits, Model};
use baton_synth::SynthShape;
use baton_testkit::synth::synth_model;

use super::bad_input::{assert_patched_keys_named, load as load_file};
use super::batch::{assert_batched_match_alone, assert_batched_match_alone_on, devices, options};

/// Sequences of different lengths joining at different steps, prompts in
/// chunks, attention in slots and per sequence: each sequence's logits are
/// those it gets alone. The experts toy also split by layer over two
/// devices; the dense toy's last four layers read the keys and values of
/// layers 2 and 3, so a split that puts them apart is refused, naming the
/// key, and one that keeps them together runs.
#[test]
fn batched_gemma4_sequences_match_each_sequence_alone() {
    for dtype in [DType::F32, DType::Q8_0] {
        let (_dir, path) = synth_model("batch-gemma4", SynthShape::Gemma4, dtype, 17);
        assert_batched_match_alone_on(&path, &format!("gemma4 {dtype}"), &[&["cpu"]]);
        let err = Model::load_split(&path, devices(&["cpu:0", "cpu:1"]), &options(2)).err().expect("refused");
        assert!(err.to_string().contains("gemma4.attention.shared_kv_layers"), "{err}");
        // Layers 0 and 1 on one device, 2 to 7 on the other.
        let together = LoadOptions { tensor_split: vec![1.0, 3.0], ..options(2) };
        Model::load_split(&path, devices(&["cpu:0", "cpu:1"]), &together).expect("the sharing layers together");
    }
    let (_dir, path) = synth_model("batch-gemma4", SynthShape::Gemma4Moe, DType::Q8_0, 17);
    assert_batched_match_alone(&path, "gemma4moe q8_0");
}

fn load(shape: SynthShape, cache: DType) -> (baton_testkit::TempDir, Model) {
    let (dir, path) = synth_model("gemma4-prefix", shape, DType::Q8_0, 5);
    let options = LoadOptions { context: Some(256), batch: 16, slots: 3, cache_type: cache, ..LoadOptions::default() };
    let model = Model::load(&path, baton_cpu::open(&["cpu"]).expect("cpu").remove(0), &options).expect("load");
    (dir, model)
}

/// Every position's logits of slot `slot` evaluating `tokens[from..]`, 16
/// at a time.
fn rest(model: &mut Model, slot: usize, tokens: &[u32], from: usize) -> Vec<f32> {
    let mut out = Vec::new();
    for (i, chunk) in tokens[from..].chunks(16).enumerate() {
        out.extend_from_slice(model.eval_slot(slot, chunk, from + 16 * i, Logits::All).expect("eval"));
    }
    out
}

/// A prefix copied to another slot, or saved and written back, continues
/// with the bits of evaluating it, with an f16 and a q8_0 cache (the
/// sharing layers' keys and values are their source layers': copied once).
#[test]
fn a_gemma4_prefix_copied_or_restored_continues_with_its_bits() {
    for (shape, cache) in [(SynthShape::Gemma4, DType::F16), (SynthShape::Gemma4, DType::Q8_0)] {
        let (_dir, mut model) = load(shape, cache);
        let vocab = model.config().vocab;
        let tokens: Vec<u32> = (0..120u32).map(|i| (i * 29 + 3) % 512).collect();
        let other: Vec<u32> = (0..100u32).map(|i| (i * 7 + 1) % 512).collect();
        let whole = rest(&mut model, 0, &tokens, 0);
        let saved = model.save_prefix(0, 96).expect("save").expect("served");
        rest(&mut model, 1, &other, 0);
        assert!(model.copy_prefix(0, 1, 96).expect("copy"), "{shape} {cache}");
        assert!(rest(&mut model, 1, &tokens, 96) == whole[96 * vocab..], "{shape} {cache}: a copied prefix");
        rest(&mut model, 2, &other, 0);
        assert!(model.restore_prefix(2, &saved).expect("restore"));
        assert!(rest(&mut model, 2, &tokens, 96) == whole[96 * vocab..], "{shape} {cache}: a restored prefix");
    }
}

/// A q8_0 cache (keys and values rounded to 8 bits per 32) gives logits
/// close to an f32 cache's over 120 positions, on both toys: NMSE 1.6e-3
/// (dense) and 2.3e-2 (experts, where the rounding now and then reorders
/// near-tied router logits).
#[test]
fn a_gemma4_q8_0_cache_stays_close_to_an_f32_one() {
    for shape in [SynthShape::Gemma4, SynthShape::Gemma4Moe] {
        let tokens: Vec<u32> = (0..120u32).map(|i| (i * 31 + 9) % 512).collect();
        let f32s = rest(&mut load(shape, DType::F32).1, 0, &tokens, 0);
        let q8 = rest(&mut load(shape, DType::Q8_0).1, 0, &tokens, 0);
        let err: f64 = f32s.iter().zip(&q8).map(|(a, b)| f64::from(a - b).powi(2)).sum();
        let norm: f64 = f32s.iter().map(|a| f64::from(*a).powi(2)).sum();
        println!("{shape}: q8_0 cache against f32, logits NMSE {:.3e}", err / norm);
        assert!(f32s != q8, "{shape}: the cache type changes nothing");
        assert!(err / norm < 5e-2, "{shape}: a q8_0 cache moves the logits by NMSE {:.3e}", err / norm);
    }
}

/// Gemma 4 metadata that does not fit the tensors, or is out of bounds,
/// is refused with an error naming the key or the tensor.
#[test]
fn gemma4_metadata_that_does_not_fit_is_named_in_the_error() {
    let dense: &[(&str, u32, &str)] = &[
        ("gemma4.attention.key_length_swa", 16, "gemma4.attention.key_length_swa"),
        ("gemma4.attention.value_length_swa", 16, "gemma4.attention.value_length_swa"),
        ("gemma4.attention.shared_kv_layers", 5, "gemma4.attention.shared_kv_layers"),
        ("gemma4.attention.shared_kv_layers", 9, "gemma4.attention.shared_kv_layers"),
        ("gemma4.attention.shared_kv_layers", 0, "attn_k"),
        ("gemma4.embedding_length_per_layer_input", 8, "per_layer_token_embd"),
        ("gemma4.rope.dimension_count_swa", 48, "gemma4.rope.dimension_count_swa"),
    ];
    let experts: &[(&str, u32, &str)] = &[
        ("gemma4.expert_count", 8, "ffn_gate_inp"),
        ("gemma4.expert_used_count", 17, "gemma4.expert_used_count"),
        ("gemma4.expert_feed_forward_length", 16, "ffn_gate_up_exps"),
    ];
    for (shape, cases) in [(SynthShape::Gemma4, dense), (SynthShape::Gemma4Moe, experts)] {
        let (dir, path) = synth_model("bad-gemma4", shape, DType::Q8_0, 3);
        assert_patched_keys_named(&dir, &std::fs::read(&path).expect("read"), cases);
    }
    // The dense toy's per-layer feed-forward widths (E2B's kind: 128, the
    // four KV-sharing layers 256): a width of 0 names the key, one that
    // does not fit its layer's tensors names the tensor.
    let (dir, path) = synth_model("bad-gemma4-ffn", SynthShape::Gemma4, DType::Q8_0, 3);
    let bytes = std::fs::read(&path).expect("read");
    let key = "gemma4.feed_forward_length";
    // GGUF: key string, type array (9), element type u32 (4), count u64, values.
    let values = bytes.windows(key.len()).position(|w| w == key.as_bytes()).expect("the key") + key.len() + 16;
    let widths: Vec<u32> =
        bytes[values..values + 32].chunks_exact(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    assert_eq!(widths, [128, 128, 128, 128, 256, 256, 256, 256], "the toy's widths");
    for (layer, width, named) in [(0, 0u32, key), (0, 64, "blk.0.ffn_gate"), (7, 128, "blk.7.ffn_gate")] {
        let mut changed = bytes.clone();
        changed[values + 4 * layer..values + 4 * layer + 4].copy_from_slice(&width.to_le_bytes());
        let file = dir.file("changed.gguf");
        std::fs::write(&file, &changed).expect("write");
        let err = load_file(&file).err().unwrap_or_else(|| panic!("layer {layer} width {width} loaded"));
        assert!(err.to_string().contains(named), "layer {layer} width {width}: {err}");
    }
}

/// The cache holds keys and values for the layers that have their own
/// only: the dense toy's layers 0 to 3 (sliding layers of 2 KV heads of 32
/// in rings of 64 rows: window 8 and batches of 16; a full layer of 1 KV
/// head of 64 over the context of 256), for 3 slots, f32 keys and values.
#[test]
fn the_sharing_layers_hold_no_keys_or_values_of_their_own() {
    let (_dir, model) = load(SynthShape::Gemma4, DType::F32);
    let (slots, bytes) = (3, 4 * 2);
    let sliding = slots * 64 * 2 * 32 * bytes;
    let full = slots * 256 * 64 * bytes;
    assert_eq!(model.memory().kv_cache, (3 * sliding + full) as u64);
}
