//! CPU device memory: zeroed, 64-byte aligned host allocations, or private
//! mappings of a file's weights (`mapping`).
//!
//! A large allocation (a KV cache of many slots, a pool of blocks) is an
//! anonymous private mapping rather than a heap block: the kernel gives
//! its pages zeroed on first touch, so its resident memory grows with what
//! is written, not with what is reserved. (The heap's zeroed allocation of
//! a 64-byte alignment writes every byte: `baton serve --parallel 32 -c
//! 8192` on SmolLM2 sat at 6.0 GB before one request.)

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
    /// An anonymous private mapping of this many bytes (pages zeroed on
    /// first touch), unmapped when dropped.
    Anonymous(usize),
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
    /// Allocates `len` zeroed bytes (from [`LAZY_BYTES`] on, pages that
    /// become resident as they are first touched); `None` if the allocator
    /// refuses.
    pub(crate) fn new(len: usize, device: &str, counters: &Arc<MemoryCounters>) -> Option<CpuBuffer> {
        let (ptr, backing) = match anonymous(len) {
            Some(ptr) => (ptr, Backing::Anonymous(len)),
            None => {
                let layout = Layout::from_size_align(len.max(1), ALIGN).ok()?;
                // SAFETY: the layout has a non-zero size.
                let ptr = NonNull::new(unsafe { alloc_zeroed(layout) })?;
                (ptr, Backing::Heap(layout))
            }
        };
        Some(CpuBuffer {
            ptr,
            len,
            device: device.to_string(),
            backing,
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
        match self.backing {
            // SAFETY: `ptr` came from `alloc_zeroed` with this layout and is
            // freed once, here; the runtime drops a buffer only after all
            // work holding it has been dropped. (A mapping unmaps itself.)
            Backing::Heap(layout) => unsafe { dealloc(self.ptr.as_ptr(), layout) },
            Backing::Anonymous(len) => {
                // SAFETY: `ptr..ptr + len` is the whole mapping `anonymous`
                // made, unmapped once, here, after all work holding the
                // buffer has been dropped (as above).
                unsafe { libc::munmap(self.ptr.as_ptr().cast(), len) };
            }
            Backing::Mapped { .. } => {}
        }
    }
}

/// Allocations from this size on are anonymous mappings (see the module's
/// docs); smaller ones come from the heap.
pub const LAZY_BYTES: usize = 1 << 20;

/// An anonymous private mapping of `len` bytes (page-aligned, so
/// [`ALIGN`]ed; zero-filled on first touch), or `None` below
/// [`LAZY_BYTES`], under Miri (which has no `mmap`), or if the kernel
/// refuses (the heap is then asked).
fn anonymous(len: usize) -> Option<NonNull<u8>> {
    if len < LAZY_BYTES || cfg!(miri) {
        return None;
    }
    // SAFETY: a fresh private anonymous mapping at an address the kernel
    // picks aliases no memory of this process; the result is checked for
    // MAP_FAILED before use.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return None;
    }
    NonNull::new(ptr.cast())
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

#[cfg(all(test, target_os = "linux", not(miri)))]
mod tests {
    use super::*;

    /// The process's resident bytes (`VmRSS`).
    fn resident() -> usize {
        let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("a VmRSS line");
        let kib: usize = line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("VmRSS in kB");
        kib * 1024
    }

    #[test]
    fn a_large_buffer_is_zeroed_aligned_and_resident_only_where_written() {
        let counters = Arc::new(MemoryCounters::default());
        let len = 512 << 20;
        let before = resident();
        let buffer = CpuBuffer::new(len, "cpu", &counters).expect("512 MiB reserved");
        assert!(matches!(buffer.backing, Backing::Anonymous(n) if n == len));
        assert!((buffer.ptr.as_ptr() as usize).is_multiple_of(ALIGN));
        // Every 1 MiB, a byte read (zero) and one written: 512 pages.
        for at in (0..len).step_by(1 << 20) {
            // SAFETY: `at < len`, inside the buffer this test owns alone.
            unsafe {
                let p = buffer.ptr.as_ptr().add(at);
                assert_eq!(p.read(), 0);
                p.write(7);
            }
        }
        let grown = resident().saturating_sub(before);
        assert!(grown < 64 << 20, "512 MiB reserved, 512 pages written: {grown} bytes became resident");
        let small = CpuBuffer::new(LAZY_BYTES - 1, "cpu", &counters).expect("a small buffer");
        assert!(matches!(small.backing, Backing::Heap(_)));
    }
}
