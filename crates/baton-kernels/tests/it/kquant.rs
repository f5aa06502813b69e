//! K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K): round-trip error, the GGUF byte
//! layout; and the dot product of every quantized weight format against its
//! 8-bit activations (Q8_K super-blocks for the K-quants, blocks of 32 for
//! the others), on both instruction sets, against dequantize-then-multiply
//! in f64 with an error bound derived from the activation rounding.

use baton_core::parallel::SingleThread;
use baton_kernels::{dequantize_row, matmul, matmul_columns, quantize_row, DType, KernelError, WEIGHT_TYPES};
use baton_kernels::{MatMut, MatRef, Scratch, WeightMatrix};
use half::f16;
use proptest::prelude::*;

use crate::common::{for_each_isa, isas, Rng};

const K_TYPES: [DType; 6] = [DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K];

/// Every quantized weight type: the K-quants and the formats of 32.
fn quantized_types() -> impl Iterator<Item = DType> {
    WEIGHT_TYPES.into_iter().filter(|t| t.is_quantized())
}

fn encode(dtype: DType, src: &[f32]) -> Vec<u8> {
    let mut bytes = vec![0u8; dtype.row_bytes(src.len()).expect("whole blocks")];
    quantize_row(dtype, src, &mut bytes).expect("sizes match");
    bytes
}

fn decode(dtype: DType, bytes: &[u8], len: usize) -> Vec<f32> {
    let mut out = vec![0.0; len];
    dequantize_row(dtype, bytes, &mut out).expect("sizes match");
    out
}

fn rmse(a: &[f32], b: &[f32]) -> f64 {
    let sum: f64 = a.iter().zip(b).map(|(&x, &y)| (f64::from(x) - f64::from(y)).powi(2)).sum();
    (sum / a.len() as f64).sqrt()
}

/// The finest scale group of a K-quant and the levels its integers span.
fn grid(dtype: DType) -> (usize, f32) {
    match dtype {
        DType::Q2_K => (16, 3.0),
        DType::Q3_K => (16, 7.0),
        DType::Q4_K => (32, 15.0),
        DType::Q5_K => (32, 31.0),
        DType::Q6_K => (16, 63.0),
        DType::Q8_K => (256, 254.0),
        _ => unreachable!("{dtype} is not a K-quant"),
    }
}

/// Round-trip RMSE on unit normal data, relative to the data's standard
/// deviation. Bounds: measured values (printed) with about 15% margin; the
/// 32-value formats are listed for comparison.
fn rmse_bound(dtype: DType) -> f64 {
    match dtype {
        DType::Q4_0 => 0.12,
        DType::Q4_1 => 0.10,
        DType::Q5_0 => 0.047,
        DType::Q5_1 => 0.042,
        DType::MXFP4 => 0.135,
        DType::Q2_K => 0.30,
        DType::Q3_K => 0.16,
        DType::Q4_K => 0.085,
        DType::Q5_K => 0.042,
        DType::Q6_K => 0.021,
        DType::Q8_0 => 0.0072,
        DType::Q8_K => 0.0095,
        _ => unreachable!(),
    }
}

#[test]
fn round_trip_rmse_on_normal_data_beats_the_32_value_formats() {
    let mut rng = Rng::new(11);
    let src: Vec<f32> = (0..256 * 64).map(|_| rng.normal(1.0)).collect();
    let std = (src.iter().map(|v| f64::from(v * v)).sum::<f64>() / src.len() as f64).sqrt();
    let mut measured = Vec::new();
    for dtype in quantized_types() {
        for_each_isa(|isa| {
            let e = rmse(&decode(dtype, &encode(dtype, &src), src.len()), &src) / std;
            println!("round-trip rmse/std {dtype:>5} {isa:?}: {e:.4} (bound {})", rmse_bound(dtype));
            assert!(e <= rmse_bound(dtype), "{dtype} {isa:?}: relative rmse {e} above {}", rmse_bound(dtype));
            measured.push((dtype, e));
        });
    }
    let of = |t: DType| measured.iter().find(|(d, _)| *d == t).map(|&(_, e)| e).expect("measured");
    assert!(of(DType::Q4_K) < of(DType::Q4_1), "Q4_K must beat Q4_1 (4.5 vs 5 bits a value)");
    assert!(of(DType::Q3_K) < of(DType::Q2_K) / 1.8, "a third bit must almost halve Q2_K's error");
    assert!(of(DType::Q4_K) < of(DType::Q3_K) / 1.8, "a fourth bit must almost halve Q3_K's error");
    assert!(of(DType::Q6_K) < of(DType::Q4_K) / 3.0);
    assert!(of(DType::Q5_K) < of(DType::Q5_1), "Q5_K must beat Q5_1 (5.5 vs 6 bits a value)");
    assert!(of(DType::Q5_1) < of(DType::Q4_1) / 1.8, "a fifth bit must halve Q4_1's error");
}

