//! `baton bench submit`: what a submission costs the host, with one and
//! with two threads submitting at once, each to its own stream.
//!
//! Each stream is held at a host gate while the items are queued, so the
//! workers stay parked and the figure is the submitting thread's alone:
//! the safe front's check, its locks and the backend's queue push. Two
//! threads on two streams share no buffer, so nothing but a lock common to
//! every stream can make them wait for each other: the two-thread rate
//! against the one-thread rate shows it (2x is the ideal, 1x a lock that
//! serialises all submissions).

use std::sync::{Arc, Barrier};
use std::time::Instant;

use anyhow::{anyhow, Result};
use baton_core::backend::{Device, Stream};
use baton_core::sync::HostTimeline;
use clap::Args;

/// Arguments of `baton bench submit`.
#[derive(Args)]
pub struct SubmitArgs {
    /// Items each thread queues per round.
    #[arg(long, default_value_t = 20_000)]
    items: usize,
    /// Rounds; the best counts.
    #[arg(short = 'r', long, default_value_t = 5)]
    rounds: usize,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

/// Queues `items` host functions on `stream` behind a gate; the time spent
/// queueing, in nanoseconds per item.
fn queue(stream: &Stream, items: usize, start: &Barrier) -> Result<f64> {
    let gate = HostTimeline::new("bench-submit").reserve();
    stream.wait(&gate.point())?;
    start.wait();
    let began = Instant::now();
    for _ in 0..items {
        stream.host_fn(|| Ok(()))?;
    }
    let took = began.elapsed();
    gate.signal();
    stream.synchronize()?;
    Ok(took.as_nanos() as f64 / items as f64)
}

/// The best round's nanoseconds per item of each of `threads` threads.
fn measure(devices: &[Arc<dyn Device>], threads: usize, args: &SubmitArgs) -> Result<f64> {
    let mut best = f64::INFINITY;
    for _ in 0..args.rounds {
        let streams: Vec<Stream> =
            (0..threads).map(|t| devices[t % devices.len()].new_stream()).collect::<Result<_, _>>()?;
        let start = Arc::new(Barrier::new(threads));
        let per_item = std::thread::scope(|scope| -> Result<f64> {
            let runs: Vec<_> = streams
                .iter()
                .map(|s| {
                    let start = start.clone();
                    scope.spawn(move || queue(s, args.items, &start))
                })
                .collect();
            let mut worst = 0f64;
            for run in runs {
                let ns = run.join().map_err(|_| anyhow!("a submitting thread panicked"))??;
                worst = worst.max(ns);
            }
            Ok(worst)
        })?;
        best = best.min(per_item);
    }
    Ok(best)
}

/// Runs `baton bench submit`.
pub fn run(args: SubmitArgs) -> Result<()> {
    let devices = baton_core::backend::into_devices(baton_cpu::open(&["cpu:0", "cpu:1"])?);
    let one = measure(&devices, 1, &args)?;
    let two = measure(&devices, 2, &args)?;
    // Items per second over all threads.
    let (rate_one, rate_two) = (1e9 / one, 2e9 / two);
    let scaling = rate_two / rate_one;
    if args.json {
        println!(
            "{{\"ns_per_item_1_thread\":{one:.1},\"ns_per_item_2_threads\":{two:.1},\"items_per_s_1\":{rate_one:.0},\"items_per_s_2\":{rate_two:.0},\"scaling\":{scaling:.2}}}"
        );
    } else {
        println!("submission of host functions, {} items per thread, best of {} rounds:", args.items, args.rounds);
        println!("  1 thread : {one:>8.1} ns per item  {rate_one:>12.0} items/s");
        println!("  2 threads: {two:>8.1} ns per item  {rate_two:>12.0} items/s (each on its own stream)");
        println!("  scaling  : {scaling:.2}x (2x: no shared lock; 1x: submissions serialised)");
    }
    Ok(())
}
