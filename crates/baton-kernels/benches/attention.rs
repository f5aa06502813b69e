//! Decode attention over one key-value head: the time per position of
//! `attend` for a step's query rows (1 row; 3 rows, a GQA group of
//! SmolLM2; 4 rows) at 512 and 4096 positions, for f16, bf16, f32 and
//! q8_0 caches, at every instruction level this CPU has side by side, with
//! GFLOP/s (`4 · rows · positions · d`: a score and a value term per
//! element) and each level's speed over the portable (scalar) level's.
//! Beside them, a plain reference in the same run: whole rows of scores
//! from f32 keys, a softmax, then the weighted values (what a kernel that
//! materialises scores does), one row at a time.
//!
//! Run with `cargo bench -p baton-kernels --bench attention`;
//! `BATON_BENCH_POSITIONS=32,64` times those depths instead (a batched
//! decode step's short caches, where a call's fixed cost shows);
//! `BATON_BENCH_CACHES=f16,q8_0`, `BATON_BENCH_ROWS=3` and
//! `BATON_BENCH_LEVELS=avx2,avx512` time only those (to profile one case;
//! the best / scalar column is then over the first level named);
//! `BATON_BENCH_CALLS=N` makes N calls of each case at the first level and
//! times nothing, for `perf stat -e cycles:u` on a busy machine. Each figure is the best of 5 alternating rounds
//! of about 20 ms.

use std::hint::black_box;
use std::time::Instant;

use baton_kernels::{attend, quantize_row, with_isa, AttentionScratch, DType, Isa, KvRows, QueryRow};

const D: usize = 64;

fn noise(i: usize, seed: u64) -> f32 {
    let mut x = (i as u64).wrapping_add(seed).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 31;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 29;
    (x % 20_000) as f32 / 10_000.0 - 1.0
}

fn encode(dtype: DType, values: &[f32]) -> Vec<u8> {
    let row = dtype.row_bytes(D).expect("whole blocks");
    let mut out = vec![0u8; values.len() / D * row];
    for (v, o) in values.chunks_exact(D).zip(out.chunks_exact_mut(row)) {
        quantize_row(dtype, v, o).expect("a row");
    }
    out
}

/// Seconds per call of `f`: the best of 5 rounds of calls adding up to
/// about 20 ms.
fn time(mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    f();
    let once = start.elapsed().as_secs_f64().max(1e-7);
    let calls = ((0.02 / once) as usize).max(1);
    (0..5)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..calls {
                f();
            }
            start.elapsed().as_secs_f64() / calls as f64
        })
        .fold(f64::INFINITY, f64::min)
}

/// The plain reference: per row, all scores, their softmax, the values.
fn reference(qs: &[Vec<f32>], k: &[f32], v: &[f32], positions: usize, outs: &mut [Vec<f32>]) {
    let mut scores = vec![0.0f32; positions];
    for (q, out) in qs.iter().zip(outs.iter_mut()) {
        for (s, key) in scores.iter_mut().zip(k.chunks_exact(D)) {
            *s = q.iter().zip(key).map(|(a, b)| a * b).sum::<f32>() * 0.125;
        }
        let top = scores.iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s));
        let mut total = 0.0;
        for s in scores.iter_mut() {
            *s = (*s - top).exp();
            total += *s;
        }
        out.fill(0.0);
        for (s, value) in scores.iter().zip(v.chunks_exact(D)) {
            for (o, x) in out.iter_mut().zip(value) {
                *o += s / total * x;
            }
        }
    }
}

