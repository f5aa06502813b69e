//! Packed against unpacked weights (`BATON_BENCH_PACKED=1`): GFLOP/s of
//! `matmul` and `matmul_packed` side by side, on 1 thread and on 2 (the
//! spinning pool), with the packed/unpacked speed ratio and both forms'
//! single-thread weight bandwidth (GB/s of weight bytes per call; the
//! figure that matters at m = 1, where decode is bound by memory or by the
//! integer work per weight byte). Shapes of SmolLM2-135M (hidden 576, FFN
//! 1536, vocabulary 49152) and Gemma 3 270M (hidden 640, FFN 2048,
//! vocabulary 262144: m = 1 only), and gpt-oss-20b's expert matrices (2880
//! x 2880); the vocabulary matrices in Q8_0 only (the
//! output types of those models' quantized files). Each figure is the best
//! of 3 rounds that alternate the two forms; one thread's in CPU time (as
//! the per-level table), two threads' in wall-clock time (a median).
//! `BATON_BENCH_TYPES` selects types, `BATON_BENCH_PACKED=decode` runs m = 1
//! only.

use std::hint::black_box;

use baton_core::parallel::SingleThread;
use baton_kernels::WeightMatrix;
use baton_kernels::{matmul, matmul_packed, quantize_row, DType, MatMut, MatRef, PackedWeights, Parallel, Scratch};

use super::{cpu_time, selected, time, Pool};

/// `(n, k, m values)`: the layers' matrices, then the vocabulary's.
const SHAPES: [(usize, usize, &[usize]); 8] = [
    (576, 576, &[1, 4, 8, 64]),
    (1536, 576, &[1, 4, 8, 64]),
    (576, 1536, &[1, 4, 8, 64]),
    (2048, 640, &[1, 4, 8, 64]),
    (640, 2048, &[1, 4, 8, 64]),
    (2880, 2880, &[1, 8, 64]),
    (49152, 576, &[1, 8, 64]),
    (262144, 640, &[1]),
];
/// Rows above which a matrix is a vocabulary (Q8_0 only).
const VOCABULARY: usize = 40_000;

/// `n x k` weights of `dtype` quantized row by row from a xorshift stream
/// (no f32 copy of the whole matrix), and `m_max x k` activations.
fn problem(dtype: DType, n: usize, k: usize, m_max: usize) -> (Vec<u8>, Vec<f32>) {
    let mut seed = 11u32;
    let mut rand = move || {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        (seed as f32 / u32::MAX as f32) - 0.5
    };
    let row_bytes = dtype.row_bytes(k).expect("k is whole blocks");
    let mut w = vec![0u8; n * row_bytes];
    let mut row = vec![0.0f32; k];
    for out in w.chunks_exact_mut(row_bytes) {
        row.iter_mut().for_each(|v| *v = rand());
        quantize_row(dtype, &row, out).expect("row sizes match");
    }
    (w, (0..m_max * k).map(|_| rand()).collect())
}

/// Seconds per call of the unpacked and the packed product on `parallel`:
/// the best of 3 alternating rounds.
fn pair(
    parallel: &dyn Parallel,
    w: &WeightMatrix<'_>,
    packed: &PackedWeights,
    x: &MatRef<'_>,
    y: &mut [f32],
) -> (f64, f64) {
    let (m, n) = (x.rows, w.rows);
    let mut scratch = Scratch::new();
    let (mut unpacked, mut fast) = (f64::INFINITY, f64::INFINITY);
    // One thread: its CPU time (time spent waiting for a core shared with
    // other jobs does not count); two: wall-clock time.
    let clock: fn(&mut dyn FnMut()) -> f64 = if parallel.threads() == 1 { |f| cpu_time(f) } else { |f| time(f) };
    for _round in 0..3 {
        let mut out = MatMut::contiguous(&mut y[..m * n], m, n);
        unpacked = unpacked.min(clock(&mut || {
            matmul(parallel, w, x, &mut out, &mut scratch).expect("shapes match");
            black_box(&mut out);
        }));
        fast = fast.min(clock(&mut || {
            matmul_packed(parallel, packed, x, &mut out, &mut scratch).expect("shapes match");
            black_box(&mut out);
        }));
    }
    (unpacked, fast)
}

/// Prints the table (see the module docs).
pub fn bench_packed() {
    println!(
        "{:<5} {:>6} {:>5} {:>3} | {:>8} {:>8} {:>6} | {:>8} {:>8} {:>6} | {:>7} {:>7}",
        "type", "n", "k", "m", "unp 1T", "pack 1T", "ratio", "unp 2T", "pack 2T", "ratio", "GB/s u1", "GB/s p1"
    );
    let types = selected(&[DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::MXFP4]);
    let pool = Pool::new(2);
    let decode = std::env::var("BATON_BENCH_PACKED").is_ok_and(|v| v == "decode");
    for (n, k, ms) in SHAPES {
        for dtype in types.iter().copied().filter(|&t| n < VOCABULARY || t == DType::Q8_0) {
            let m_max = ms.iter().copied().max().unwrap_or(1);
            let (bytes, x) = problem(dtype, n, k, m_max);
            let w = WeightMatrix::contiguous(dtype, &bytes, n, k).expect("whole blocks");
            let packed = PackedWeights::pack(&w, &pool).expect("valid").expect("packable");
            let mut y = vec![0.0f32; m_max * n];
            for &m in ms.iter().filter(|&&m| m == 1 || !decode) {
                let x = MatRef::contiguous(&x[..m * k], m, k);
                let (u1, p1) = pair(&SingleThread, &w, &packed, &x, &mut y);
                let (u2, p2) = pair(&pool, &w, &packed, &x, &mut y);
                let gflops = |t: f64| 2.0 * (m * n * k) as f64 / t / 1e9;
                let gbs = |t: f64| bytes.len() as f64 / t / 1e9;
                println!(
                    "{:<5} {:>6} {:>5} {:>3} | {:>8.1} {:>8.1} {:>5.2}x | {:>8.1} {:>8.1} {:>5.2}x | {:>7.1} {:>7.1}",
                    dtype.name(),
                    n,
                    k,
                    m,
                    gflops(u1),
                    gflops(p1),
                    u1 / p1,
                    gflops(u2),
                    gflops(p2),
                    u2 / p2,
                    gbs(u1),
                    gbs(p1),
                );
            }
        }
    }
}
