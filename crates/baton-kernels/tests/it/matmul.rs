//! `y = x · Wᵀ` for every weight type against dequantize-then-multiply in f64,
//! on both instruction sets, with guard regions and padded strides.

use baton_core::parallel::{ScopedThreads, SingleThread};
use baton_kernels::{dequantize_row, matmul, matmul_columns, quantize_row, DType, KernelError, WEIGHT_TYPES};
use baton_kernels::{MatMut, MatRef, Scratch, WeightMatrix};

use crate::common::{for_each_isa, nmse, Guarded, Rng, SENTINEL};

/// NMSE bound per weight type, against the decoded weights. Float types:
/// f32 rounding only. Quantized types: dominated by rounding the activations
/// to 8 bits (`measured_quantized_error_is_within_bounds` prints the error;
/// figures in docs/measurements.md), bounded with 4x margin. K-quants round
/// the activations per 256 values (Q8_K), so a larger block maximum sets
/// the step: bounded at 2e-4.
fn bound(dtype: DType) -> f64 {
    if dtype.is_k_quant() {
        2e-4
    } else if dtype.is_quantized() {
        1e-4
    } else {
        1e-7
    }
}

/// Padding bytes after each encoded weight row (exercises the byte stride).
const W_PAD: usize = 6;

struct Problem {
    w_bytes: Vec<u8>,
    w_stride: usize,
    /// Decoded weights, row-major `n x k`.
    w_decoded: Vec<f64>,
    x: Vec<f32>,
    x_stride: usize,
    m: usize,
    n: usize,
    k: usize,
}

impl Problem {
    fn new(dtype: DType, m: usize, n: usize, k: usize, seed: u64) -> Problem {
        let mut rng = Rng::new(seed);
        let row_bytes = dtype.row_bytes(k).expect("whole blocks");
        let w_stride = row_bytes + W_PAD;
        let mut w_bytes = vec![0xa5u8; n * w_stride];
        let mut w_decoded = Vec::with_capacity(n * k);
        let mut decoded = vec![0.0f32; k];
        for r in 0..n {
            let row = rng.vec(k, 0.5);
            let bytes = &mut w_bytes[r * w_stride..][..row_bytes];
            quantize_row(dtype, &row, bytes).unwrap();
            dequantize_row(dtype, bytes, &mut decoded).unwrap();
            w_decoded.extend(decoded.iter().map(|&v| f64::from(v)));
        }
        let x_stride = k + 3;
        let x = rng.vec(m * x_stride, 1.0);
        Problem { w_bytes, w_stride, w_decoded, x, x_stride, m, n, k }
    }

    fn weights(&self, dtype: DType) -> WeightMatrix<'_> {
        WeightMatrix { dtype, data: &self.w_bytes, rows: self.n, cols: self.k, row_stride_bytes: self.w_stride }
    }

    fn x(&self) -> MatRef<'_> {
        MatRef { data: &self.x, rows: self.m, cols: self.k, row_stride: self.x_stride }
    }

    fn y_stride(&self) -> usize {
        self.n + 2
    }

    fn reference(&self) -> Vec<f64> {
        let mut y = Vec::with_capacity(self.m * self.n);
        for i in 0..self.m {
            let x = &self.x[i * self.x_stride..][..self.k];
            for j in 0..self.n {
                let w = &self.w_decoded[j * self.k..][..self.k];
                y.push(x.iter().zip(w).map(|(&a, &b)| f64::from(a) * b).sum());
            }
        }
        y
    }

    /// `Σ y²` of the reference over `Σ y² + Σ (x w)²`, the latter the
    /// expected power of the outputs for independent random data: the NMSE
    /// times this is the error against both, near the NMSE where the
    /// outputs are typical and smaller where they cancelled by chance.
    fn power_share(&self, reference: &[f64]) -> f64 {
        let power: f64 = reference.iter().map(|y| y * y).sum();
        let mut expected = 0.0;
        for i in 0..self.m {
            let x = &self.x[i * self.x_stride..][..self.k];
            for j in 0..self.n {
                let w = &self.w_decoded[j * self.k..][..self.k];
                expected += x.iter().zip(w).map(|(&a, &b)| (f64::from(a) * b).powi(2)).sum::<f64>();
            }
        }
        if power + expected == 0.0 {
            1.0
        } else {
            power / (power + expected)
        }
    }

    /// Runs `f` on a guarded, strided y and returns its `m x n` values,
    /// checking guards and the gaps between rows.
    fn run(&self, f: impl FnOnce(&mut MatMut<'_>)) -> Vec<f32> {
        let stride = self.y_stride();
        let len = (self.m - 1) * stride + self.n;
        let mut buf = Guarded::new(len);
        {
            let mut y = MatMut { data: buf.inner(), rows: self.m, cols: self.n, row_stride: stride };
            f(&mut y);
        }
        buf.check_guards("y");
        let view = buf.view();
        let mut out = Vec::with_capacity(self.m * self.n);
        for i in 0..self.m {
            out.extend_from_slice(&view[i * stride..][..self.n]);
            if i + 1 < self.m {
                for (g, &v) in view[i * stride + self.n..(i + 1) * stride].iter().enumerate() {
                    assert_eq!(v.to_bits(), SENTINEL.to_bits(), "gap element {g} after y row {i} overwritten");
                }
            }
        }
        out
    }
}

