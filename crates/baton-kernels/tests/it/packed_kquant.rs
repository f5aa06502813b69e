//! Packed K-quant weights (`baton_kernels::packed`): the packed product
//! against the f64 product of the decoded weights (the activation-rounding
//! bound of `kquant.rs`) and close to the unpacked `matmul`; row invariance
//! (bit-identical rows whatever `m`, the thread count or the column range);
//! `unpack_row` giving GGUF's bytes back; shape errors.

use baton_core::parallel::{ScopedThreads, SingleThread};
use baton_core::Parallel;
use baton_kernels::packed::packable;
use baton_kernels::{dequantize_row, matmul, matmul_packed, matmul_packed_columns, quantize_row, with_isa};
use baton_kernels::{DType, Isa, KernelError, MatMut, MatRef, PackedWeights, Scratch, WeightMatrix};

use crate::common::{for_each_isa, Rng};

const PACKED_K: [DType; 5] = [DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K];
/// Weight rows: below, at and above one group of 8, and several groups.
const ROWS: [usize; 4] = [1, 7, 9, 37];
const COLS: [usize; 3] = [256, 512, 768];
/// Activation rows: every tile remainder, several tiles.
const MS: [usize; 8] = [1, 2, 3, 4, 5, 9, 17, 64];

struct Case {
    dtype: DType,
    n: usize,
    k: usize,
    bytes: Vec<u8>,
    /// The decoded weights, row-major.
    w: Vec<f64>,
    x: Vec<f32>,
    packed: PackedWeights,
}

impl Case {
    fn new(dtype: DType, n: usize, k: usize, seed: u64) -> Case {
        let mut rng = Rng::new(seed);
        let row_bytes = dtype.row_bytes(k).expect("whole blocks");
        let mut bytes = vec![0u8; n * row_bytes];
        let mut w = Vec::with_capacity(n * k);
        let mut decoded = vec![0.0f32; k];
        for row in bytes.chunks_exact_mut(row_bytes) {
            quantize_row(dtype, &rng.vec(k, 0.5), row).expect("sizes match");
            dequantize_row(dtype, row, &mut decoded).expect("sizes match");
            w.extend(decoded.iter().map(|&v| f64::from(v)));
        }
        let matrix = WeightMatrix::contiguous(dtype, &bytes, n, k).expect("whole blocks");
        let packed = PackedWeights::pack(&matrix, &SingleThread).expect("valid").expect("packable");
        let x = rng.vec(66 * k, 1.0);
        Case { dtype, n, k, bytes, w, x, packed }
    }

