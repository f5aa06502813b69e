//! Decode attention at depth as a decode step reads it: every layer's
//! key-value heads (SmolLM2's 30 layers of 3, 16,384 positions of f16 keys
//! and values: 377 MB, far beyond the caches) attended in turn by a GQA
//! group of 3 query rows, the heads shared out over the threads, beside a
//! plain read pass over the same bytes on the same threads, alternated;
//! the caches once on 4 KiB pages and once on 2 MiB pages. The ratio (read
//! pass time over attention time) is the share of the read roofline the
//! kernel reaches on its own, without the step's matmuls and
//! synchronisation.
//!
//! Run with `cargo bench -p baton-kernels --bench attention_stream`;
//! `BATON_BENCH_POSITIONS`, `BATON_BENCH_HEADS`, `BATON_BENCH_ROWS`,
//! `BATON_BENCH_THREADS` and `BATON_BENCH_ROUNDS` change the shape
//! (defaults 16384, 90, 3, every core, 10).

use std::hint::black_box;
use std::time::Instant;

use baton_kernels::{attend, quantize_row, AttentionScratch, DType, KvRows, QueryRow};

const D: usize = 64;
const HUGE: usize = 2 << 20;

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

/// Every head's keys then values, copies of `one`, in one allocation (and
/// the offset where they start); with `huge`, from a 2 MiB boundary,
/// advised into 2 MiB pages before it is written.
fn every_head(one: &[u8], heads: usize, huge: bool) -> (Vec<u8>, usize) {
    let len = 2 * heads * one.len();
    let mut all: Vec<u8> = Vec::with_capacity(len + HUGE);
    let skip = if huge { all.as_ptr().align_offset(HUGE) } else { 0 };
    all.resize(skip, 0);
    #[cfg(target_os = "linux")]
    if huge {
        // SAFETY: `skip + len / HUGE * HUGE` is within the vector's
        // capacity, memory this process owns that nothing else uses;
        // MADV_HUGEPAGE changes only which pages back it, never its bytes.
        unsafe { libc::madvise(all.as_mut_ptr().add(skip).cast(), len / HUGE * HUGE, libc::MADV_HUGEPAGE) };
    }
    for _ in 0..2 * heads {
        all.extend_from_slice(one);
    }
    (all, skip)
}

/// The heads' (keys, values) in `all`.
fn heads_of(all: &[u8], heads: usize) -> Vec<(&[u8], &[u8])> {
    let each = all.len() / (2 * heads);
    all.chunks_exact(2 * each).map(|kv| kv.split_at(each)).collect()
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
    let one = cache(positions, 1);
    let (plain, huge) = (every_head(&one, heads, false), every_head(&one, heads, true));
    let bytes = 2 * heads * one.len();
    let qs: Vec<Vec<f32>> = (0..rows).map(|r| (0..D).map(|i| noise(i, 1000 + r as u64)).collect()).collect();
    let share = heads.div_ceil(threads);
    let attention = |kv: &[(&[u8], &[u8])]| {
        std::thread::scope(|s| {
            for mine in kv.chunks(share) {
                let qs = &qs;
                s.spawn(move || {
                    let mut scratch = AttentionScratch::default();
                    let mut outs = vec![vec![0.0f32; D]; qs.len()];
                    let row = DType::F16.row_bytes(D).expect("f16 rows");
                    for &(k, v) in mine {
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
    let read_pass = |kv: &[(&[u8], &[u8])]| {
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
    let views = [heads_of(&plain.0[plain.1..], heads), heads_of(&huge.0[huge.1..], heads)];
    let mut best = [[f64::INFINITY; 2]; 2];
    for _ in 0..env("BATON_BENCH_ROUNDS", 10) {
        for (b, kv) in best.iter_mut().zip(&views) {
            b[0] = b[0].min(time(&|| attention(kv)));
            b[1] = b[1].min(time(&|| read_pass(kv)));
        }
    }
    let gbs = |t: f64| bytes as f64 / t / 1e9;
    println!(
        "decode attention, {heads} heads x {positions} positions, f16, {rows} rows, {threads} threads (best of alternated rounds)"
    );
    for (name, [attend, read]) in ["4 KiB pages", "2 MiB pages"].iter().zip(best) {
        println!(
            "{name}: attention {:.2} ms ({:.1} GB/s); read pass {:.2} ms ({:.1} GB/s); attention at {:.0}% of the read pass",
            attend * 1e3,
            gbs(attend),
            read * 1e3,
            gbs(read),
            100.0 * read / attend
        );
    }
}
