//! CPU device memory: zeroed, 64-byte aligned host allocations, or private
//! mappings of a file's weights (`mapping`).

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::any::Any;
use std::ptr::NonNull;
use std::sync::Arc;

use baton_core::backend::RawBuffer;

use crate::mapping::Mapping;
use crate::memory::{Counted, MemoryCounters};
use crate::packed_cache::PackedCache;

/// Alignment of every allocated CPU buffer (a cache line, and enough for
/// AVX-512).
pub const ALIGN: usize = 64;

/// Where a buffer's bytes live.
enum Backing {
    /// Allocated with `alloc_zeroed` and this layout.
    Heap(Layout),
    /// A file's pages (the buffer's bytes start `ptr - mapping start` into
    /// the mapping), unmapped when dropped.
    Mapped { _mapping: Mapping },
}

/// A block of host memory owned by one CPU device.
pub struct CpuBuffer {
    ptr: NonNull<u8>,
    len: usize,
    device: String,
    backing: Backing,
    /// Packed matmul weights, used once the buffer is sealed weights.
    packed: PackedCache,
    /// Keeps the device's count of live bytes.
    counted: Counted,
}

// SAFETY: the buffer owns its allocation or mapping exclusively; all access
// goes through raw pointers whose use the runtime orders (RawBuffer's
// contract), so moving or sharing the handle between threads adds no
// unsynchronised access.
unsafe impl Send for CpuBuffer {}
// SAFETY: as above; `&CpuBuffer` exposes only the length, the name, the
// pointer value and the packed cache (behind its own lock).
unsafe impl Sync for CpuBuffer {}

impl CpuBuffer {
    /// Allocates `len` zeroed bytes; `None` if the allocator refuses.
    pub(crate) fn new(len: usize, device: &str, counters: &Arc<MemoryCounters>) -> Option<CpuBuffer> {
        let layout = Layout::from_size_align(len.max(1), ALIGN).ok()?;
        // SAFETY: the layout has a non-zero size.
        let ptr = NonNull::new(unsafe { alloc_zeroed(layout) })?;
        Some(CpuBuffer {
            ptr,
            len,
            device: device.to_string(),
            backing: Backing::Heap(layout),
            packed: PackedCache::default(),
            counted: Counted::allocated(counters, len),
        })
    }

    /// A buffer over a file's mapped pages: `len` bytes from `ptr`, inside
    /// `mapping`. Its packed cache gives the pages of each matrix it packs
    /// back to the page cache (see `mapping`).
    pub(crate) fn mapped(mapping: Mapping, device: &str, counters: &Arc<MemoryCounters>) -> CpuBuffer {
        let (ptr, len) = (mapping.bytes_ptr(), mapping.bytes_len());
        CpuBuffer {
            ptr,
            len,
            device: device.to_string(),
            packed: PackedCache::releasing(mapping.pages()),
            backing: Backing::Mapped { _mapping: mapping },
            counted: Counted::mapped(counters, len),
        }
    }

    /// The packed forms of this buffer's matmul weights (used only while
    /// the buffer is sealed weights: see `packed_cache`).
    pub(crate) fn packed(&self) -> &PackedCache {
        &self.packed
    }

    /// Whether the bytes are a file's mapping.
    pub fn is_mapped(&self) -> bool {
        matches!(self.backing, Backing::Mapped { .. })
    }
}

impl Drop for CpuBuffer {
    fn drop(&mut self) {
        self.counted.counters().remove_derived(self.packed.bytes());
        if let Backing::Heap(layout) = self.backing {
            // SAFETY: `ptr` came from `alloc_zeroed` with this layout and is
            // freed once, here; the runtime drops a buffer only after all
            // work holding it has been dropped. (A mapping unmaps itself.)
            unsafe { dealloc(self.ptr.as_ptr(), layout) };
        }
    }
}

// SAFETY: `len` is fixed; the allocation (or the private, writable mapping)
// lives until drop and is valid for reads and writes of `len` bytes from
// any thread.
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