    fn x(&self, first: usize, m: usize) -> MatRef<'_> {
        MatRef::contiguous(&self.x[first * self.k..][..m * self.k], m, self.k)
    }

    fn packed(&self, parallel: &dyn Parallel, first: usize, m: usize) -> Vec<f32> {
        let mut y = vec![f32::NAN; m * self.n];
        let mut out = MatMut::contiguous(&mut y, m, self.n);
        matmul_packed(parallel, &self.packed, &self.x(first, m), &mut out, &mut Scratch::new()).expect("shapes match");
        y
    }

    fn packed_in_pieces(&self, first: usize, m: usize, cuts: &[usize]) -> Vec<f32> {
        let mut y = vec![f32::NAN; m * self.n];
        let mut out = MatMut::contiguous(&mut y, m, self.n);
        let mut scratch = Scratch::new();
        for range in cuts.windows(2) {
            matmul_packed_columns(&self.packed, &self.x(first, m), &mut out, range[0]..range[1], &mut scratch)
                .expect("shapes match");
        }
        y
    }

    fn unpacked(&self, first: usize, m: usize) -> Vec<f32> {
        let w = WeightMatrix::contiguous(self.dtype, &self.bytes, self.n, self.k).expect("whole blocks");
        let mut y = vec![f32::NAN; m * self.n];
        let mut out = MatMut::contiguous(&mut y, m, self.n);
        matmul(&SingleThread, &w, &self.x(first, m), &mut out, &mut Scratch::new()).expect("shapes match");
        y
    }

    /// The exact product of activation row `i` and weight row `j`, and the
    /// bound of `kquant.rs`: half an activation step per value times the
    /// weights, plus `1e-5 Σ |w x|` for the f32 sums.
    fn reference(&self, i: usize, j: usize) -> (f64, f64) {
        let x = &self.x[i * self.k..][..self.k];
        let w = &self.w[j * self.k..][..self.k];
        let (mut exact, mut bound, mut magnitude) = (0.0, 0.0, 0.0);
        for (xb, wb) in x.chunks(256).zip(w.chunks(256)) {
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

fn bits_differ(a: &[f32], b: &[f32]) -> Option<usize> {
    a.iter().zip(b).position(|(x, y)| x.to_bits() != y.to_bits())
}

#[test]
fn packed_products_are_within_the_bound_and_close_to_unpacked() {
    for dtype in PACKED_K {
        for_each_isa(|isa| {
            for (s, (&n, &k)) in ROWS.iter().flat_map(|n| COLS.iter().map(move |k| (n, k))).enumerate() {
                let case = Case::new(dtype, n, k, 1000 + s as u64);
                for m in MS.into_iter().filter(|&m| m <= 9 || k == 512) {
                    let packed = case.packed(&SingleThread, 0, m);
                    let unpacked = case.unpacked(0, m);
                    for i in 0..m {
                        for j in 0..n {
                            let (exact, bound) = case.reference(i, j);
                            let (p, u) = (packed[i * n + j], unpacked[i * n + j]);
                            let what = format!("{dtype} {isa:?} n {n} k {k} m {m} ({i}, {j})");
                            assert!((f64::from(p) - exact).abs() <= bound, "{what}: {p} vs {exact} (bound {bound:e})");
                            assert!((p - u).abs() <= 1e-4 * (1.0 + u.abs()), "{what}: packed {p}, unpacked {u}");
                        }
                    }
                }
            }
        });
    }
}

/// Every batch size from 1 to 65 gives each row the bits of the row alone,
/// at every level, on 1 and 2 threads.
#[test]
fn every_batch_size_to_65_gives_each_row_its_bits_alone() {
    let mut failures = Vec::new();
    for dtype in PACKED_K {
        let case = Case::new(dtype, 17, 256, 65);
        for_each_isa(|isa| {
            let alone: Vec<Vec<f32>> = (0..66).map(|r| case.packed(&SingleThread, r, 1)).collect();
            for m in 1..=65 {
                let first = m % 2;
                let want = alone[first..first + m].concat();
                for (how, parallel) in [("1 thread", &SingleThread as &dyn Parallel), ("2 threads", &ScopedThreads(2))]
                {
                    if bits_differ(&case.packed(parallel, first, m), &want).is_some() {
                        failures.push(format!("{dtype} {isa:?} m {m} ({how})"));
                    }
                }
            }
        });
    }
    assert!(failures.is_empty(), "{} batches differ from their rows alone:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn packed_rows_are_bit_identical_whatever_the_batch_threads_or_columns() {
    let mut failures = Vec::new();
    for dtype in PACKED_K {
        for (n, k) in [(37, 512), (9, 768), (7, 256)] {
            let case = Case::new(dtype, n, k, 77);
            for_each_isa(|isa| {
                let alone: Vec<Vec<f32>> = (0..66).map(|r| case.packed(&SingleThread, r, 1)).collect();
                for m in MS {
                    let first = m % 3;
                    let cuts = [0, 1, 3, n / 2 + 1, n];
                    let runs = [
                        ("1 thread", case.packed(&SingleThread, first, m)),
                        ("2 threads", case.packed(&ScopedThreads(2), first, m)),
                        ("column pieces", case.packed_in_pieces(first, m, &cuts)),
                    ];
                    for (how, y) in runs {
                        for (i, row) in y.chunks_exact(n).enumerate() {
                            if let Some(j) = bits_differ(row, &alone[first + i]) {
                                failures.push(format!("{dtype} {isa:?} n {n} k {k} m {m} ({how}): y[{i}][{j}]"));
                            }
                        }
                    }
                }
            });
        }
    }
    assert!(failures.is_empty(), "{} rows differ from their row alone:\n{}", failures.len(), failures.join("\n"));
}

/// Both SIMD tiles do the same integer sums per lane and the same f32
/// operations, so they agree bit for bit (every tile height: AVX2 takes
/// both 4-row halves in one pass up to 2 activation rows, one at a time
/// above).
#[test]
fn packed_avx2_and_avx512_tiles_give_the_same_bits() {
    if Isa::detected() < Isa::Avx512 {
        eprintln!("skipped: this CPU has no AVX-512 level");
        return;
    }
    for dtype in PACKED_K {
        let case = Case::new(dtype, 37, 768, 5);
        for m in [1, 2, 3, 5, 64] {
            let avx2 = with_isa(Isa::Avx2, || case.packed(&SingleThread, 0, m));
            let avx512 = with_isa(Isa::Avx512, || case.packed(&SingleThread, 0, m));
            assert_eq!(bits_differ(&avx2, &avx512), None, "{dtype} m {m}");
        }
    }
}

#[test]
fn unpack_row_gives_the_gguf_bytes_back() {
    let mut rng = Rng::new(9);
    for dtype in PACKED_K {
        for (n, k) in [(1, 256), (9, 512), (37, 768)] {
            // Quantizer output, then arbitrary bytes (every bit pattern is a
            // valid super-block, and each bit must survive).
            let quantized = Case::new(dtype, n, k, 3).bytes;
            let random: Vec<u8> = (0..quantized.len()).map(|_| rng.next_u64() as u8).collect();
            for bytes in [quantized, random] {
                let w = WeightMatrix::contiguous(dtype, &bytes, n, k).expect("whole blocks");
                for parallel in [&SingleThread as &dyn Parallel, &ScopedThreads(2)] {
                    let packed = PackedWeights::pack(&w, parallel).expect("valid").expect("packable");
                    assert_eq!((packed.dtype(), packed.rows(), packed.cols()), (dtype, n, k));
                    let row_bytes = bytes.len() / n;
                    let mut out = vec![0u8; row_bytes];
                    for (r, want) in bytes.chunks_exact(row_bytes).enumerate() {
                        packed.unpack_row(r, &mut out).expect("row in range");
                        assert!(out == want, "{dtype} n {n} k {k}: row {r} differs after unpacking");
                    }
                }
            }
        }
    }
}

#[test]
fn packed_sizes_stay_near_gguf_sizes() {
    for dtype in PACKED_K {
        let case = Case::new(dtype, 64, 2048, 4);
        let ratio = case.packed.bytes() as f64 / case.bytes.len() as f64;
        println!("{dtype}: packed {} bytes, GGUF {} ({ratio:.3}x)", case.packed.bytes(), case.bytes.len());
        assert!((1.0..1.2).contains(&ratio), "{dtype}: packed/GGUF {ratio}");
    }
}

#[test]
fn shape_errors_are_errors() {
    assert!(!packable(DType::Q8_K) && !packable(DType::F32));
    for dtype in PACKED_K {
        assert!(packable(dtype));
        let case = Case::new(dtype, 9, 256, 6);
        let mut y = vec![0.0f32; 2 * 9];
        let mut scratch = Scratch::new();
        let x = MatRef::contiguous(&case.x[..2 * 512], 2, 512);
        let err = matmul_packed(&SingleThread, &case.packed, &x, &mut MatMut::contiguous(&mut y, 2, 9), &mut scratch);
        assert!(matches!(err, Err(KernelError::LengthMismatch { .. })), "{dtype} wrong k: {err:?}");
        let x = MatRef::contiguous(&case.x[..2 * 256], 2, 256);
        let err =
            matmul_packed(&SingleThread, &case.packed, &x, &mut MatMut::contiguous(&mut y[..16], 2, 8), &mut scratch);
        assert!(matches!(err, Err(KernelError::LengthMismatch { .. })), "{dtype} wrong n: {err:?}");
        let err = matmul_packed_columns(&case.packed, &x, &mut MatMut::contiguous(&mut y, 2, 9), 4..10, &mut scratch);
        assert!(matches!(err, Err(KernelError::RangeOutOfBounds { .. })), "{dtype} columns: {err:?}");
        let err = case.packed.unpack_row(9, &mut vec![0u8; case.bytes.len() / 9]);
        assert!(matches!(err, Err(KernelError::RangeOutOfBounds { .. })), "{dtype} row 9: {err:?}");
        let err = case.packed.unpack_row(0, &mut [0u8; 3]);
        assert!(matches!(err, Err(KernelError::LengthMismatch { .. })), "{dtype} short row: {err:?}");
        let short = WeightMatrix { dtype, data: &case.bytes, rows: 1, cols: 288, row_stride_bytes: case.bytes.len() };
        let err = PackedWeights::pack(&short, &SingleThread);
        assert!(matches!(err, Err(KernelError::PartialBlock { .. })), "{dtype} partial block: {err:?}");
        let beyond =
            WeightMatrix { dtype, data: &case.bytes, rows: 10, cols: 256, row_stride_bytes: case.bytes.len() / 9 };
        assert!(PackedWeights::pack(&beyond, &SingleThread).is_err(), "{dtype}: rows past the data");
    }
}