#[test]
fn every_value_is_near_its_sub_block_grid() {
    // A per-element bound: no value lands further than one step of its
    // sub-block's range from where it was (the fit and the 6/8-bit scales
    // can move it past half a step, never past a whole one). The 2- and
    // 3-bit formats get 1.35 steps (measured 1.18 for Q2_K, 1.23 for Q3_K):
    // Q3_K's integers end at 3 on the side opposite the largest value
    // (clamped a whole step away before its scale rounds), and Q2_K's 4-bit
    // scales and mins round a group's grid by up to half a super-block step.
    let mut rng = Rng::new(12);
    for dtype in K_TYPES {
        let src: Vec<f32> =
            (0..256 * 16).map(|_| rng.normal(1.0) * if rng.uniform() > 0.9 { 8.0 } else { 1.0 }).collect();
        let out = decode(dtype, &encode(dtype, &src), src.len());
        let (group, levels) = grid(dtype);
        for (g, (got, want)) in out.chunks(group).zip(src.chunks(group)).enumerate() {
            let lo = want.iter().fold(0.0f32, |a, &v| a.min(v));
            let hi = want.iter().fold(0.0f32, |a, &v| a.max(v));
            let steps = if levels < 10.0 { 1.35 } else { 1.01 };
            let bound = (hi - lo) / levels * steps + 1e-6;
            for (a, b) in got.iter().zip(want) {
                assert!((a - b).abs() <= bound, "{dtype} group {g}: {a} vs {b} (bound {bound})");
            }
        }
    }
}

#[test]
fn q4_k_layout_matches_ggml() {
    // Hand-built super-block: d = 0.5, dmin = 0.25; sub-block 0 scale 3,
    // min 2; sub-block 5 scale 33 (top bits in byte 1), min 40 (byte 5/9).
    let mut block = [0u8; 144];
    block[0..2].copy_from_slice(&f16::from_f32(0.5).to_bits().to_le_bytes());
    block[2..4].copy_from_slice(&f16::from_f32(0.25).to_bits().to_le_bytes());
    block[4] = 3;
    block[8] = 2;
    block[4 + 1] = (33 >> 4) << 6;
    block[4 + 5] = (40 >> 4) << 6;
    block[4 + 9] = (33 & 15) | ((40 & 15) << 4);
    block[16] = 0x9a; // element 0: 10; element 32 (sub-block 1): 9
    block[16 + 64 + 7] = 0xc0; // sub-block 5 (pair 2, high nibble), element 7: 12
    let out = decode(DType::Q4_K, &block, 256);
    assert_eq!(out[0], 0.5 * 3.0 * 10.0 - 0.25 * 2.0);
    assert_eq!(out[32], 0.0, "sub-block 1 has scale 0 and min 0");
    assert_eq!(out[5 * 32 + 7], 0.5 * 33.0 * 12.0 - 0.25 * 40.0);
}

#[test]
fn q8_k_stores_exact_sums_of_16() {
    let mut rng = Rng::new(3);
    let src: Vec<f32> = (0..256).map(|_| rng.normal(2.0)).collect();
    let bytes = encode(DType::Q8_K, &src);
    assert_eq!(bytes.len(), 292);
    for g in 0..16 {
        let sum: i32 = bytes[4 + 16 * g..][..16].iter().map(|&b| i32::from(b as i8)).sum();
        assert_eq!(i16::from_le_bytes([bytes[260 + 2 * g], bytes[261 + 2 * g]]) as i32, sum, "group {g}");
    }
}

