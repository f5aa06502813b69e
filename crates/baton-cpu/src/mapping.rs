//! Weights read straight from a file's pages: a private mapping, and the
//! release of the pages of a matrix once it is packed.
//!
//! [`CpuDevice::map_file`](crate::CpuDevice) maps a range of a GGUF file
//! copy-on-write (`MAP_PRIVATE`, readable and writable, so the buffer keeps
//! `RawBuffer`'s promise of writable memory) and wraps it as a buffer that
//! is sealed weights from the start: the runtime refuses every write into
//! it, so no page is ever copied and every page equals the file's.
//!
//! That fact makes the weights held once. A page of the mapping costs
//! resident memory only while it is mapped in; the kernels read the packed
//! form of a matrix once it exists, so after packing, its pages are given
//! back (`MADV_DONTNEED`). A later read of the original bytes (a row lookup
//! of a tied embedding, a conformance read) faults the page in again from
//! the page cache, with the same bytes, because none was ever written; the
//! released range is marked `MADV_RANDOM`, so such a fault brings in its
//! page, not a readahead window around it.

use std::ptr::NonNull;

use baton_core::backend::FileRange;

/// A private mapping of a file range; unmapped on drop.
pub(crate) struct Mapping {
    /// The mapping's first byte (page aligned).
    base: NonNull<u8>,
    /// Bytes mapped from `base` (whole pages of the file).
    map_len: usize,
    /// Offset of the range's first byte from `base`.
    skip: usize,
    /// Bytes of the range.
    len: usize,
}

/// The address range of a mapping, for releasing pages of it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MappedPages {
    start: usize,
    end: usize,
}

/// Why a file range could not be mapped.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MapError {
    #[error("the range {offset}..{end} is not inside the file of {file_len} bytes")]
    OutsideFile { offset: u64, end: u64, file_len: u64 },
    #[error("an empty range cannot be mapped")]
    Empty,
    #[error("mmap failed: {0}")]
    Mmap(std::io::Error),
    #[error("could not read the file's length: {0}")]
    Metadata(std::io::Error),
}

fn page_size() -> usize {
    // SAFETY: sysconf with a valid name only reads a system constant.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).ok().filter(|s| s.is_power_of_two()).unwrap_or(4096)
}

impl Mapping {
    /// Maps `range` copy-on-write. The range must lie inside the file (a
    /// read past its end would fault).
    pub(crate) fn new(range: FileRange<'_>) -> Result<Mapping, MapError> {
        use std::os::fd::AsRawFd;
        if range.len == 0 {
            return Err(MapError::Empty);
        }
        let file_len = range.file.metadata().map_err(MapError::Metadata)?.len();
        let end = range.offset.saturating_add(range.len as u64);
        if end > file_len {
            return Err(MapError::OutsideFile { offset: range.offset, end, file_len });
        }
        let page = page_size() as u64;
        let aligned = range.offset / page * page;
        let skip = (range.offset - aligned) as usize;
        let map_len = skip + range.len;
        let offset = libc::off_t::try_from(aligned).map_err(|_| MapError::OutsideFile {
            offset: range.offset,
            end,
            file_len,
        })?;
        // SAFETY: a fresh mapping (no address hint) of `map_len` bytes of an
        // open file descriptor at a page-aligned offset; it aliases no Rust
        // object. The range lies inside the file (checked above), so every
        // byte is backed while the file is not truncated (the caveat of
        // `Device::map_file`).
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE,
                range.file.as_raw_fd(),
                offset,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(MapError::Mmap(std::io::Error::last_os_error()));
        }
        let base = NonNull::new(base.cast::<u8>()).ok_or(MapError::Mmap(std::io::Error::other("null mapping")))?;
        Ok(Mapping { base, map_len, skip, len: range.len })
    }

    /// The range's first byte.
    pub(crate) fn bytes_ptr(&self) -> NonNull<u8> {
        // SAFETY: `skip < map_len`, so the pointer stays inside the mapping.
        unsafe { self.base.add(self.skip) }
    }

    /// Bytes of the range.
    pub(crate) fn bytes_len(&self) -> usize {
        self.len
    }

    /// The mapping's address range.
    pub(crate) fn pages(&self) -> MappedPages {
        let start = self.base.as_ptr() as usize;
        MappedPages { start, end: start + self.map_len }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `base` and `map_len` are the mapping made in `new`,
        // unmapped once, here; the buffer that owns it is dropped only
        // after all work reading it (the runtime's `D-DEFER` rule).
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.map_len) };
    }
}

impl MappedPages {
    /// Gives back to the page cache the whole pages of this mapping that
    /// `data` covers; returns the bytes given back. Reading them later
    /// faults them in again with the same bytes.
    ///
    /// # Safety
    ///
    /// No byte of the mapping was ever written (the buffer is sealed from
    /// its creation), so each page equals the file's and dropping it loses
    /// nothing.
    pub(crate) unsafe fn release(&self, data: &[u8]) -> usize {
        let page = page_size();
        let first = data.as_ptr() as usize;
        let (start, end) = (first.max(self.start), (first + data.len()).min(self.end));
        let start = start.div_ceil(page) * page;
        let end = end / page * page;
        if end <= start {
            return 0;
        }
        // SAFETY: `start..end` is whole pages inside this mapping; by the
        // caller's promise they were never written, so MADV_DONTNEED only
        // unmaps clean private pages, which later reads fault in again from
        // the file. A failure (none is expected) only leaves them resident.
        let done = unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
        // What reads these pages again reads a few rows at random (a tied
        // embedding's lookups): without this, each fault reads around it as
        // much as the disk's readahead (8 MiB on some virtual disks), all
        // of it resident again.
        // SAFETY: as above; MADV_RANDOM only changes the kernel's readahead
        // for the range, never its contents.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_RANDOM) };
        if done == 0 {
            end - start
        } else {
            0
        }
    }
}
