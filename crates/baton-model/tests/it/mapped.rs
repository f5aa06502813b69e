//! Weights read in place from the file (`LoadOptions::mmap`, the default)
//! give bit for bit the logits of weights copied into device memory
//! (`--no-mmap`), for every weight type the synthetic models come in, and
//! the model's memory report says which way they are held.

use baton_core::DType;
use baton_model::{LoadOptions, Logits, Model};
use baton_testkit::synth::tiny_model;

fn bits(x: &[f32]) -> Vec<u32> {
    x.iter().map(|v| v.to_bits()).collect()
}

/// A prompt, then decode steps: every step's logits, as bits.
fn steps(model: &mut Model) -> Vec<Vec<u32>> {
    let prompt = [3u32, 41, 7, 260, 19, 2, 77];
    let mut out = vec![bits(model.eval(&prompt, 0, Logits::All).expect("prompt"))];
    for (i, t) in [11u32, 300, 5].into_iter().enumerate() {
        out.push(bits(model.eval(&[t], prompt.len() + i, Logits::Last).expect("decode")));
    }
    out
}

#[test]
fn mapped_weights_give_the_logits_of_copied_ones() {
    for dtype in [DType::Q4_K, DType::Q8_0, DType::Q4_1, DType::F16] {
        let (_dir, path) = tiny_model("mapped", dtype, 5);
        let load = |mmap: bool| {
            let options = LoadOptions { context: Some(32), batch: 8, mmap, ..LoadOptions::default() };
            let device = baton_cpu::open(&["cpu:0"]).expect("device").remove(0);
            Model::load(&path, device, &options).expect("load")
        };
        let mut copied = load(false);
        let mut mapped = load(true);
        let (c, m) = (copied.memory(), mapped.memory());
        assert_eq!((c.weights_mapped, m.weights_copied), (0, 0), "{dtype}: {c:?} {m:?}");
        assert!(c.weights_copied > 0 && m.weights_mapped <= m.file, "{dtype}: {c:?} {m:?}");
        assert_eq!(m.devices.mapped, m.weights_mapped, "{dtype}: the device counts the mapping: {m:?}");
        assert!(m.devices.allocated < c.devices.allocated, "{dtype}: mapping allocates no weights");
        assert_eq!(steps(&mut mapped), steps(&mut copied), "{dtype}: mapped and copied weights differ");
    }
}

#[test]
fn the_logits_buffer_grows_only_when_every_tokens_logits_are_asked_for() {
    let (_dir, path) = tiny_model("logits-io", DType::Q8_0, 9);
    let options = LoadOptions { context: Some(64), batch: 32, ..LoadOptions::default() };
    let device = baton_cpu::open(&["cpu:0"]).expect("device").remove(0);
    let mut model = Model::load(&path, device, &options).expect("load");
    let vocab = model.config().vocab as u64;
    let io = model.memory().io;
    let prompt: Vec<u32> = (1..=20).collect();
    model.eval_prompt(&prompt, 0).expect("prompt");
    assert_eq!(model.memory().io, io, "a prompt's last logits need one row");
    let all = model.eval(&prompt, 0, Logits::All).expect("every row").to_vec();
    assert_eq!(all.len() as u64, 20 * vocab);
    assert_eq!(model.memory().io, io + 19 * vocab * 4, "grown to the rows asked for");
}

/// Under tensor parallelism each inner device maps its own share, with the
/// logits of shares copied into device memory, bit for bit: where the share
/// is one range of the file (matrices cut by rows, mirrored tensors), that
/// range; for a matrix cut along its rows' length (`attn_output`,
/// `ffn_down`), the whole matrix, read as a strided view (windowed), so
/// nothing is copied.
#[test]
fn tensor_parallel_shares_mapped_give_the_logits_of_copied_ones() {
    tensor_parallel_mapped_against_copied(&[DType::Q4_K, DType::Q8_0, DType::Q4_1, DType::F32]);
}

/// The same with packing off (`--no-repack`): the kernels read the
/// windowed shares' rows in place, strided.
#[test]
fn tensor_parallel_shares_mapped_and_read_unpacked_give_the_logits_of_copied_ones() {
    baton_cpu::set_repack(false);
    tensor_parallel_mapped_against_copied(&[DType::Q4_K, DType::Q8_0, DType::F16]);
}

fn tensor_parallel_mapped_against_copied(dtypes: &[DType]) {
    use std::sync::Arc;

    use baton_composite::CompositeDevice;
    use baton_core::sync::WaitPolicy;

    for &dtype in dtypes {
        let (_dir, path) = tiny_model("mapped-tp", dtype, 6);
        let load = |mmap: bool, exact: bool| {
            let options =
                LoadOptions { context: Some(32), batch: 8, mmap, tensor_exact: exact, ..LoadOptions::default() };
            let inner = baton_cpu::open(&["cpu:0", "cpu:1"]).expect("devices");
            let composite = CompositeDevice::new(inner, WaitPolicy::Block).expect("composite");
            Model::load_tensor_parallel(&path, Arc::new(composite), &options).expect("load")
        };
        for exact in [false, true] {
            let mut copied = load(false, exact);
            let mut mapped = load(true, exact);
            let (c, m) = (copied.memory(), mapped.memory());
            assert_eq!(c.weights_mapped, 0, "{dtype}: {c:?}");
            assert!(m.weights_mapped > m.weights_copied, "{dtype}: most weights mapped: {m:?}");
            assert_eq!(m.weights_copied, 0, "{dtype}: cuts along the rows are mapped too: {m:?}");
            assert!(m.devices.mapped >= m.weights_mapped, "{dtype}: the devices count their mappings: {m:?}");
            assert!(
                m.devices.allocated + m.weights_mapped <= c.devices.allocated,
                "{dtype}: mapped shares allocate nothing: {m:?} {c:?}"
            );
            assert_eq!(
                steps(&mut mapped),
                steps(&mut copied),
                "{dtype} exact={exact}: mapped and copied shares differ"
            );
        }
    }
}
