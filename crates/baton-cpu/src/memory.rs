//! A CPU device's count of the bytes it holds, by kind
//! ([`Device::memory`](baton_core::backend::Device::memory)).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use baton_core::backend::DeviceMemory;

/// Live bytes of one device's buffers.
#[derive(Default)]
pub(crate) struct MemoryCounters {
    allocated: AtomicU64,
    mapped: AtomicU64,
    derived: AtomicU64,
}

impl MemoryCounters {
    /// What the counters say now.
    pub(crate) fn snapshot(&self) -> DeviceMemory {
        DeviceMemory {
            allocated: self.allocated.load(Ordering::Relaxed),
            mapped: self.mapped.load(Ordering::Relaxed),
            derived: self.derived.load(Ordering::Relaxed),
        }
    }

    /// Adds `bytes` of derived forms (packed weights).
    pub(crate) fn add_derived(&self, bytes: u64) {
        self.derived.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Removes `bytes` of derived forms freed with their buffer.
    pub(crate) fn remove_derived(&self, bytes: u64) {
        self.derived.fetch_sub(bytes, Ordering::Relaxed);
    }
}

/// Counts a buffer's bytes while it lives: added on creation, removed on
/// drop.
pub(crate) struct Counted {
    counters: Arc<MemoryCounters>,
    bytes: u64,
    mapped: bool,
}

impl Counted {
    /// `bytes` allocated.
    pub(crate) fn allocated(counters: &Arc<MemoryCounters>, bytes: usize) -> Counted {
        counters.allocated.fetch_add(bytes as u64, Ordering::Relaxed);
        Counted { counters: counters.clone(), bytes: bytes as u64, mapped: false }
    }

    /// `bytes` mapped from a file.
    pub(crate) fn mapped(counters: &Arc<MemoryCounters>, bytes: usize) -> Counted {
        counters.mapped.fetch_add(bytes as u64, Ordering::Relaxed);
        Counted { counters: counters.clone(), bytes: bytes as u64, mapped: true }
    }

    /// The device's counters.
    pub(crate) fn counters(&self) -> &MemoryCounters {
        &self.counters
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        let counter = if self.mapped { &self.counters.mapped } else { &self.counters.allocated };
        counter.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}