#[test]
fn rows_not_a_multiple_of_256_are_rejected() {
    for dtype in K_TYPES {
        let mut bytes = vec![0u8; 2 * dtype.block_bytes()];
        let err = quantize_row(dtype, &[0.0; 288], &mut bytes);
        assert!(matches!(err, Err(KernelError::PartialBlock { block_elems: 256, elems: 288, .. })), "{err:?}");
        let err = dequantize_row(dtype, &bytes, &mut [0.0; 480]);
        assert!(matches!(err, Err(KernelError::PartialBlock { .. })), "{err:?}");
        let w = WeightMatrix { dtype, data: &bytes, rows: 1, cols: 288, row_stride_bytes: bytes.len() };
        let x = [0.0f32; 288];
        let mut y = [0.0f32; 1];
        let err = matmul(
            &SingleThread,
            &w,
            &MatRef::contiguous(&x, 1, 288),
            &mut MatMut::contiguous(&mut y, 1, 1),
            &mut Scratch::new(),
        );
        assert!(matches!(err, Err(KernelError::PartialBlock { .. })), "{err:?}");
        assert!(matches!(WeightMatrix::contiguous(dtype, &bytes, 1, 128), Err(KernelError::PartialBlock { .. })));
    }
}

/// The weights (decoded to f64) and activations of one case, with padded
/// strides on both.
struct Case {
    w_bytes: Vec<u8>,
    w_stride: usize,
    w: Vec<f64>,
    x: Vec<f32>,
    x_stride: usize,
    m: usize,
    n: usize,
    k: usize,
    /// Values per activation block: 256 (Q8_K) for K-quant weights, else 32.
    act_block: usize,
}

impl Case {
    fn new(dtype: DType, m: usize, n: usize, k: usize, seed: u64) -> Case {
        let mut rng = Rng::new(seed);
        let row_bytes = dtype.row_bytes(k).expect("whole blocks");
        let w_stride = row_bytes + 5;
        let mut w_bytes = vec![0x5au8; n * w_stride];
        let mut w = Vec::with_capacity(n * k);
        for r in 0..n {
            let bytes = encode(dtype, &rng.vec(k, 0.5));
            w.extend(decode(dtype, &bytes, k).iter().map(|&v| f64::from(v)));
            w_bytes[r * w_stride..][..row_bytes].copy_from_slice(&bytes);
        }
        let x_stride = k + 7;
        let act_block = if dtype.is_k_quant() { 256 } else { 32 };
        Case { w_bytes, w_stride, w, x: rng.vec(m * x_stride, 1.0), x_stride, m, n, k, act_block }
    }

    fn run(&self, dtype: DType) -> Vec<f32> {
        let w =
            WeightMatrix { dtype, data: &self.w_bytes, rows: self.n, cols: self.k, row_stride_bytes: self.w_stride };
        let x = MatRef { data: &self.x, rows: self.m, cols: self.k, row_stride: self.x_stride };
        let mut y = vec![f32::NAN; self.m * self.n];
        matmul(&SingleThread, &w, &x, &mut MatMut::contiguous(&mut y, self.m, self.n), &mut Scratch::new())
            .expect("valid shapes");
        y
    }

    /// The exact product of `x` and the decoded weights, and a bound on
    /// what quantizing `x` to 8 bits may move it: each activation moves at
    /// most half its block's step `amax / 127`, so output `(i, j)` moves at
    /// most `Σ_b amax_b / 254 · Σ_{e∈b} |w_je|`; f32 accumulation adds
    /// `1e-5 · Σ |w x|`.
    fn reference(&self, i: usize, j: usize) -> (f64, f64) {
        let x = &self.x[i * self.x_stride..][..self.k];
        let w = &self.w[j * self.k..][..self.k];
        let (mut exact, mut bound, mut magnitude) = (0.0, 0.0, 0.0);
        for (xb, wb) in x.chunks(self.act_block).zip(w.chunks(self.act_block)) {
            let amax = xb.iter().fold(0.0f32, |a, v| a.max(v.abs()));
            bound += f64::from(amax) / 254.0 * wb.iter().map(|v| v.abs()).sum::<f64>();
            for (&a, &b) in xb.iter().zip(wb) {
                exact += f64::from(a) * b;
                magnitude += (f64::from(a) * b).abs();
            }
        }
        (exact, bound + 1e-5 * magnitude)
    }
}

