//! Model-based test of the async contract (docs/contract.md): random
//! sequences of the safe API (buffers, transfers, copies, computations,
//! waits on streams and host timelines, releases, failing and silent
//! streams, drops) over two or three devices (CPU, CPU under the chaos
//! wrapper with and without native waits and foreign access, a composite),
//! checked against a plain sequential model.
//!
//! `BATON_MODEL_CASES` (default 512), `BATON_MODEL_OPS` (longest sequence,
//! default 24), `BATON_MODEL_SEED` (default fixed, so CI is reproducible)
//! and `BATON_MODEL_SETUP` (`cpu`, `chaos` or `composite`; default all)
//! tune a run; `scripts/model-test.sh` runs many.

mod api;
mod checks;
mod driver;
mod model;
mod ops;
mod regressions;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};

use crate::driver::Run;
use crate::ops::{case, Case, Setup};

/// API calls made, over all cases.
pub static CALLS: AtomicU64 = AtomicU64::new(0);
/// Stream waits with a short deadline on a silent peer, queued.
pub static DEADLINE_WAITS: AtomicU64 = AtomicU64::new(0);
/// Those of them on a silent stream (the others: on a held release).
pub static SILENT_STREAM_WAITS: AtomicU64 = AtomicU64::new(0);
/// Bounded waits on a transfer that timed out and handed it back.
pub static PENDING_TIMEOUTS: AtomicU64 = AtomicU64::new(0);
/// Streams whose last handle was dropped with work queued.
pub static BUSY_DROPS: AtomicU64 = AtomicU64::new(0);
/// Cases run on CPU, chaos and composite setups.
static SETUPS: [AtomicU64; 3] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Runs one case; the problems found, empty when it keeps the contract.
pub fn run_case(case: &Case) -> Vec<String> {
    let kind = match case.setup {
        Setup::Cpu { .. } => 0,
        Setup::Chaos { .. } => 1,
        Setup::Composite => 2,
    };
    SETUPS[kind].fetch_add(1, Ordering::Relaxed);
    let mut run = Run::new(case);
    for op in &case.ops {
        run.exec(op);
    }
    run.finish(case.signal_at_end);
    run.problems
}

#[test]
fn random_sequences_keep_the_contract() {
    let cases: u32 = env_or("BATON_MODEL_CASES", 512);
    let max_ops: usize = env_or("BATON_MODEL_OPS", 24);
    let seed: u64 = env_or("BATON_MODEL_SEED", 0x0062_6174_6f6e);
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_time: env_or("BATON_MODEL_SHRINK_MS", 30_000),
        ..Config::default()
    };
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes));
    let ran = AtomicU64::new(0);
    let started = Instant::now();
    let setup = std::env::var("BATON_MODEL_SETUP").ok().filter(|s| !s.is_empty());
    let result = runner.run(&case(max_ops, setup.as_deref()), |case| {
        ran.fetch_add(1, Ordering::Relaxed);
        let problems = run_case(&case);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(TestCaseError::fail(problems.join("\n")))
        }
    });
    println!(
        "model test: {} cases run ({cases} passing required, seed {seed:#x}, setups {}: {} cpu, {} chaos, {} composite), {} API calls, {:?} ({} deadline \
         waits on silent peers ({} on streams), {} transfers handed back by a timed-out wait, {} streams dropped busy)",
        ran.load(Ordering::Relaxed),
        setup.as_deref().unwrap_or("all"),
        SETUPS[0].load(Ordering::Relaxed),
        SETUPS[1].load(Ordering::Relaxed),
        SETUPS[2].load(Ordering::Relaxed),
        CALLS.load(Ordering::Relaxed),
        started.elapsed(),
        DEADLINE_WAITS.load(Ordering::Relaxed),
        SILENT_STREAM_WAITS.load(Ordering::Relaxed),
        PENDING_TIMEOUTS.load(Ordering::Relaxed),
        BUSY_DROPS.load(Ordering::Relaxed),
    );
    if let Err(e) = result {
        panic!("{e}");
    }
}
