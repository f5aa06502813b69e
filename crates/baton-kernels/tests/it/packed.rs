//! Packed weights (`baton_kernels::packed`) for the 32-value formats: the
//! packed product against the unpacked one and an f64 reference, row
//! invariance bit for bit (any `m`, threads, column ranges), the levels'
//! agreement, unpacking back to GGUF's bytes, and typed errors.

use baton_core::parallel::{ScopedThreads, SingleThread};
use baton_core::Parallel;
use baton_kernels::packed::{packable, GROUP_ROWS};
use baton_kernels::{dequantize_row, matmul, matmul_packed, matmul_packed_columns, quantize_row, with_isa};
use baton_kernels::{DType, Isa, KernelError, MatMut, MatRef, PackedWeights, Scratch, WeightMatrix};

use crate::common::{for_each_isa, isas, nmse, randomize_integers, Rng};

const TYPES: [DType; 6] = [DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::MXFP4];
/// Weight rows: one group and less, more than one, a partial last group.
const ROWS: [usize; 4] = [1, 7, 9, 37];
const KS: [usize; 4] = [32, 64, 96, 576];
/// Activation rows: the 4-row tiles, every remainder, several groups of tiles.
const MS: [usize; 8] = [1, 2, 3, 4, 5, 9, 17, 64];
/// Rows of `x` to draw batches from (a batch of `m` starts at row `m % 3`).
const X_ROWS: usize = 67;

struct Case {
    dtype: DType,
    n: usize,
    k: usize,
    w: Vec<u8>,
    x: Vec<f32>,
}

impl Case {
    fn new(dtype: DType, n: usize, k: usize, rng: &mut Rng) -> Case {
        let row_bytes = dtype.row_bytes(k).expect("whole blocks");
        let mut w = vec![0u8; n * row_bytes];
        for (r, row) in w.chunks_exact_mut(row_bytes).enumerate() {
            quantize_row(dtype, &rng.vec(k, [0.02, 1.0, 30.0][r % 3]), row).expect("row sizes match");
            // Every other Q8_0 or MXFP4 row: raw random integers.
            if r % 2 == 1 {
                randomize_integers(dtype, row, rng);
            }
        }
        Case { dtype, n, k, w, x: rng.vec(X_ROWS * k, 1.0) }
    }

    fn weights(&self) -> WeightMatrix<'_> {
        WeightMatrix::contiguous(self.dtype, &self.w, self.n, self.k).expect("whole blocks")
    }

    fn packed(&self) -> PackedWeights {
        PackedWeights::pack(&self.weights(), &SingleThread).expect("valid matrix").expect("packable type")
    }

    fn x(&self, first: usize, m: usize) -> MatRef<'_> {
        MatRef::contiguous(&self.x[first * self.k..][..m * self.k], m, self.k)
    }

    /// Rows `first..first + m` of `x` times the unpacked `Wᵀ`.
    fn unpacked(&self, first: usize, m: usize) -> Vec<f32> {
        let mut y = vec![f32::NAN; m * self.n];
        let mut out = MatMut::contiguous(&mut y, m, self.n);
        matmul(&SingleThread, &self.weights(), &self.x(first, m), &mut out, &mut Scratch::new()).expect("shapes match");
        y
    }

    /// As [`Case::unpacked`] with the packed matrix, on `parallel`.
    fn packed_product(&self, w: &PackedWeights, parallel: &dyn Parallel, first: usize, m: usize) -> Vec<f32> {
        let mut y = vec![f32::NAN; m * self.n];
        let mut out = MatMut::contiguous(&mut y, m, self.n);
        matmul_packed(parallel, w, &self.x(first, m), &mut out, &mut Scratch::new()).expect("shapes match");
        y
    }

    /// As [`Case::packed_product`] on this thread, in uneven column ranges
    /// that cut groups (3..29 among them).
    fn packed_in_pieces(&self, w: &PackedWeights, first: usize, m: usize) -> Vec<f32> {
        let mut y = vec![f32::NAN; m * self.n];
        let mut out = MatMut::contiguous(&mut y, m, self.n);
        let mut scratch = Scratch::new();
        let cuts = [0, 3.min(self.n), 29.min(self.n), self.n];
        for range in cuts.windows(2) {
            matmul_packed_columns(w, &self.x(first, m), &mut out, range[0]..range[1], &mut scratch)
                .expect("shapes match");
        }
        y
    }

    /// `Σ_j |x_ij w_rj|` per output (the scale of its rounding errors), and
    /// the exact products in f64, from the decoded weights.
    fn reference(&self, first: usize, m: usize) -> (Vec<f64>, Vec<f64>) {
        let row_bytes = self.dtype.row_bytes(self.k).expect("whole blocks");
        let mut w = vec![0.0f32; self.k];
        let decoded: Vec<Vec<f32>> = self
            .w
            .chunks_exact(row_bytes)
            .map(|row| {
                dequantize_row(self.dtype, row, &mut w).expect("row sizes match");
                w.clone()
            })
            .collect();
        let (mut magnitude, mut exact) = (Vec::new(), Vec::new());
        for x in self.x[first * self.k..][..m * self.k].chunks_exact(self.k) {
            for w in &decoded {
                magnitude.push(x.iter().zip(w).map(|(&a, &b)| f64::from(a * b).abs()).sum());
                exact.push(x.iter().zip(w).map(|(&a, &b)| f64::from(a) * f64::from(b)).sum());
            }
        }
        (magnitude, exact)
    }
}

