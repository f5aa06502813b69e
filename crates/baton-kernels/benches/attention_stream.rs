//! Decode attention at depth as a decode step reads it: every layer's
//! key-value heads (SmolLM2's 30 layers of 3, 16,384 positions of f16 keys
//! and values: 377 MB, far beyond the caches) attended in turn by a GQA
//! group of 3 query rows, the heads shared out over the threads, beside a
//! plain read pass over the same bytes on the same threads, alternated.
//! The ratio (read pass time over attention time) is the share of the
//! read roofline the kernel reaches on its own, without the step's
//! matmuls and synchronisation.
//!
//! Run with `cargo bench -p baton-kernels --bench attention_stream`;
//! `BATON_BENCH_POSITIONS`, `BATON_BENCH_HEADS`, `BATON_BENCH_ROWS` and
//! `BATON_BENCH_THREADS` change the shape (defaults 16384, 90, 3, every
//! core).

use std::hint::black_box;
use std::time::Instant;

use baton_kernels::{attend, quantize_row, AttentionScratch, DType, KvRows, QueryRow};

const D: usize = 64;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn noise(i: usize, seed: u64) -> f32 {
    let mut x = (i as u64).wrapping_add(seed).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 31;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (x % 20_000) as f32 / 10_000.0 - 1.0
}

/// One head's keys or values: `positions` rows of f16.
fn cache(positions: usize, seed: u64) -> Vec<u8> {
    let row = DType::F16.row_bytes(D).expect("f16 rows");
    let mut out = vec![0u8; positions * row];
    let mut values = [0.0f32; D];
    for (p, o) in out.chunks_exact_mut(row).enumerate() {
        for (i, v) in values.iter_mut().enumerate() {
            *v = noise(p * D + i, seed);
        }
        quantize_row(DType::F16, &values, o).expect("a row");
    }
    out
}

/// A read of every byte (summed as 8-byte words, so the compiler's vector
/// loads stream it).
fn read(bytes: &[u8]) -> u64 {
    bytes.chunks_exact(8).fold(0u64, |s, w| s.wrapping_add(u64::from_le_bytes(w.try_into().expect("8 bytes"))))
}

fn main() {
    let positions = env("BATON_BENCH_POSITIONS", 16384);
    let heads = env("BATON_BENCH_HEADS", 90);
    let rows = env("BATON_BENCH_ROWS", 3);
    let threads = env("BATON_BENCH_THREADS", std::thread::available_parallelism().map_or(1, |n| n.get()));
    let kv: Vec<(Vec<u8>, Vec<u8>)> =
        (0..heads).map(|h| (cache(positions, 2 * h as u64), cache(positions, 2 * h as u64 + 1))).collect();
    let bytes = kv.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>();
    let qs: Vec<Vec<f32>> = (0..rows).map(|r| (0..D).map(|i| noise(i, 1000 + r as u64)).collect()).collect();
    let share = heads.div_ceil(threads);
    let attention = || {
        std::thread::scope(|s| {
            for mine in kv.chunks(share) {
                let qs = &qs;
                s.spawn(move || {
                    let mut scratch = AttentionScratch::default();
                    let mut outs = vec![vec![0.0f32; D]; qs.len()];
                    let row = DType::F16.row_bytes(D).expect("f16 rows");
                    for (k, v) in mine {
                        let rows_of = |data| KvRows {
                            dtype: DType::F16,
                            data,
                            stride: row,
                            dim: D,
                            len: positions,
                            blocks: None,
                        };
                        let mut query_rows: Vec<QueryRow<'_>> = qs
                            .iter()
                            .zip(outs.iter_mut())
                            .map(|(q, out)| QueryRow { q, keys: 0..positions, out, sink: None })
                            .collect();
                        attend(&mut query_rows, rows_of(k), rows_of(v), 0.125, &mut scratch).expect("attend");
                        black_box(&query_rows);
                    }
                });
            }
        })
    };
    let read_pass = || {
        std::thread::scope(|s| {
            for mine in kv.chunks(share) {
                s.spawn(move || black_box(mine.iter().map(|(k, v)| read(k).wrapping_add(read(v))).sum::<u64>()));
            }
        })
    };
    let time = |f: &dyn Fn()| {
        let start = Instant::now();
        f();
        start.elapsed().as_secs_f64()
    };
    let (mut best_attend, mut best_read) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..env("BATON_BENCH_ROUNDS", 10) {
        best_attend = best_attend.min(time(&attention));
        best_read = best_read.min(time(&read_pass));
    }
    let gbs = |t: f64| bytes as f64 / t / 1e9;
    println!(
        "decode attention, {heads} heads x {positions} positions, f16, {rows} rows, {threads} threads: {:.2} ms ({:.1} GB/s); read pass {:.2} ms ({:.1} GB/s); attention at {:.0}% of the read pass",
        best_attend * 1e3,
        gbs(best_attend),
        best_read * 1e3,
        gbs(best_read),
        100.0 * best_read / best_attend
    );
}
