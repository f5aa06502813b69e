//! Matmul throughput on the CPU device's own pool: GFLOP/s (2 m n k / time)
//! at the weight shapes of a 135M llama (hidden 576, FFN 1536, vocabulary
//! 49152), for each weight type, on a 1-thread and a 2-thread `cpu` device.
//! The two arms run alternately, call by call, so machine noise hits both
//! alike; the ratio column is 2T/1T of the medians.
//!
//! Run with `cargo bench -p baton-cpu --bench matmul`.
//! `BATON_BENCH_QUICK=1`: only m = 1 and 64, fewer repetitions.
//! `BATON_BENCH_JSON=1`: also one JSON object per cell and thread count.

use std::error::Error;
use std::hint::black_box;
use std::time::{Duration, Instant};

use baton_core::backend::Device;
use baton_core::Parallel;
use baton_kernels::{matmul, quantize_row, DType, Isa, MatMut, MatRef, Scratch, WeightMatrix};

const SHAPES: [(usize, usize); 3] = [(1536, 576), (576, 1536), (49152, 576)];
const TYPES: [DType; 7] = [DType::F32, DType::F16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1];

/// How long and how often each cell is measured.
struct Budget {
    per_arm: Duration,
    min_reps: usize,
}

/// GFLOP/s of each call of one arm, sorted.
struct Samples(Vec<f64>);

impl Samples {
    fn percentile(&self, p: f64) -> f64 {
        let i = (p * (self.0.len() - 1) as f64).round() as usize;
        self.0[i]
    }
    fn median(&self) -> f64 {
        self.percentile(0.5)
    }
}

/// One arm: a device pool and the scratch its calling thread reuses.
struct Arm<'d> {
    parallel: &'d dyn Parallel,
    scratch: Scratch,
}

/// How long one arm runs before the other takes its turn.
const TURN: Duration = Duration::from_millis(10);
/// Calls shorter than this start each turn with an untimed call: the pool
/// parks its workers after a short spin, and the wake-up after the other
/// arm's turn is a cost that back-to-back ops of a graph do not pay.
const SHORT_CALL: Duration = Duration::from_millis(1);

/// Times `arms` in alternating turns of about [`TURN`] (after one warm-up
/// call each) until every arm has `min_reps` calls and `per_arm` of run time.
fn measure(
    arms: &mut [Arm<'_>],
    w: &WeightMatrix<'_>,
    x: &MatRef<'_>,
    y: &mut [f32],
    budget: &Budget,
) -> Result<Vec<Samples>, Box<dyn Error>> {
    let (m, n, k) = (x.rows, w.rows, w.cols);
    let flop = 2.0 * (m * n * k) as f64;
    let mut y = MatMut::contiguous(&mut y[..m * n], m, n);
    let mut call = |arm: &mut Arm<'_>| -> Result<Duration, Box<dyn Error>> {
        let start = Instant::now();
        matmul(arm.parallel, w, x, &mut y, &mut arm.scratch)?;
        black_box(&mut y);
        Ok(start.elapsed())
    };
    let mut last = Vec::new();
    for arm in arms.iter_mut() {
        last.push(call(arm)?);
    }
    let mut gflops = vec![Vec::new(); arms.len()];
    let mut spent = vec![Duration::ZERO; arms.len()];
    let enough = |gflops: &[Vec<f64>], spent: &[Duration]| {
        gflops.iter().all(|g| g.len() >= budget.min_reps) && spent.iter().all(|s| *s >= budget.per_arm)
    };
    while !enough(&gflops, &spent) {
        for (i, arm) in arms.iter_mut().enumerate() {
            if last[i] < SHORT_CALL {
                call(arm)?;
            }
            let turn = Instant::now();
            loop {
                last[i] = call(arm)?;
                spent[i] += last[i];
                gflops[i].push(flop / last[i].as_secs_f64() / 1e9);
                if turn.elapsed() >= TURN {
                    break;
                }
            }
        }
    }
    Ok(gflops
        .into_iter()
        .map(|mut g| {
            g.sort_by(f64::total_cmp);
            Samples(g)
        })
        .collect())
}