fn cases(seed: u64) -> Vec<Case> {
    let mut rng = Rng::new(seed);
    let mut cases = Vec::new();
    for dtype in TYPES {
        for n in ROWS {
            for k in KS {
                cases.push(Case::new(dtype, n, k, &mut rng));
            }
        }
    }
    cases
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The packed and the unpacked products differ only by the order of their
/// f32 sums (the integer dot products are exact in both): within a few f32
/// steps of `Σ |x w|` per output. (Against the f64 product, see the next
/// test: one output alone is too noisy a sample of the 8-bit rounding.)
#[test]
fn packed_products_match_the_unpacked_ones() {
    for case in cases(5) {
        let (dtype, n, k) = (case.dtype, case.n, case.k);
        let w = case.packed();
        for_each_isa(|isa| {
            for m in [1, 5, 17] {
                let first = m % 3;
                let packed = case.packed_product(&w, &SingleThread, first, m);
                let unpacked = case.unpacked(first, m);
                let (magnitude, _) = case.reference(first, m);
                for (idx, ((&p, &u), &scale)) in packed.iter().zip(&unpacked).zip(&magnitude).enumerate() {
                    let diff = f64::from(p - u).abs();
                    assert!(diff <= 1e-5 * scale, "{dtype} {isa:?} n {n} k {k} m {m} [{idx}]: {p} vs unpacked {u}");
                }
            }
        });
    }
}

/// Over every case together, the packed product is as close to the f64
/// product as the unpacked matmul's bound (1e-4, tests/it/matmul.rs).
#[test]
fn packed_products_are_within_the_matmul_bound() {
    for dtype in TYPES {
        for_each_isa(|isa| {
            let (mut all, mut all_exact) = (Vec::new(), Vec::new());
            for case in cases(7).iter().filter(|c| c.dtype == dtype) {
                let w = case.packed();
                let m = 9;
                all.extend(case.packed_product(&w, &SingleThread, 0, m));
                all_exact.extend(case.reference(0, m).1);
            }
            let e = nmse(&all, &all_exact);
            assert!(e <= 1e-4, "{dtype} {isa:?}: nmse {e:e} > 1e-4");
        });
    }
}

/// Row invariance: every batch, thread count and column split gives each
/// output the bits of its activation row multiplied alone.
#[test]
fn packed_rows_are_bit_identical_to_the_rows_alone() {
    let mut failures = Vec::new();
    for case in cases(11) {
        let (dtype, n, k) = (case.dtype, case.n, case.k);
        let w = case.packed();
        for_each_isa(|isa| {
            let alone: Vec<Vec<f32>> = (0..X_ROWS).map(|r| case.packed_product(&w, &SingleThread, r, 1)).collect();
            for m in MS {
                let first = m % 3;
                let runs = [
                    ("1 thread", case.packed_product(&w, &SingleThread, first, m)),
                    ("2 threads", case.packed_product(&w, &ScopedThreads(2), first, m)),
                    ("column pieces", case.packed_in_pieces(&w, first, m)),
                ];
                for (how, y) in runs {
                    let want: Vec<f32> = alone[first..first + m].concat();
                    if bits(&y) != bits(&want) {
                        failures.push(format!("{dtype} {isa:?} n {n} k {k} m {m} ({how})"));
                    }
                }
            }
        });
    }
    assert!(failures.is_empty(), "{} batches differ from their rows alone:\n{}", failures.len(), failures.join("\n"));
}

/// Every batch size from 1 to 65 (8-row tiles with every remainder, 4-row
/// tiles at AVX2; two groups at once and a lone fifth group at AVX-512)
/// gives each row the bits of the row alone, at every level, on 1 and 2
/// threads.
#[test]
fn every_batch_size_to_65_gives_each_row_its_bits_alone() {
    let mut rng = Rng::new(17);
    let mut failures = Vec::new();
    for dtype in TYPES {
        let case = Case::new(dtype, 40, 64, &mut rng);
        let w = case.packed();
        for_each_isa(|isa| {
            let alone: Vec<Vec<f32>> = (0..X_ROWS).map(|r| case.packed_product(&w, &SingleThread, r, 1)).collect();
            for m in 1..=65 {
                let first = m % 3;
                let want = bits(&alone[first..first + m].concat());
                for (how, parallel) in [("1 thread", &SingleThread as &dyn Parallel), ("2 threads", &ScopedThreads(2))]
                {
                    if bits(&case.packed_product(&w, parallel, first, m)) != want {
                        failures.push(format!("{dtype} {isa:?} m {m} ({how})"));
                    }
                }
            }
        });
    }
    assert!(failures.is_empty(), "{} batches differ from their rows alone:\n{}", failures.len(), failures.join("\n"));
}

/// Matrices of one type sharing an input, in one pass of the threads:
/// each output the bits of its own product, whatever the rows, threads
/// and matrix sizes (groups, pairs and partial groups side by side); mixed
/// types and a missing output are errors.
#[test]
fn one_pass_over_several_matrices_gives_each_its_own_bits() {
    let mut rng = Rng::new(23);
    for dtype in TYPES {
        let cases: Vec<Case> = [40, 9, 37, 1].into_iter().map(|n| Case::new(dtype, n, 64, &mut rng)).collect();
        let packed: Vec<PackedWeights> = cases.iter().map(Case::packed).collect();
        let refs: Vec<&PackedWeights> = packed.iter().collect();
        for_each_isa(|isa| {
            for m in [1, 3, 8, 17] {
                for parallel in [&SingleThread as &dyn Parallel, &ScopedThreads(2)] {
                    let mut ys: Vec<Vec<f32>> = cases.iter().map(|c| vec![f32::NAN; m * c.n]).collect();
                    let mut outs: Vec<MatMut<'_>> =
                        ys.iter_mut().zip(&cases).map(|(y, c)| MatMut::contiguous(y, m, c.n)).collect();
                    // Every case holds the same activations' shape; the first's are shared.
                    let x = cases[0].x(1, m);
                    baton_kernels::matmul_packed_many(parallel, &refs, &x, &mut outs, &mut Scratch::new())
                        .expect("one pass");
                    for ((y, case), w) in ys.iter().zip(&cases).zip(&packed) {
                        let mut alone = vec![f32::NAN; m * case.n];
                        let mut out = MatMut::contiguous(&mut alone, m, case.n);
                        matmul_packed(&SingleThread, w, &x, &mut out, &mut Scratch::new()).expect("alone");
                        assert_eq!(
                            bits(y),
                            bits(&alone),
                            "{dtype} {isa:?} n {} m {m} ({} threads)",
                            case.n,
                            parallel.threads()
                        );
                    }
                }
            }
        });
    }
    let mut rng = Rng::new(29);
    let (a, b) = (Case::new(DType::Q4_0, 8, 64, &mut rng), Case::new(DType::Q8_0, 8, 64, &mut rng));
    let (pa, pb) = (a.packed(), b.packed());
    let (mut ya, mut yb) = (vec![0.0f32; 8], vec![0.0f32; 8]);
    let mut outs = vec![MatMut::contiguous(&mut ya, 1, 8), MatMut::contiguous(&mut yb, 1, 8)];
    let mixed =
        baton_kernels::matmul_packed_many(&SingleThread, &[&pa, &pb], &a.x(0, 1), &mut outs, &mut Scratch::new());
    assert!(matches!(mixed, Err(KernelError::MixedTypes { first: DType::Q4_0, other: DType::Q8_0 })), "{mixed:?}");
    let short =
        baton_kernels::matmul_packed_many(&SingleThread, &[&pa, &pa], &a.x(0, 1), &mut outs[..1], &mut Scratch::new());
    assert!(matches!(short, Err(KernelError::LengthMismatch { .. })), "{short:?}");
}

/// Every level does the same f32 operations on exact integer dot products,
/// so the levels agree bit for bit; except Q8_0 on AVX-512, whose weights
/// enter as `w + 128` with an offset term (checked against AVX2 in
/// `packed_products_match_the_unpacked_ones`' bound instead).
#[test]
fn every_level_gives_the_portable_bits() {
    for case in cases(13) {
        let w = case.packed();
        let levels: Vec<Isa> =
            isas().into_iter().filter(|&isa| !(case.dtype == DType::Q8_0 && isa == Isa::Avx512)).collect();
        let scalar = with_isa(Isa::Scalar, || case.packed_product(&w, &SingleThread, 0, 5));
        for isa in levels {
            let y = with_isa(isa, || case.packed_product(&w, &SingleThread, 0, 5));
            assert_eq!(
                bits(&y),
                bits(&scalar),
                "{} {isa:?} n {} k {}: differs from scalar",
                case.dtype,
                case.n,
                case.k
            );
        }
    }
}

/// `unpack_row` gives back GGUF's bytes, for raw random blocks too (every
/// bit pattern of scales, minimums, fifth bits and integers).
#[test]
fn unpacked_rows_are_the_original_bytes() {
    let mut rng = Rng::new(3);
    for dtype in TYPES {
        for (n, k) in [(1, 32), (9, 96), (37, 576)] {
            let row_bytes = dtype.row_bytes(k).expect("whole blocks");
            let raw: Vec<u8> = (0..n * row_bytes).map(|_| rng.next_u64() as u8).collect();
            let w = WeightMatrix::contiguous(dtype, &raw, n, k).expect("whole blocks");
            for parallel in [&SingleThread as &dyn Parallel, &ScopedThreads(2)] {
                let packed = PackedWeights::pack(&w, parallel).expect("valid").expect("packable");
                assert_eq!(packed.bytes(), n.div_ceil(GROUP_ROWS) * GROUP_ROWS * row_bytes, "{dtype}: same bytes");
                assert_eq!((packed.dtype(), packed.rows(), packed.cols()), (dtype, n, k));
                let mut out = vec![0u8; row_bytes];
                for (r, want) in raw.chunks_exact(row_bytes).enumerate() {
                    packed.unpack_row(r, &mut out).expect("row in range");
                    assert_eq!(&out, want, "{dtype} n {n} k {k} row {r}");
                }
            }
        }
    }
}

/// Bad shapes and ranges are typed errors; other types have no packed form.
#[test]
fn packed_shape_errors_are_typed() {
    let case = Case::new(DType::Q4_1, 9, 64, &mut Rng::new(2));
    let w = case.packed();
    let mut scratch = Scratch::new();
    let mut y = vec![0.0f32; 2 * 10];
    let x_short = MatRef::contiguous(&case.x[..2 * 32], 2, 32);
    assert!(
        matmul_packed(&SingleThread, &w, &x_short, &mut MatMut::contiguous(&mut y[..18], 2, 9), &mut scratch).is_err()
    );
    let wide = &mut MatMut::contiguous(&mut y, 2, 10);
    assert!(matmul_packed(&SingleThread, &w, &case.x(0, 2), wide, &mut scratch).is_err());
    let rows = &mut MatMut::contiguous(&mut y[..9], 1, 9);
    assert!(matmul_packed(&SingleThread, &w, &case.x(0, 2), rows, &mut scratch).is_err());
    let good = &mut MatMut::contiguous(&mut y[..18], 2, 9);
    let range = matmul_packed_columns(&w, &case.x(0, 2), good, 3..10, &mut scratch);
    assert!(matches!(range, Err(KernelError::RangeOutOfBounds { .. })), "{range:?}");
    #[allow(clippy::reversed_empty_ranges)]
    let backwards = matmul_packed_columns(&w, &case.x(0, 2), good, 5..4, &mut scratch);
    assert!(matches!(backwards, Err(KernelError::RangeOutOfBounds { .. })), "{backwards:?}");
    assert!(matmul_packed_columns(&w, &case.x(0, 2), good, 4..4, &mut scratch).is_ok(), "an empty range is fine");

    let row_bytes = DType::Q4_1.row_bytes(64).expect("whole blocks");
    assert!(matches!(w.unpack_row(9, &mut vec![0; row_bytes]), Err(KernelError::RangeOutOfBounds { .. })));
    assert!(w.unpack_row(0, &mut vec![0; row_bytes + 1]).is_err());

    let short =
        WeightMatrix { dtype: DType::Q4_1, data: &case.w[..100], rows: 9, cols: 64, row_stride_bytes: row_bytes };
    assert!(PackedWeights::pack(&short, &SingleThread).is_err(), "a matrix past its data");
    let floats = vec![0u8; 4 * 64];
    let f32_matrix = WeightMatrix::contiguous(DType::F32, &floats, 1, 64).expect("valid");
    assert!(PackedWeights::pack(&f32_matrix, &SingleThread).expect("valid").is_none());
    assert!(TYPES.iter().all(|&t| packable(t)) && !packable(DType::F32));
}

/// `Scratch::reuse_next`: a product of the same rows right after another
/// takes their quantized blocks, which are the bits of quantizing again;
/// rows changed in place are quantized again when the caller says so;
/// other rows, another shape or the other form of blocks are quantized
/// whatever the caller says.
#[test]
fn reused_activations_give_the_bits_of_quantizing_again() {
    let mut rng = Rng::new(91);
    let (n, k, m) = (16, 256, 5);
    let matrix = |dtype: DType, rng: &mut Rng| -> Vec<u8> {
        let row_bytes = dtype.row_bytes(k).expect("whole blocks");
        let mut w = vec![0u8; n * row_bytes];
        for row in w.chunks_exact_mut(row_bytes) {
            quantize_row(dtype, &rng.vec(k, 1.0), row).expect("row");
        }
        w
    };
    let pack = |dtype: DType, bytes: &[u8]| {
        let w = WeightMatrix { dtype, data: bytes, rows: n, cols: k, row_stride_bytes: dtype.row_bytes(k).unwrap() };
        PackedWeights::pack(&w, &SingleThread).expect("valid").expect("packable")
    };
    let (q4_1a, q4_1b, q4_k) =
        (matrix(DType::Q4_1, &mut rng), matrix(DType::Q4_1, &mut rng), matrix(DType::Q4_K, &mut rng));
    let (first, second, kquant) = (pack(DType::Q4_1, &q4_1a), pack(DType::Q4_1, &q4_1b), pack(DType::Q4_K, &q4_k));
    let product = |w: &PackedWeights, x: &[f32], rows: usize, scratch: &mut Scratch| -> Vec<f32> {
        let mut y = vec![0.0f32; rows * n];
        let xm = MatRef::contiguous(&x[..rows * k], rows, k);
        matmul_packed(&SingleThread, w, &xm, &mut MatMut::contiguous(&mut y, rows, n), scratch).expect("product");
        y
    };
    let alone = |w: &PackedWeights, x: &[f32], rows: usize| product(w, x, rows, &mut Scratch::new());
    let mut x = rng.vec(m * k, 1.0);
    let mut scratch = Scratch::new();
    product(&first, &x, m, &mut scratch);
    scratch.reuse_next(true);
    assert_eq!(product(&second, &x, m, &mut scratch), alone(&second, &x, m), "the same rows reused");
    // Changed in place: quantized again when the caller says so...
    x[3] += 10.0;
    scratch.reuse_next(false);
    assert_eq!(product(&second, &x, m, &mut scratch), alone(&second, &x, m), "changed rows quantized again");
    // ...and reused when it (wrongly) says they did not change: the old
    // blocks were taken, which is what the caller's word is for.
    let before = alone(&second, &x, m);
    x[3] -= 10.0;
    scratch.reuse_next(true);
    assert_eq!(product(&second, &x, m, &mut scratch), before, "the held blocks are taken on the caller's word");
    // Another shape (fewer rows at the same address) or the other form.
    scratch.reuse_next(true);
    assert_eq!(product(&second, &x, m - 1, &mut scratch), alone(&second, &x, m - 1), "another shape");
    scratch.reuse_next(true);
    assert_eq!(product(&kquant, &x, m, &mut scratch), alone(&kquant, &x, m), "the K-quants' blocks");
    // The word is for one call: without it, the next product quantizes.
    x[0] += 1.0;
    assert_eq!(product(&second, &x, m, &mut scratch), alone(&second, &x, m), "one call only");
}
