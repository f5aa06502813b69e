//! Every SIMD level against the portable kernels on random blocks: the
//! integer dot products are exact on every level, so results differ only by
//! the order of the f32 sums of per-block (or per-lane) terms, bounded by a
//! few f32 steps of `Σ |x w|`. Odd block counts exercise the AVX-512 pair
//! loop's last single block; Q8_0 rows of raw random bytes include `-128`,
//! and MXFP4 rows of raw codes code 8, which the reference quantizer never
//! writes.

use baton_core::parallel::SingleThread;
use baton_kernels::{dequantize_row, matmul, quantize_row, with_isa, DType, Isa, WEIGHT_TYPES};
use baton_kernels::{MatMut, MatRef, Scratch, WeightMatrix};

use crate::common::{isas, randomize_integers, Rng};

/// Relative bound on the difference between two levels, against `Σ |x w|`.
const SUM_ORDER_BOUND: f64 = 1e-5;

fn k_values(dtype: DType) -> &'static [usize] {
    if dtype.is_k_quant() {
        &[256, 768, 1280]
    } else if dtype.is_quantized() {
        &[32, 96, 160, 608]
    } else {
        &[1, 15, 16, 17, 100, 333]
    }
}

/// `n` rows of `k` random weights of `dtype`, each row at its own scale;
/// every other Q8_0 or MXFP4 row is raw random integers under the
/// quantizer's scale.
fn random_weights(dtype: DType, n: usize, k: usize, rng: &mut Rng) -> Vec<u8> {
    let row_bytes = dtype.row_bytes(k).expect("whole blocks");
    let mut bytes = vec![0u8; n * row_bytes];
    for (r, row) in bytes.chunks_exact_mut(row_bytes).enumerate() {
        let scale = [0.02, 1.0, 30.0][r % 3];
        quantize_row(dtype, &rng.vec(k, scale), row).expect("row sizes match");
        if r % 2 == 1 {
            randomize_integers(dtype, row, rng);
        }
    }
    bytes
}

fn run(isa: Isa, w: &WeightMatrix<'_>, x: &[f32], m: usize) -> Vec<f32> {
    let mut y = vec![0.0f32; m * w.rows];
    let x = MatRef::contiguous(x, m, w.cols);
    with_isa(isa, || matmul(&SingleThread, w, &x, &mut MatMut::contiguous(&mut y, m, w.rows), &mut Scratch::new()))
        .expect("shapes match");
    y
}

#[test]
fn every_simd_level_matches_scalar_on_random_blocks() {
    let levels = isas();
    assert_eq!(levels[0], Isa::Scalar);
    let mut rng = Rng::new(19);
    for dtype in WEIGHT_TYPES {
        for &k in k_values(dtype) {
            for (m, n) in [(1, 1), (1, 7), (2, 5), (3, 9), (4, 8), (5, 3), (9, 11)] {
                let bytes = random_weights(dtype, n, k, &mut rng);
                let w = WeightMatrix::contiguous(dtype, &bytes, n, k).expect("whole blocks");
                let x = rng.vec(m * k, 1.0);
                let mut decoded = vec![0.0f32; n * k];
                for (row, out) in bytes.chunks_exact(bytes.len() / n).zip(decoded.chunks_exact_mut(k)) {
                    dequantize_row(dtype, row, out).expect("row sizes match");
                }
                let scalar = run(Isa::Scalar, &w, &x, m);
                for &isa in &levels[1..] {
                    let simd = run(isa, &w, &x, m);
                    for (index, (&got, &want)) in simd.iter().zip(&scalar).enumerate() {
                        let (i, j) = (index / n, index % n);
                        let magnitude: f64 = x[i * k..][..k]
                            .iter()
                            .zip(&decoded[j * k..][..k])
                            .map(|(&a, &b)| f64::from(a).abs() * f64::from(b).abs())
                            .sum();
                        let bound = SUM_ORDER_BOUND * magnitude + 1e-30;
                        let diff = (f64::from(got) - f64::from(want)).abs();
                        assert!(
                            diff <= bound,
                            "{dtype} {isa:?} m {m} n {n} k {k} ({i}, {j}): {got} vs scalar {want} (bound {bound:e})"
                        );
                    }
                }
            }
        }
    }
}
