//! CPU device memory: zeroed, 64-byte aligned host allocations.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::any::Any;
use std::ptr::NonNull;

use baton_core::backend::RawBuffer;

use crate::packed_cache::PackedCache;

/// Alignment of every CPU buffer (a cache line, and enough for AVX-512).
pub const ALIGN: usize = 64;

/// A block of host memory owned by one CPU device.
pub struct CpuBuffer {
    ptr: NonNull<u8>,
    len: usize,
    device: String,
    /// Packed matmul weights, used once the buffer is sealed weights.
    packed: PackedCache,
}

// SAFETY: the buffer owns its allocation exclusively; all access goes through
// raw pointers whose use the runtime orders (RawBuffer's contract), so moving
// or sharing the handle between threads adds no unsynchronised access.
unsafe impl Send for CpuBuffer {}
// SAFETY: as above; `&CpuBuffer` exposes only the length, the name and the
// pointer value.
unsafe impl Sync for CpuBuffer {}

impl CpuBuffer {
    /// Allocates `len` zeroed bytes; `None` if the allocator refuses.
    pub fn new(len: usize, device: &str) -> Option<CpuBuffer> {
        let layout = Layout::from_size_align(len.max(1), ALIGN).ok()?;
        // SAFETY: the layout has a non-zero size.
        let ptr = NonNull::new(unsafe { alloc_zeroed(layout) })?;
        Some(CpuBuffer { ptr, len, device: device.to_string(), packed: PackedCache::default() })
    }
}

impl CpuBuffer {
    /// The packed forms of this buffer's matmul weights (used only while
    /// the buffer is sealed weights: see `packed_cache`).
    pub(crate) fn packed(&self) -> &PackedCache {
        &self.packed
    }
}

impl Drop for CpuBuffer {
    fn drop(&mut self) {
        // The layout was valid when allocating, with the same numbers.
        if let Ok(layout) = Layout::from_size_align(self.len.max(1), ALIGN) {
            // SAFETY: `ptr` came from `alloc_zeroed` with this layout and is
            // freed once, here; the runtime drops a buffer only after all work
            // holding it has been dropped.
            unsafe { dealloc(self.ptr.as_ptr(), layout) };
        }
    }
}

// SAFETY: `len` is fixed; the allocation lives until drop and is valid for
// reads and writes of `len` bytes from any thread.
unsafe impl RawBuffer for CpuBuffer {
    fn len(&self) -> usize {
        self.len
    }
    fn device(&self) -> &str {
        &self.device
    }
    fn host_ptr(&self) -> Option<NonNull<u8>> {
        Some(self.ptr)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}