fn main() {
    let levels: Vec<Isa> = match std::env::var("BATON_BENCH_LEVELS") {
        Ok(names) => {
            names.split(',').map(|n| Isa::from_name(n).expect("a level: scalar, avx2, avxvnni, avx512")).collect()
        }
        Err(_) => Isa::available(),
    };
    println!("decode attention, one key-value head, head size {D}; ns per position (GFLOP/s)");
    let mut header = String::from("| cache | rows | positions |");
    for level in &levels {
        header += &format!(" {level:?} |");
    }
    header += " best / scalar | plain f32 reference | best / reference |";
    println!("{header}");
    println!("|{}", " --- |".repeat(6 + levels.len()));
    let list: Vec<usize> = std::env::var("BATON_BENCH_POSITIONS")
        .ok()
        .map(|s| s.split(',').map(|p| p.parse().expect("a count of positions")).collect())
        .unwrap_or(vec![512, 4096]);
    let only = |name: &str| std::env::var(name).ok().map(|s| s.split(',').map(str::to_owned).collect::<Vec<_>>());
    let (caches, row_counts) = (only("BATON_BENCH_CACHES"), only("BATON_BENCH_ROWS"));
    for positions in list {
        let k: Vec<f32> = (0..positions * D).map(|i| noise(i, 1)).collect();
        let v: Vec<f32> = (0..positions * D).map(|i| noise(i, 2)).collect();
        for dtype in [DType::F16, DType::BF16, DType::F32, DType::Q8_0] {
            if caches.as_ref().is_some_and(|c| !c.contains(&dtype.to_string())) {
                continue;
            }
            let (kb, vb) = (encode(dtype, &k), encode(dtype, &v));
            let row = dtype.row_bytes(D).expect("whole blocks");
            let kv = |data| KvRows { dtype, data, stride: row, dim: D, len: positions, blocks: None };
            for rows in [1, 3, 4] {
                if row_counts.as_ref().is_some_and(|c| !c.contains(&rows.to_string())) {
                    continue;
                }
                let qs: Vec<Vec<f32>> = (0..rows).map(|r| (0..D).map(|i| noise(i, 10 + r as u64)).collect()).collect();
                let mut outs = vec![vec![0.0f32; D]; rows];
                let mut scratch = AttentionScratch::default();
                let flops = 4.0 * (rows * positions * D) as f64;
                let mut run = || {
                    let mut query_rows: Vec<QueryRow<'_>> = qs
                        .iter()
                        .zip(outs.iter_mut())
                        .map(|(q, out)| QueryRow { q, keys: 0..positions, out, sink: None })
                        .collect();
                    attend(&mut query_rows, kv(&kb), kv(&vb), 0.125, &mut scratch).expect("attend");
                    black_box(&query_rows);
                };
                if let Some(calls) = std::env::var("BATON_BENCH_CALLS").ok().and_then(|c| c.parse::<usize>().ok()) {
                    // A fixed count of calls at the first level, nothing
                    // else: work to count in cycles (`perf stat -e
                    // cycles:u`), which a busy machine's other processes
                    // do not add to as they add to the wall time.
                    with_isa(levels[0], || (0..calls).for_each(|_| run()));
                    println!("| {dtype} | {rows} | {positions} | {calls} calls at {:?} |", levels[0]);
                    continue;
                }
                let mut best = vec![f64::INFINITY; levels.len()];
                let mut plain = f64::INFINITY;
                for _round in 0..2 {
                    for (b, level) in best.iter_mut().zip(&levels) {
                        *b = b.min(with_isa(*level, || time(&mut run)));
                    }
                    let mut ref_outs = vec![vec![0.0f32; D]; rows];
                    plain = plain.min(time(|| reference(&qs, &k, &v, positions, black_box(&mut ref_outs))));
                }
                let cell = |t: f64| format!("{:.1} ({:.1})", t * 1e9 / positions as f64, flops / t / 1e9);
                let mut line = format!("| {dtype} | {rows} | {positions} |");
                for b in &best {
                    line += &format!(" {} |", cell(*b));
                }
                let fastest = best.iter().copied().fold(f64::INFINITY, f64::min);
                line += &format!(" {:.2}x | {} | {:.2}x |", best[0] / fastest, cell(plain), plain / fastest);
                println!("{line}");
            }
        }
    }
}
