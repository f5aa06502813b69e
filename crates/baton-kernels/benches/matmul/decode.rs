//! Decode kernels against the memory bandwidth (`BATON_BENCH_DECODE=1`):
//! one activation row times matrices far larger than the caches, in GB/s
//! of packed weight bytes read, beside a read-only sum over a buffer as
//! large, on the same threads, the two alternating round by round (the
//! ratio is what counts on a busy machine). Shapes of a mixture-of-experts
//! decode step: Qwen3-30B-A3B's output matrix (Q6_K, 151936 x 2048) and
//! experts (Q4_K / Q5_K / Q6_K, 768 x 2048 and 2048 x 768, 8 chosen of
//! 384: three layers' worth, so a step's experts are rarely in the cache),
//! gpt-oss-20b's experts (MXFP4, 2880 x 2880, 4 of 64) and a Q8_0 output
//! matrix (65536 x 2880). `BATON_BENCH_TYPES` selects types,
//! `BATON_BENCH_THREADS` the thread count (default 2).

use std::hint::black_box;
use std::time::Instant;

use baton_kernels::{matmul_packed, matmul_packed_each, quantize_row, DType, MatMut, MatRef, PackedWeights};
use baton_kernels::{Parallel, Scratch, WeightMatrix};

use baton_core::parallel::SingleThread;

use super::{cpu_time, selected, Pool};

/// A case: the type, `(n, k)`, how many matrices of that shape exist and
/// how many one call reads (1 of 1: a plain `matmul_packed`).
#[derive(Clone, Copy)]
struct Case {
    dtype: DType,
    n: usize,
    k: usize,
    matrices: usize,
    chosen: usize,
}

const fn case(dtype: DType, n: usize, k: usize, matrices: usize, chosen: usize) -> Case {
    Case { dtype, n, k, matrices, chosen }
}

const CASES: [Case; 8] = [
    case(DType::Q6_K, 151_936, 2048, 1, 1),
    case(DType::Q4_K, 768, 2048, 384, 8),
    case(DType::Q4_K, 2048, 768, 384, 8),
    case(DType::Q5_K, 768, 2048, 384, 8),
    case(DType::Q6_K, 2048, 768, 384, 8),
    case(DType::Q8_0, 65_536, 2880, 1, 1),
    case(DType::Q8_0, 2880, 2880, 64, 4),
    case(DType::MXFP4, 2880, 2880, 64, 4),
];

/// One matrix of `case`'s shape from a xorshift stream, packed; its rows
/// are quantized one at a time (no f32 copy of the whole matrix).
fn packed_matrix(case: &Case, seed: u32, parallel: &dyn Parallel) -> PackedWeights {
    let mut seed = seed | 1;
    let mut rand = move || {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        (seed as f32 / u32::MAX as f32) - 0.5
    };
    let row_bytes = case.dtype.row_bytes(case.k).expect("k is whole blocks");
    let mut bytes = vec![0u8; case.n * row_bytes];
    let mut row = vec![0.0f32; case.k];
    for out in bytes.chunks_exact_mut(row_bytes) {
        row.iter_mut().for_each(|v| *v = rand());
        quantize_row(case.dtype, &row, out).expect("row sizes match");
    }
    let w = WeightMatrix::contiguous(case.dtype, &bytes, case.n, case.k).expect("whole blocks");
    PackedWeights::pack(&w, parallel).expect("valid").expect("packable")
}

/// GB/s of a read-only sum of `words` over `parallel`'s threads, each its
/// own slice: the best of 5 passes.
fn read_bandwidth(parallel: &dyn Parallel, words: &[u64]) -> f64 {
    let threads = parallel.threads();
    let chunk = words.len().div_ceil(threads);
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t = Instant::now();
        parallel.run(&|i| {
            let slice = &words[(i * chunk).min(words.len())..((i + 1) * chunk).min(words.len())];
            black_box(slice.iter().fold(0u64, |s, &w| s.wrapping_add(w)));
        });
        best = best.min(t.elapsed().as_secs_f64());
    }
    std::mem::size_of_val(words) as f64 / best / 1e9
}

