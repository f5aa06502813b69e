//! Windowed shares ([`SplitTensor::windowed`]): a matrix cut along its
//! rows' length, mapped whole by each device from a file, each device
//! reading its share as a strided view. Its product gives the bits of the
//! same shares copied into device memory, it reads back as the file's
//! bytes, and a view of it is refused with an error.

use std::io::Write;
use std::sync::Arc;

use baton_composite::{CompositeBuffer, CompositeDevice, TensorSplit};
use baton_conformance::random;
use baton_core::backend::{Bindings, Device, TensorRef};
use baton_core::graph::{Flags, Graph};
use baton_core::sync::WaitPolicy;
use baton_core::DType;
use baton_testkit::TempDir;

const M: usize = 3;
const N: usize = 8;
const K: usize = 512;
/// Bytes before the matrix in the file: its mapping starts inside a page.
const SKIP: usize = 100;

fn device() -> CompositeDevice {
    let inner = baton_cpu::open(&["cpu:0", "cpu:1"]).expect("cpus");
    CompositeDevice::new(inner, WaitPolicy::Block).expect("composite")
}

/// `N` rows of `K` values of `dtype` (quantized from random values).
fn matrix(dtype: DType) -> Vec<u8> {
    let values = random(N * K, 7);
    let row = dtype.row_bytes(K).expect("whole blocks");
    let mut bytes = vec![0u8; N * row];
    for (src, dst) in values.chunks_exact(K).zip(bytes.chunks_exact_mut(row)) {
        baton_kernels::quantize_row(dtype, src, dst).expect("quantize");
    }
    bytes
}

/// Device 0 holds the first 256 values of each row, device 1 the rest.
fn cut() -> TensorSplit {
    TensorSplit::Split { axis: 1, parts: vec![vec![0..256], vec![256..K]] }
}

/// `o = x · wᵀ` ([M, N]), `x` cut as `w` is where `cut_x` is the composite
/// device (the model's case: partial sums, then an all-reduce), else whole
/// on every device.
fn product(device: &dyn Device, cut_x: Option<&CompositeDevice>, w: &TensorRef, x: &[f32]) -> Result<Vec<f32>, String> {
    let mut g = Graph::new();
    let xl = g.leaf("x", DType::F32, &[M, K], Flags::INPUT).map_err(|e| e.to_string())?;
    let wl = g.leaf("w", w.dtype(), &[N, K], Flags::WEIGHT).map_err(|e| e.to_string())?;
    let o = g.matmul(xl, wl).map_err(|e| e.to_string())?;
    g.mark(o, Flags::OUTPUT).map_err(|e| e.to_string())?;
    g.set_name(o, "o").map_err(|e| e.to_string())?;
    run(device, cut_x, Arc::new(g), w, x)
}

fn run(
    device: &dyn Device,
    cut_x: Option<&CompositeDevice>,
    g: Arc<Graph>,
    w: &TensorRef,
    x: &[f32],
) -> Result<Vec<f32>, String> {
    let s = device.new_stream().map_err(|e| e.to_string())?;
    let xt = match cut_x {
        Some(composite) => composite.alloc_split(DType::F32, &[M, K], cut()),
        None => device.alloc_tensor(DType::F32, &[M, K]).map_err(Into::into),
    }
    .map_err(|e| e.to_string())?;
    let o = device.alloc_tensor(DType::F32, &[M, N]).map_err(|e| e.to_string())?;
    drop(s.write_async(&xt, x.to_vec()).map_err(|e| e.to_string())?);
    let mut b = Bindings::new(&g);
    for (name, t) in [("x", &xt), ("w", w), ("o", &o)] {
        b.bind_name(name, t.clone()).map_err(|e| e.to_string())?;
    }
    s.compute(b).map_err(|e| e.to_string())?;
    let pending = s.read_into_async(&o, vec![0f32; M * N]).map_err(|e| e.to_string())?;
    pending.wait().map_err(|e| e.to_string())
}

fn bits(x: &[f32]) -> Vec<u32> {
    x.iter().map(|v| v.to_bits()).collect()
}