/// Deterministic values in [-0.5, 0.5) (xorshift32).
fn pseudo_random(len: usize, mut seed: u32) -> Vec<f32> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed as f32 / u32::MAX as f32 - 0.5
        })
        .collect()
}

fn main() -> Result<(), Box<dyn Error>> {
    let quick = std::env::var("BATON_BENCH_QUICK").is_ok_and(|v| v == "1");
    let json = std::env::var("BATON_BENCH_JSON").is_ok_and(|v| v == "1");
    let (tokens, budget): (&[usize], _) = if quick {
        let budget = Budget { per_arm: Duration::from_millis(100), min_reps: 3 };
        (&[1, 64], budget)
    } else {
        let budget = Budget { per_arm: Duration::from_millis(300), min_reps: 5 };
        (&[1, 64, 512], budget)
    };
    let one = baton_cpu::open_with(&["cpu"], &baton_cpu::OpenOptions::default().with_threads(1))?;
    let two = baton_cpu::open_with(&["cpu"], &baton_cpu::OpenOptions::default().with_threads(2))?;
    let thread_counts = [one[0].parallel().threads(), two[0].parallel().threads()];
    let mut arms = [one[0].parallel(), two[0].parallel()].map(|parallel| Arm { parallel, scratch: Scratch::new() });

    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("cpu: {}", one[0].info().description);
    println!(
        "isa: {:?}; usable cores: {}; load average: {}",
        Isa::detected(),
        baton_cpu::topology::usable_cores().len(),
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    println!("GFLOP/s = 2 m n k / time: median (p10-p90); {}T vs {}T interleaved", thread_counts[1], thread_counts[0]);
    println!();
    println!(
        "{:<5} {:>5} {:>4} {:>3} | {:>6} {:>13} | {:>6} {:>13} | {:>6}",
        "type", "n", "k", "m", "1T", "p10-p90", "2T", "p10-p90", "2T/1T"
    );

    let max_m = tokens[tokens.len() - 1];
    for (n, k) in SHAPES {
        let w_f32 = pseudo_random(n * k, 1);
        let x_f32 = pseudo_random(max_m * k, 2);
        let mut y = vec![0.0f32; max_m * n];
        for dtype in TYPES {
            let row_bytes = dtype.row_bytes(k).ok_or("k is not whole blocks")?;
            let mut w_bytes = vec![0u8; n * row_bytes];
            for (row, out) in w_f32.chunks_exact(k).zip(w_bytes.chunks_exact_mut(row_bytes)) {
                quantize_row(dtype, row, out)?;
            }
            let w = WeightMatrix::contiguous(dtype, &w_bytes, n, k)?;
            for &m in tokens {
                let x = MatRef::contiguous(&x_f32[..m * k], m, k);
                let results = measure(&mut arms, &w, &x, &mut y, &budget)?;
                let spread = |s: &Samples| format!("{:.1}-{:.1}", s.percentile(0.1), s.percentile(0.9));
                let (single, pair) = (&results[0], &results[1]);
                println!(
                    "{:<5} {:>5} {:>4} {:>3} | {:>6.1} {:>13} | {:>6.1} {:>13} | {:>5.2}x",
                    dtype.name(),
                    n,
                    k,
                    m,
                    single.median(),
                    spread(single),
                    pair.median(),
                    spread(pair),
                    pair.median() / single.median()
                );
                if json {
                    for (threads, samples) in thread_counts.iter().zip(&results) {
                        println!(
                            r#"{{"type":"{}","n":{n},"k":{k},"m":{m},"threads":{threads},"gflops_median":{:.3}}}"#,
                            dtype.name(),
                            samples.median()
                        );
                    }
                }
            }
        }
    }
    Ok(())
}
