//! Baton's CPU backend.
//!
//! A backend: depends on baton-core (the contract it implements) and
//! baton-kernels (the ops); the scheduler and the model reach it only through
//! baton-core's `Device` trait, and baton-cli opens it.
//!
//! A CPU device is a set of cores with its own pool of worker threads pinned
//! to them and its own allocations; `cpu` is one device with every usable
//! core, and `cpu:0,cpu:1` split the cores evenly into two devices, so
//! multi-device behaviour is real and testable without a GPU.
//!
//! Each stream is a worker thread that runs its queue in order: host writes
//! and reads, device copies, waits on points (host-memory timelines of any
//! device), and graph computations, whose ops run as SIMD kernels
//! (`baton-kernels`) over the device's pool. See `docs/contract.md` for the
//! rules every stream keeps.
#![deny(missing_docs)]

mod bell;
mod buffer;
mod device;
mod device_shared;
mod exec;
mod mapping;
mod memory;
mod packed_cache;
pub use packed_cache::set_repack;
mod pool;
pub mod profile;
mod queue;
mod stream;
pub mod topology;

use std::sync::Arc;

use baton_core::backend::DeviceError;
use baton_core::sync::WaitPolicy;

/// Weight types the CPU matmul and row lookup accept: every type the
/// kernels implement.
pub use baton_kernels::WEIGHT_TYPES;

/// Weight types whose matrices the CPU packs for its kernels once they are
/// sealed weights (`Buffer::declare_weights`), unless `--no-repack`.
pub fn packed_weight_types() -> Vec<baton_core::DType> {
    WEIGHT_TYPES.iter().copied().filter(|&t| baton_kernels::packed::packable(t)).collect()
}

pub use buffer::{CpuBuffer, ALIGN};
pub use device::CpuDevice;
pub use packed_cache::enabled as repack_enabled;
pub use pool::ThreadPool;

/// How devices are opened (the same shape as every backend's
/// `OpenOptions`: `Default`, then `with_*` setters).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct OpenOptions {
    /// The threads of a `cpu` device (`-t`; default: one per usable core);
    /// `cpu:N` devices run one thread per core they own.
    pub threads: Option<usize>,
    /// The wait policy of the devices' streams.
    pub policy: WaitPolicy,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions { threads: None, policy: WaitPolicy::process_default() }
    }
}

impl OpenOptions {
    /// With `threads` threads for a `cpu` device.
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = Some(threads);
        self
    }

    /// With `policy` for the devices' streams.
    pub fn with_policy(mut self, policy: WaitPolicy) -> Self {
        self.policy = policy;
        self
    }
}

/// Opens the CPU devices of a device list (`cpu`, or `cpu:0,cpu:1,...`).
pub fn open(names: &[&str]) -> Result<Vec<Arc<CpuDevice>>, DeviceError> {
    open_with(names, &OpenOptions::default())
}

/// As [`open`], with options.
pub fn open_with(names: &[&str], options: &OpenOptions) -> Result<Vec<Arc<CpuDevice>>, DeviceError> {
    let OpenOptions { threads, policy } = *options;
    let cores = topology::usable_cores();
    let slices = topology::split_cores(names, &cores)?;
    let n = slices.len() as f64;
    slices
        .into_iter()
        .map(|slice| {
            let name = match slice.index {
                Some(i) => format!("cpu:{i}"),
                None => "cpu".to_string(),
            };
            let count = match (slice.index, threads) {
                (None, Some(t)) => t.max(1),
                _ => slice.cores.len(),
            };
            let pinned = if slice.index.is_some() { slice.cores } else { Vec::new() };
            let mut device = CpuDevice::new(&name, pinned, count, 1.0 / n)?;
            device.set_wait_policy(policy);
            Ok(Arc::new(device))
        })
        .collect()
}
