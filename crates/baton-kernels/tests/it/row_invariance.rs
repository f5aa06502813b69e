//! Row invariance (the contract in `baton_kernels::matmul`'s docs): every
//! element of `y = x · Wᵀ` depends only on its activation row, its weight
//! row, the shape and the instruction set, bit for bit, never on how many
//! other activation rows share the call, which they are, the thread count or
//! the column range a thread gets. Batched serving relies on it: a sequence's
//! logits must not change when other sequences join its batch. Packed
//! weights (`matmul_packed`) are held to the same contract in `packed.rs`.

use baton_core::parallel::{ScopedThreads, SingleThread};
use baton_core::Parallel;
use baton_kernels::{matmul, matmul_columns, quantize_row, DType, Isa, WEIGHT_TYPES};
use baton_kernels::{MatMut, MatRef, Scratch, WeightMatrix};

use crate::common::{for_each_isa, Rng};

/// Activation row counts of a batch: the 4-row tiles, every remainder, more
/// than one 64-row block.
const BATCH_ROWS: [usize; 11] = [1, 2, 3, 4, 5, 7, 8, 9, 17, 64, 65];
/// Rows of `x` to draw batches from (a batch of `m` starts at row `m % 3`).
const X_ROWS: usize = 67;

/// `(n, k)` shapes per type: `n` never a multiple of the tile widths, `k`
/// with every tail the float kernels have, an odd block count for the
/// block pairs of the AVX-512 kernels, and one matrix over 256 KiB (where a
/// lone row streams the weights).
fn shapes(dtype: DType) -> &'static [(usize, usize)] {
    if dtype.is_k_quant() {
        &[(13, 256), (7, 768), (203, 2048)]
    } else if dtype.is_quantized() {
        &[(13, 96), (7, 160), (203, 3008)]
    } else {
        &[(13, 100), (7, 333), (203, 1000)]
    }
}

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
        for row in w.chunks_exact_mut(row_bytes) {
            quantize_row(dtype, &rng.vec(k, 0.5), row).expect("row sizes match");
        }
        Case { dtype, n, k, w, x: rng.vec(X_ROWS * k, 1.0) }
    }

    fn weights(&self) -> WeightMatrix<'_> {
        WeightMatrix::contiguous(self.dtype, &self.w, self.n, self.k).expect("whole blocks")
    }

    /// `x` rows `first..first + m` times `Wᵀ` on `parallel`.
    fn matmul(&self, parallel: &dyn Parallel, first: usize, m: usize) -> Vec<f32> {
        let mut y = vec![f32::NAN; m * self.n];
        let x = MatRef::contiguous(&self.x[first * self.k..][..m * self.k], m, self.k);
        let mut out = MatMut::contiguous(&mut y, m, self.n);
        matmul(parallel, &self.weights(), &x, &mut out, &mut Scratch::new()).expect("shapes match");
        y
    }

    /// As [`Case::matmul`] on this thread, in uneven column pieces (one of
    /// them a single column).
    fn matmul_in_pieces(&self, first: usize, m: usize) -> Vec<f32> {
        let mut y = vec![f32::NAN; m * self.n];
        let x = MatRef::contiguous(&self.x[first * self.k..][..m * self.k], m, self.k);
        let mut out = MatMut::contiguous(&mut y, m, self.n);
        let mut scratch = Scratch::new();
        let cuts = [0, 1, 2, self.n / 2 + 1, self.n];
        for range in cuts.windows(2) {
            matmul_columns(&self.weights(), &x, &mut out, range[0]..range[1], &mut scratch).expect("shapes match");
        }
        y
    }
}

/// The first row and column where `batch` (rows `first..`) differs in bits
/// from `alone` (every row of `x` computed by itself), if any.
fn first_difference(alone: &[Vec<f32>], batch: &[f32], first: usize, n: usize) -> Option<(usize, usize, f32, f32)> {
    batch.chunks_exact(n).enumerate().find_map(|(i, row)| {
        let want = &alone[first + i];
        (0..n).find(|&j| row[j].to_bits() != want[j].to_bits()).map(|j| (i, j, row[j], want[j]))
    })
}

fn check(case: &Case, isa: Isa, failures: &mut Vec<String>) {
    let (dtype, n, k) = (case.dtype, case.n, case.k);
    let alone: Vec<Vec<f32>> = (0..X_ROWS).map(|r| case.matmul(&SingleThread, r, 1)).collect();
    for m in BATCH_ROWS {
        let first = m % 3;
        let runs: [(&str, Vec<f32>); 3] = [
            ("1 thread", case.matmul(&SingleThread, first, m)),
            ("2 threads", case.matmul(&ScopedThreads(2), first, m)),
            ("column pieces", case.matmul_in_pieces(first, m)),
        ];
        for (how, y) in runs {
            if let Some((i, j, got, want)) = first_difference(&alone, &y, first, n) {
                failures.push(format!(
                    "{dtype} {isa:?} n {n} k {k} m {m} ({how}): y[{i}][{j}] = {got:e} ({:#x}), alone {want:e} ({:#x})",
                    got.to_bits(),
                    want.to_bits()
                ));
            }
        }
    }
}

#[test]
fn every_row_is_bit_identical_to_the_row_computed_alone() {
    let mut rng = Rng::new(17);
    let mut failures = Vec::new();
    for dtype in WEIGHT_TYPES {
        for &(n, k) in shapes(dtype) {
            let case = Case::new(dtype, n, k, &mut rng);
            for_each_isa(|isa| check(&case, isa, &mut failures));
        }
    }
    assert!(failures.is_empty(), "{} batches differ from their rows alone:\n{}", failures.len(), failures.join("\n"));
}

/// The K-quant AVX-512 and AVX-VNNI tiles sum the AVX2 tile's exact
/// integers and end in its f32 operations, so on K-quants every SIMD level
/// agrees bit for bit as well.
#[test]
fn k_quant_simd_tiles_give_the_avx2_bits() {
    let above: Vec<Isa> = Isa::available().into_iter().filter(|&isa| isa > Isa::Avx2).collect();
    if above.is_empty() {
        eprintln!("skipped: this CPU has no level above AVX2");
        return;
    }
    let mut rng = Rng::new(23);
    for dtype in WEIGHT_TYPES.into_iter().filter(|t| t.is_k_quant()) {
        for &(n, k) in shapes(dtype) {
            let case = Case::new(dtype, n, k, &mut rng);
            for m in [1, 2, 3, 5, 64] {
                let avx2 = baton_kernels::with_isa(Isa::Avx2, || case.matmul(&SingleThread, 0, m));
                for &isa in &above {
                    let got = baton_kernels::with_isa(isa, || case.matmul(&SingleThread, 0, m));
                    let differ = avx2.iter().zip(&got).position(|(a, b)| a.to_bits() != b.to_bits());
                    assert_eq!(differ, None, "{dtype} n {n} k {k} m {m}: AVX2 and {isa:?} differ at index {differ:?}");
                }
            }
        }
    }
}