#[test]
fn dot_products_are_within_the_activation_rounding_bound() {
    for dtype in quantized_types() {
        for_each_isa(|isa| {
            for (m, n, k) in
                [(1, 1, 256), (1, 13, 512), (2, 7, 256), (3, 37, 768), (4, 9, 256), (5, 21, 1024), (9, 3, 256)]
            {
                let case = Case::new(dtype, m, n, k, (m * 100 + n * 10 + k) as u64);
                let y = case.run(dtype);
                for i in 0..m {
                    for j in 0..n {
                        let (exact, bound) = case.reference(i, j);
                        let got = f64::from(y[i * n + j]);
                        assert!(
                            (got - exact).abs() <= bound,
                            "{dtype} {isa:?} m {m} n {n} k {k} ({i}, {j}): {got} vs {exact} (bound {bound:e})"
                        );
                    }
                }
            }
        });
    }
}

#[test]
fn every_isa_agrees_closely_with_scalar() {
    let isas = isas();
    for dtype in quantized_types() {
        let case = Case::new(dtype, 6, 11, 512, 5);
        let results: Vec<Vec<f32>> = isas.iter().map(|&isa| baton_kernels::with_isa(isa, || case.run(dtype))).collect();
        for (isa, simd) in isas.iter().zip(&results).skip(1) {
            for (a, b) in results[0].iter().zip(simd) {
                assert!((a - b).abs() <= 1e-4 * (1.0 + a.abs()), "{dtype}: scalar {a} vs {isa:?} {b}");
            }
        }
    }
}

#[test]
fn column_ranges_compute_only_their_columns() {
    for dtype in K_TYPES {
        let case = Case::new(dtype, 3, 10, 256, 8);
        let whole = case.run(dtype);
        let w = WeightMatrix { dtype, data: &case.w_bytes, rows: 10, cols: 256, row_stride_bytes: case.w_stride };
        let x = MatRef { data: &case.x, rows: 3, cols: 256, row_stride: case.x_stride };
        let mut y = vec![-1.0f32; 30];
        matmul_columns(&w, &x, &mut MatMut::contiguous(&mut y, 3, 10), 3..8, &mut Scratch::new()).expect("valid");
        for i in 0..3 {
            for j in 0..10 {
                let want = if (3..8).contains(&j) { whole[i * 10 + j] } else { -1.0 };
                assert_eq!(y[i * 10 + j].to_bits(), want.to_bits(), "{dtype} ({i}, {j})");
            }
        }
    }
}

proptest! {
    #[test]
    fn k_quant_round_trip_is_finite_and_near(
        values in prop::collection::vec(-1e3f32..1e3f32, 256..=256),
        scale_exp in -12i32..4,
    ) {
        let scale = 2f32.powi(scale_exp);
        let src: Vec<f32> = values.iter().map(|v| v * scale).collect();
        let amax = src.iter().fold(0.0f32, |a, v| a.max(v.abs()));
        for dtype in K_TYPES {
            for isa in isas() {
                let out = baton_kernels::with_isa(isa, || decode(dtype, &encode(dtype, &src), 256));
                for (g, w) in out.iter().zip(&src) {
                    prop_assert!(g.is_finite());
                    // The format's range over its levels (Q4_K's 15 for the
                    // finer ones), twice (the quantized scales may round a
                    // sub-block's step up to 2x).
                    let levels = grid(dtype).1.min(15.0);
                    prop_assert!((g - w).abs() <= amax * 2.0 / levels * 1.05 + 1e-30,
                        "{} {:?}: {} vs {}", dtype, isa, g, w);
                }
            }
        }
    }
}