#[test]
fn a_matrix_cut_along_its_rows_is_mapped_whole_and_multiplies_as_copied_shares() {
    let dir = TempDir::new("windows");
    let x = random(M * K, 11);
    for dtype in [DType::F32, DType::F16, DType::Q8_0, DType::Q4_1, DType::Q4_K] {
        let bytes = matrix(dtype);
        let path = dir.file(&format!("w-{dtype}.bin"));
        let mut file = std::fs::File::create(&path).expect("create");
        file.write_all(&[0x5a; SKIP]).and_then(|()| file.write_all(&bytes)).expect("write");
        drop(file);
        let file = std::fs::File::open(&path).expect("open");
        let device = device();
        let mapped = device
            .map_split(&file, SKIP as u64, (dtype, &[N, K]), cut())
            .expect("map")
            .expect("CPU devices map a cut along the rows");
        let buffer = CompositeBuffer::of(mapped.buffer()).expect("composite");
        assert!(buffer.windowed(), "{dtype}: each device maps the whole matrix");
        assert!(mapped.buffer().is_sealed(), "{dtype}: mapped weights are sealed");

        let copied = device.alloc_split(dtype, &[N, K], cut()).expect("alloc");
        copied.buffer().declare_weights();
        let s = device.new_stream().expect("stream");
        drop(s.write_async(&copied, bytes.clone()).expect("write"));
        assert!(!CompositeBuffer::of(copied.buffer()).expect("composite").windowed());

        let a = product(&device, Some(&device), &mapped, &x).expect("mapped");
        let b = product(&device, Some(&device), &copied, &x).expect("copied");
        assert_eq!(bits(&a), bits(&b), "{dtype}: windowed shares give the bits of copied ones");
        assert!(a.iter().all(|v| v.is_finite()) && a.iter().any(|&v| v != 0.0), "{dtype}: a real product");
        // Again: the packed shares (the pages given back) give the same.
        assert_eq!(
            bits(&product(&device, Some(&device), &mapped, &x).expect("again")),
            bits(&a),
            "{dtype}: packed once"
        );

        // Wanted whole (a mirrored `x`), a windowed matrix needs no gate:
        // each device multiplies the whole of it, as one device does.
        let whole = product(&device, None, &mapped, &x).expect("whole");
        let one = baton_cpu::open(&["cpu:0"]).expect("cpu").remove(0);
        let alone = one.alloc_tensor(dtype, &[N, K]).expect("alloc");
        alone.buffer().declare_weights();
        drop(one.new_stream().expect("stream").write_async(&alone, bytes.clone()).expect("write"));
        let want = product(&*one, None, &alone, &x).expect("one device");
        assert_eq!(bits(&whole), bits(&want), "{dtype}: the whole windowed matrix is the matrix");

        let back = s.read_into_async(&mapped, vec![0u8; bytes.len()]).expect("read").wait().expect("read back");
        assert!(back == bytes, "{dtype}: the windowed tensor reads back as the file's bytes");
    }
}

#[test]
fn a_view_of_a_windowed_matrix_is_an_error() {
    let dir = TempDir::new("windows-view");
    let bytes = matrix(DType::F32);
    let path = dir.file("w.bin");
    std::fs::write(&path, &bytes).expect("write");
    let file = std::fs::File::open(&path).expect("open");
    let device = device();
    let mapped = device.map_split(&file, 0, (DType::F32, &[N, K]), cut()).expect("map").expect("mapped");
    // `o = x · wᵀ` through a view of the windowed weight (a narrow to all
    // of its rows).
    let mut g = Graph::new();
    let xl = g.leaf("x", DType::F32, &[M, K], Flags::INPUT).expect("x");
    let wl = g.leaf("w", DType::F32, &[N, K], Flags::WEIGHT).expect("w");
    let view = g.narrow(wl, 0, 0, N).expect("narrow");
    let o = g.matmul(xl, view).expect("matmul");
    g.mark(o, Flags::OUTPUT).expect("mark");
    g.set_name(o, "o").expect("name");
    let err =
        run(&device, Some(&device), Arc::new(g), &mapped, &random(M * K, 3)).expect_err("a view of a windowed tensor");
    assert!(err.contains("windowed"), "the error says why: {err}");
    // The device works on after it.
    product(&device, Some(&device), &mapped, &random(M * K, 5)).expect("the plain product after the refused one");
}
