//! What a CPU device shares with its streams: its description, its thread
//! pool and the bytes it holds.

use std::sync::atomic::AtomicU64;

use baton_core::backend::DeviceInfo;

use crate::pool::ThreadPool;

/// The part of a device its streams (and their executors) keep alive.
pub(crate) struct CpuDeviceShared {
    pub(crate) info: DeviceInfo,
    pub(crate) pool: ThreadPool,
    pub(crate) allocated: AtomicU64,
    /// Bytes of matmul weights packed for the kernels (`packed_cache`).
    pub(crate) packed: AtomicU64,
}

impl CpuDeviceShared {
    pub(crate) fn pool_threads(&self) -> usize {
        baton_core::Parallel::threads(&self.pool)
    }
}