fn k_values(dtype: DType) -> &'static [usize] {
    if dtype.is_k_quant() {
        &[256, 512, 768]
    } else if dtype.is_quantized() {
        &[32, 64, 96, 576]
    } else {
        &[1, 7, 8, 9, 33, 64, 100, 257]
    }
}

#[test]
fn matmul_matches_dequantized_reference_for_every_type() {
    for dtype in WEIGHT_TYPES {
        for_each_isa(|isa| {
            let mut scratch = Scratch::new();
            let (mut all, mut all_reference) = (Vec::new(), Vec::new());
            for &k in k_values(dtype) {
                for (m, n) in [(1, 1), (1, 13), (2, 8), (3, 37), (4, 9), (5, 70), (9, 3), (70, 21)] {
                    let p = Problem::new(dtype, m, n, k, (m * 1000 + n * 10 + k) as u64);
                    let y = p.run(|y| matmul(&SingleThread, &p.weights(dtype), &p.x(), y, &mut scratch).unwrap());
                    let reference = p.reference();
                    // One small case is a noisy sample of the quantization
                    // error; it only has to be in the right ballpark (a wrong
                    // tile gives NMSE near 1). The total below is held to the bound.
                    // Its error is taken against the outputs' expected power
                    // too, so that a lone output that happens to sum to
                    // almost nothing does not count as a large relative error.
                    let case_bound = if dtype.is_quantized() { 50.0 * bound(dtype) } else { bound(dtype) };
                    let e = nmse(&y, &reference) * p.power_share(&reference);
                    assert!(e <= case_bound, "{dtype} {isa:?} m {m} n {n} k {k}: nmse {e:e} > {case_bound:e}");
                    all.extend(y);
                    all_reference.extend(reference);
                }
            }
            let e = nmse(&all, &all_reference);
            assert!(e <= bound(dtype), "{dtype} {isa:?} all shapes: nmse {e:e} > {:e}", bound(dtype));
        });
    }
}

#[test]
fn threaded_and_column_range_results_are_bit_identical() {
    for dtype in WEIGHT_TYPES {
        for_each_isa(|isa| {
            let k = if dtype.is_k_quant() {
                512
            } else if dtype.is_quantized() {
                96
            } else {
                67
            };
            for m in [1, 6, 13] {
                let p = Problem::new(dtype, m, 53, k, 77);
                let w = p.weights(dtype);
                let mut scratch = Scratch::new();
                let single = p.run(|y| matmul(&SingleThread, &w, &p.x(), y, &mut scratch).unwrap());
                let threaded = p.run(|y| matmul(&ScopedThreads(3), &w, &p.x(), y, &mut scratch).unwrap());
                let pieces = p.run(|y| {
                    for range in [0..10, 10..11, 11..40, 40..53] {
                        matmul_columns(&w, &p.x(), y, range, &mut scratch).unwrap();
                    }
                });
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&single), bits(&threaded), "{dtype} {isa:?} m {m}: 3 threads differ from 1");
                assert_eq!(bits(&single), bits(&pieces), "{dtype} {isa:?} m {m}: column ranges differ");
            }
        });
    }
}