/// Prints the table (see the module docs).
pub fn bench_decode() {
    let threads = std::env::var("BATON_BENCH_THREADS").ok().and_then(|t| t.parse().ok()).unwrap_or(2);
    let pool = Pool::new(threads);
    let words: Vec<u64> = (0..(512usize << 20) / 8).map(|i| i as u64).collect();
    let types = selected(&[DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_0, DType::MXFP4]);
    println!("{threads} threads; GB/s of packed weights per call (best of 5 rounds), the read sum's beside it");
    println!(
        "{:<6} {:>6} {:>5} {:>7} | {:>8} {:>8} {:>6} | {:>8} | {:>9}",
        "type", "n", "k", "chosen", "kern GB/s", "read GB/s", "ratio", "us/call", "hot 1T GB/s"
    );
    for case in CASES.iter().filter(|c| types.contains(&c.dtype)) {
        let matrices: Vec<PackedWeights> =
            (0..case.matrices).map(|e| packed_matrix(case, 7 + e as u32, &pool)).collect();
        let x: Vec<f32> = (0..case.chosen * case.k).map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0).collect();
        let mut ys = vec![vec![0.0f32; case.n]; case.chosen];
        let mut scratches: Vec<Scratch> = (0..case.chosen).map(|_| Scratch::new()).collect();
        let mut pick = 12345u32;
        let bytes: usize = case.chosen * matrices[0].bytes();
        let calls = (2_000_000_000 / bytes).clamp(4, 2000);
        let (mut kernel, mut read) = (f64::INFINITY, 0.0f64);
        let mut ratio = 0.0f64;
        for _round in 0..5 {
            let t = Instant::now();
            for _ in 0..calls {
                // `chosen` distinct matrices, pseudo-random per call.
                let mut ids: Vec<usize> = Vec::with_capacity(case.chosen);
                while ids.len() < case.chosen {
                    pick ^= pick << 13;
                    pick ^= pick >> 17;
                    pick ^= pick << 5;
                    let e = pick as usize % case.matrices;
                    if !ids.contains(&e) {
                        ids.push(e);
                    }
                }
                if case.chosen == 1 {
                    let x = MatRef::contiguous(&x[..case.k], 1, case.k);
                    let mut y = MatMut::contiguous(&mut ys[0], 1, case.n);
                    matmul_packed(&pool, &matrices[ids[0]], &x, &mut y, &mut scratches[0]).expect("shapes");
                } else {
                    let ws: Vec<&PackedWeights> = ids.iter().map(|&e| &matrices[e]).collect();
                    let xs: Vec<MatRef<'_>> =
                        (0..case.chosen).map(|j| MatRef::contiguous(&x[j * case.k..][..case.k], 1, case.k)).collect();
                    let mut outs: Vec<MatMut<'_>> = ys.iter_mut().map(|y| MatMut::contiguous(y, 1, case.n)).collect();
                    matmul_packed_each(&pool, &ws, &xs, &mut outs, &mut scratches).expect("shapes");
                }
                black_box(&mut ys);
            }
            let seconds = t.elapsed().as_secs_f64() / calls as f64;
            let bandwidth = read_bandwidth(&pool, &words);
            let gbs = bytes as f64 / seconds / 1e9;
            if seconds < kernel {
                kernel = seconds;
            }
            read = read.max(bandwidth);
            ratio = ratio.max(gbs / bandwidth);
        }
        let hot = hot_bandwidth(case);
        println!(
            "{:<6} {:>6} {:>5} {:>3}/{:<3} | {:>8.1} {:>8.1} {:>5.0}% | {:>8.1} | {:>9.1}",
            case.dtype.name(),
            case.n,
            case.k,
            case.chosen,
            case.matrices,
            bytes as f64 / kernel / 1e9,
            read,
            100.0 * ratio,
            kernel * 1e6,
            hot
        );
    }
}

/// One thread's GB/s on a matrix of `case`'s type and `k` that stays in
/// the L2 cache (about 512 KiB): the kernel's own ceiling, memory aside,
/// in CPU time (the best of 3).
fn hot_bandwidth(case: &Case) -> f64 {
    let row_bytes = case.dtype.row_bytes(case.k).expect("k is whole blocks");
    let n = ((512 << 10) / row_bytes).next_multiple_of(16);
    let hot = Case { n, ..*case };
    let w = packed_matrix(&hot, 3, &SingleThread);
    let x: Vec<f32> = (0..case.k).map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0).collect();
    let mut y = vec![0.0f32; n];
    let mut scratch = Scratch::new();
    let x = MatRef::contiguous(&x, 1, case.k);
    let best = (0..3)
        .map(|_| {
            cpu_time(&mut || {
                let mut y = MatMut::contiguous(&mut y, 1, n);
                matmul_packed(&SingleThread, &w, &x, &mut y, &mut scratch).expect("shapes");
                black_box(&mut y);
            })
        })
        .fold(f64::INFINITY, f64::min);
    w.bytes() as f64 / best / 1e9
}
