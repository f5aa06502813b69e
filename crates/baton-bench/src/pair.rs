//! What `bench sync` and `bench gates` share: the wait policies they
//! compare, cpu:0 and cpu:1 opened with one of them, a host thread pinned
//! away from the devices' workers, and a probe of timestamps that the host
//! and the streams both write.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use baton_core::backend::Device;
use baton_core::sync::WaitPolicy;
use baton_cpu::CpuDevice;

/// The bound of every host wait of these benches: a longer one is a hang.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// The three policies measured, block first (the ratios' baseline): those
/// of `--gate-policy`, with the library's default times.
pub fn policies() -> [WaitPolicy; 3] {
    ["block", "spin", "poll"].map(|name| match WaitPolicy::from_name(name) {
        Some(policy) => policy,
        None => unreachable!("{name} is a WaitPolicy name"),
    })
}

/// Opens cpu:0 and cpu:1 (one core each on a two-core machine) whose
/// streams wait with `policy`.
pub fn open_pair(policy: WaitPolicy) -> Result<Vec<Arc<CpuDevice>>> {
    let devices = baton_cpu::open_with(&["cpu:0", "cpu:1"], &baton_cpu::OpenOptions::default().with_policy(policy))
        .context("opening cpu:0,cpu:1")?;
    if devices.len() != 2 {
        bail!("expected two CPU devices, got {}", devices.len());
    }
    Ok(devices)
}

/// The core for the host thread: a usable core that no device's stream
/// workers are pinned to (their first core), else cpu:1's first core.
pub fn host_core(devices: &[Arc<CpuDevice>]) -> Option<usize> {
    let firsts: Vec<usize> = devices.iter().filter_map(|d| d.info().cores.first().copied()).collect();
    baton_cpu::topology::usable_cores()
        .into_iter()
        .rev()
        .find(|c| !firsts.contains(c))
        .or_else(|| devices.last().and_then(|d| d.info().cores.first().copied()))
}

/// Runs `f` on a new host thread pinned to `core` and returns its result.
pub fn on_host_thread<T: Send>(core: Option<usize>, f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    std::thread::scope(|scope| {
        let handle = scope.spawn(move || {
            if let Some(core) = core {
                baton_cpu::topology::pin_current_thread(core);
            }
            f()
        });
        handle.join().map_err(|_| anyhow::anyhow!("the benchmark's host thread panicked"))?
    })
}

/// Timestamps shared by the host and stream workers: nanoseconds since one
/// base `Instant`, plus the counter a waiter sets when it is about to wait.
pub struct Probe {
    base: Instant,
    /// The last iteration whose waiter announced it is about to wait.
    pub armed: AtomicU64,
    /// A start time recorded by a stream (stream-to-stream hand-offs).
    pub start: AtomicU64,
    stamp: AtomicU64,
}

impl Probe {
    /// A probe whose clock starts now.
    pub fn new() -> Arc<Probe> {
        Arc::new(Probe {
            base: Instant::now(),
            armed: AtomicU64::new(0),
            start: AtomicU64::new(0),
            stamp: AtomicU64::new(0),
        })
    }

    /// Nanoseconds since the base.
    pub fn now(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    /// Records the time now as the stamp (always `Ok`: it ends host functions).
    pub fn stamp(&self) -> Result<(), String> {
        self.stamp.store(self.now(), Ordering::Release);
        Ok(())
    }

    /// The last stamp.
    pub fn stamped(&self) -> u64 {
        self.stamp.load(Ordering::Acquire)
    }

    /// Spins until `armed` reaches `value`; an error after [`TIMEOUT`].
    pub fn until_armed(&self, value: u64) -> Result<(), String> {
        let start = Instant::now();
        let mut polls = 0u32;
        while self.armed.load(Ordering::Acquire) < value {
            std::hint::spin_loop();
            polls = polls.wrapping_add(1);
            if polls.is_multiple_of(1024) && start.elapsed() > TIMEOUT {
                return Err(format!("the waiter of iteration {value} never armed"));
            }
        }
        Ok(())
    }
}

/// Busy-waits for `d` (a sleep would add the timer's slack).
pub fn spin_for(d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}