/// A lone activation row against a matrix larger than the streaming
/// threshold (256 KiB): Q8_0 weights stream one row at a time, float weights
/// (which streamed before the row-invariance change) take the 1 x 4 tile;
/// both within the bound, and the same bits for any thread count or column
/// ranges.
#[test]
fn streamed_single_rows_match_the_reference_and_any_split() {
    for dtype in [DType::F32, DType::F16, DType::BF16, DType::Q8_0] {
        for_each_isa(|isa| {
            let (n, k) = (1100, 160 + 32 * usize::from(dtype == DType::Q8_0) * 10);
            let p = Problem::new(dtype, 1, n, k, 99);
            assert!(n * dtype.row_bytes(k).unwrap() > 256 * 1024, "the matrix must be over the threshold");
            let w = p.weights(dtype);
            let mut scratch = Scratch::new();
            let single = p.run(|y| matmul(&SingleThread, &w, &p.x(), y, &mut scratch).unwrap());
            let e = nmse(&single, &p.reference());
            assert!(e <= bound(dtype), "{dtype} {isa:?}: nmse {e:e} > {:e}", bound(dtype));
            let threaded = p.run(|y| matmul(&ScopedThreads(3), &w, &p.x(), y, &mut scratch).unwrap());
            let pieces = p.run(|y| {
                for range in [0..5, 5..6, 6..700, 700..n] {
                    matmul_columns(&w, &p.x(), y, range, &mut scratch).unwrap();
                }
            });
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&single), bits(&threaded), "{dtype} {isa:?}: 3 threads differ from 1");
            assert_eq!(bits(&single), bits(&pieces), "{dtype} {isa:?}: column ranges differ");
        });
    }
}

#[test]
fn matmul_columns_touches_only_its_columns() {
    let p = Problem::new(DType::Q4_0, 3, 20, 64, 5);
    let y = p.run(|y| matmul_columns(&p.weights(DType::Q4_0), &p.x(), y, 5..9, &mut Scratch::new()).unwrap());
    for i in 0..3 {
        for j in 0..20 {
            let untouched = y[i * 20 + j].to_bits() == SENTINEL.to_bits();
            assert_eq!(untouched, !(5..9).contains(&j), "row {i} column {j}");
        }
    }
}

/// Measures the NMSE of each quantized type on llama-like sizes and prints
/// it (`cargo test -- --nocapture`); the bounds above come from these values.
#[test]
fn measured_quantized_error_is_within_bounds() {
    for dtype in WEIGHT_TYPES {
        for_each_isa(|isa| {
            let k = if dtype.is_k_quant() { 768 } else { 576 };
            let p = Problem::new(dtype, 16, 64, k, 99);
            let y = p.run(|y| matmul(&SingleThread, &p.weights(dtype), &p.x(), y, &mut Scratch::new()).unwrap());
            let e = nmse(&y, &p.reference());
            println!("measured nmse {dtype:>5} {isa:?}: {e:.3e} (bound {:.0e})", bound(dtype));
            assert!(e <= bound(dtype), "{dtype} {isa:?}: nmse {e:e}");
        });
    }
}

#[test]
fn bad_shapes_are_errors_not_panics() {
    let p = Problem::new(DType::Q8_0, 2, 4, 64, 1);
    let mut y_data = vec![0.0; 8];
    let mut scratch = Scratch::new();
    let mut y = MatMut::contiguous(&mut y_data, 2, 4);

    let w = WeightMatrix { cols: 48, ..p.weights(DType::Q8_0) };
    let x = MatRef { cols: 48, ..p.x() };
    assert!(matches!(matmul(&SingleThread, &w, &x, &mut y, &mut scratch), Err(KernelError::PartialBlock { .. })));

    let short = WeightMatrix { data: &p.w_bytes[..100], ..p.weights(DType::Q8_0) };
    let err = matmul(&SingleThread, &short, &p.x(), &mut y, &mut scratch);
    assert!(matches!(err, Err(KernelError::BufferTooSmall { .. })), "{err:?}");

    let narrow = WeightMatrix { row_stride_bytes: 10, ..p.weights(DType::Q8_0) };
    let err = matmul(&SingleThread, &narrow, &p.x(), &mut y, &mut scratch);
    assert!(matches!(err, Err(KernelError::StrideTooSmall { .. })), "{err:?}");

    let x_wrong = MatRef { cols: 32, ..p.x() };
    let err = matmul(&SingleThread, &p.weights(DType::Q8_0), &x_wrong, &mut y, &mut scratch);
    assert!(matches!(err, Err(KernelError::LengthMismatch { .. })), "{err:?}");

    let err = matmul_columns(&p.weights(DType::Q8_0), &p.x(), &mut y, 2..5, &mut scratch);
    assert!(matches!(err, Err(KernelError::RangeOutOfBounds { .. })), "{err:?}");
    assert!(y_data.iter().all(|&v| v == 0.0), "a failed call wrote output");
}
