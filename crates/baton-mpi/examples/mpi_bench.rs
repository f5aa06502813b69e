//! All-reduce latency over MPI: MPI's own non-blocking collective against
//! the butterfly over point-to-point, on host buffers and as gates on a CPU
//! device's stream, for 4 KiB to 4 MiB of f32. Every rank runs it (SPMD);
//! rank 0 prints the median of each, with the CPU model:
//!
//! ```text
//! scripts/mpirun.sh -np 2 target/release/examples/mpi_bench
//! ```
//!
//! Other sizes (bytes, multiples of 4) as arguments: `mpi_bench 2304 6144`
//! (SmolLM2's decode gates: 576 and 1,536 f32).
//!
//! The wait policy is `BATON_WAIT_POLICY` (`block`, `spin`, `poll`).

use std::time::{Duration, Instant};

use baton_core::backend::Device;
use baton_core::sync::WaitPolicy;
use baton_core::DType;
use baton_mpi::{Comm, MpiError, RankStream, Transport, World};

/// The median of `runs` timings of `f`, after a few untimed runs.
fn median(runs: usize, mut f: impl FnMut() -> Result<(), MpiError>) -> Result<Duration, MpiError> {
    for _ in 0..3 {
        f()?;
    }
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        f()?;
        times.push(started.elapsed());
    }
    times.sort();
    Ok(times[runs / 2])
}

fn cpu_model() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = info.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split(':').nth(1));
    model.map_or_else(|| "unknown CPU".to_string(), |m| m.trim().to_string())
}

struct Row {
    bytes: usize,
    host_native: Duration,
    host_butterfly: Duration,
    gate_native: Duration,
    gate_butterfly: Duration,
}

fn measure(comm: &Comm, gates: &RankStream, device: &dyn Device, bytes: usize) -> Result<Row, String> {
    let n = bytes / 4;
    let runs = (64 << 20) / bytes.max(1);
    let runs = runs.clamp(20, 400);
    let bound = gates.bound();
    let (mut send, mut recv) = (vec![1f32; n], vec![0f32; n]);
    let e = |e: MpiError| e.to_string();
    let host_native = median(runs, || comm.all_reduce_sum(&mut send, &mut recv, &bound)).map_err(e)?;
    let host_butterfly = median(runs, || comm.butterfly_all_reduce_sum(&mut send, &mut recv, &bound)).map_err(e)?;
    let input = device.alloc_tensor(DType::F32, &[n]).map_err(|e| e.to_string())?;
    let output = device.alloc_tensor(DType::F32, &[n]).map_err(|e| e.to_string())?;
    let gate = |transport| {
        median(runs, || {
            let point = gates.all_reduce(&input, &output, transport)?;
            point.wait().map_err(|w| MpiError::Stream(w.into()))
        })
    };
    let gate_native = gate(Transport::Native).map_err(e)?;
    let gate_butterfly = gate(Transport::Butterfly).map_err(e)?;
    Ok(Row { bytes, host_native, host_butterfly, gate_native, gate_butterfly })
}

fn main() -> std::process::ExitCode {
    let world = match World::init() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let run = || -> Result<Vec<Row>, String> {
        let comm = world.communicator().map_err(|e| e.to_string())?;
        let options = baton_cpu::OpenOptions::default().with_threads(1);
        let device = baton_cpu::open_with(&["cpu"], &options).map_err(|e| e.to_string())?.remove(0);
        let stream = device.new_stream().map_err(|e| e.to_string())?;
        let gates = RankStream::new(stream, world.communicator().map_err(|e| e.to_string())?, Duration::from_secs(30));
        let asked: Vec<usize> = std::env::args()
            .skip(1)
            .map(|a| a.parse::<usize>().map_err(|e| format!("{a}: {e}")))
            .collect::<Result<_, _>>()?;
        let sizes = match asked.is_empty() {
            true => (0..6).map(|k| 4096 << (2 * k)).collect(),
            false => asked,
        };
        sizes.into_iter().map(|bytes| measure(&comm, &gates, device.as_ref(), bytes)).collect()
    };
    match run() {
        Ok(rows) if world.rank() == 0 => {
            println!(
                "all-reduce (sum, f32), {} ranks, thread level {}, wait policy {}, on {}",
                world.size(),
                world.threading(),
                WaitPolicy::process_default().name(),
                cpu_model()
            );
            println!("median µs per all-reduce; gate = queued on a CPU stream (read, MPI, write), waited on its point");
            println!(
                "{:>9} {:>12} {:>12} {:>9} {:>12} {:>12}",
                "bytes", "MPI host", "butterfly", "ratio", "MPI gate", "bfly gate"
            );
            for r in rows {
                let us = |d: Duration| d.as_secs_f64() * 1e6;
                println!(
                    "{:>9} {:>12.1} {:>12.1} {:>9.2} {:>12.1} {:>12.1}",
                    r.bytes,
                    us(r.host_native),
                    us(r.host_butterfly),
                    us(r.host_butterfly) / us(r.host_native),
                    us(r.gate_native),
                    us(r.gate_butterfly)
                );
            }
            std::process::ExitCode::SUCCESS
        }
        Ok(_) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rank {}: error: {e}", world.rank());
            world.abort(1)
        }
    }
}
