//! `baton bench memory`: the machine's memory bandwidth, STREAM-style.
//!
//! Triad (`a[i] = b[i] + s * c[i]` over f64 arrays far larger than the
//! caches; 24 bytes counted per element, as STREAM counts them) and a
//! read-only sum (8 bytes per element: what a decode step's matrix-vector
//! products mostly do). Each figure is the best of several passes, with one
//! thread and with the requested number, every thread on its own slice.
//! `baton bench --roofline` uses the triad to put generation speed against
//! the bandwidth roofline.

use std::time::Instant;

use anyhow::{ensure, Result};
use clap::Args;

/// Arguments of `baton bench memory`.
#[derive(Args)]
pub struct MemoryArgs {
    /// Threads of the parallel measurement (default: all usable cores).
    #[arg(short = 't', long)]
    threads: Option<usize>,
    /// MiB per array (three arrays for the triad).
    #[arg(long, default_value_t = 128)]
    mib: usize,
    /// Passes; the best one counts.
    #[arg(long, default_value_t = 8)]
    passes: usize,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

/// Bandwidths in GB/s (10^9 bytes per second).
#[derive(Clone, Copy, Debug)]
pub struct Bandwidth {
    /// STREAM triad.
    pub triad: f64,
    /// Read-only sum.
    pub read: f64,
}

/// Runs `baton bench memory`.
pub fn run(args: MemoryArgs) -> Result<()> {
    let threads = args.threads.unwrap_or_else(usable_cores);
    ensure!(threads >= 1, "--threads must be at least 1");
    ensure!(args.mib >= 1, "--mib must be at least 1");
    let one = measure(1, args.mib, args.passes);
    let many = measure(threads, args.mib, args.passes);
    if args.json {
        println!(
            "{{\"mib_per_array\":{},\"threads\":{threads},\"triad_gbs_1t\":{:.3},\"read_gbs_1t\":{:.3},\"triad_gbs\":{:.3},\"read_gbs\":{:.3}}}",
            args.mib, one.triad, one.read, many.triad, many.read
        );
        return Ok(());
    }
    println!("| threads | triad GB/s | read GB/s |");
    println!("| ---: | ---: | ---: |");
    println!("| 1 | {:.2} | {:.2} |", one.triad, one.read);
    if threads > 1 {
        println!("| {threads} | {:.2} | {:.2} |", many.triad, many.read);
    }
    Ok(())
}

/// The cores this process may run on.
pub fn usable_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Measures triad and read bandwidth with `threads` threads over arrays of
/// `mib` MiB, best of `passes`.
pub fn measure(threads: usize, mib: usize, passes: usize) -> Bandwidth {
    let n = mib * (1 << 20) / 8;
    let threads = threads.clamp(1, n.max(1));
    let mut a = vec![0.0f64; n];
    let b: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let c: Vec<f64> = (0..n).map(|i| (n - i) as f64).collect();
    let chunk = n.div_ceil(threads);
    let (mut triad, mut read) = (f64::INFINITY, f64::INFINITY);
    let mut checksum = 0.0;
    for pass in 0..passes.max(1) + 1 {
        let s = 3.0 + pass as f64;
        let start = Instant::now();
        std::thread::scope(|scope| {
            for ((a, b), c) in a.chunks_mut(chunk).zip(b.chunks(chunk)).zip(c.chunks(chunk)) {
                scope.spawn(move || {
                    for ((a, b), c) in a.iter_mut().zip(b).zip(c) {
                        *a = b + s * c;
                    }
                });
            }
        });
        let t_triad = start.elapsed().as_secs_f64();
        let start = Instant::now();
        let sums: Vec<f64> = std::thread::scope(|scope| {
            let handles: Vec<_> = a.chunks(chunk).map(|a| scope.spawn(move || sum(a))).collect();
            handles.into_iter().map(|h| h.join().unwrap_or(0.0)).collect()
        });
        let t_read = start.elapsed().as_secs_f64();
        checksum += sums.iter().sum::<f64>();
        // The first pass faults the pages in; it does not count.
        if pass > 0 {
            triad = triad.min(t_triad);
            read = read.min(t_read);
        }
    }
    std::hint::black_box(checksum);
    let bytes = n as f64 * 8.0;
    Bandwidth { triad: 3.0 * bytes / triad / 1e9, read: bytes / read / 1e9 }
}

/// A sum with independent accumulators, so the loop is bound by loads, not
/// by the latency of one dependent add chain.
fn sum(x: &[f64]) -> f64 {
    let mut acc = [0.0f64; 8];
    let mut chunks = x.chunks_exact(8);
    for c in &mut chunks {
        for (a, v) in acc.iter_mut().zip(c) {
            *a += v;
        }
    }
    acc.iter().sum::<f64>() + chunks.remainder().iter().sum::<f64>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sum_adds_every_element() {
        let x: Vec<f64> = (1..=1003).map(f64::from).collect();
        assert_eq!(sum(&x), 1003.0 * 1004.0 / 2.0);
    }

    #[test]
    fn a_small_measurement_gives_positive_finite_figures() {
        let bw = measure(2, 4, 2);
        assert!(bw.triad.is_finite() && bw.triad > 0.0, "{bw:?}");
        assert!(bw.read.is_finite() && bw.read > 0.0, "{bw:?}");
    }
}
