//! What a CPU device shares with its streams: its description, its thread
//! pool and the bytes it holds.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use baton_core::backend::DeviceInfo;

use crate::memory::MemoryCounters;
use crate::pool::ThreadPool;

/// The part of a device its streams (and their executors) keep alive.
pub(crate) struct CpuDeviceShared {
    pub(crate) info: DeviceInfo,
    pub(crate) pool: ThreadPool,
    /// Bytes allocated so far (not decreased by frees).
    pub(crate) allocated: AtomicU64,
    /// Bytes of matmul weights packed for the kernels so far
    /// (`packed_cache`; not decreased by frees).
    pub(crate) packed: AtomicU64,
    /// Live bytes by kind.
    pub(crate) memory: Arc<MemoryCounters>,
}

impl CpuDeviceShared {
    pub(crate) fn pool_threads(&self) -> usize {
        baton_core::Parallel::threads(&self.pool)
    }
}
