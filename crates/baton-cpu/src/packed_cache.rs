//! Matmul weights packed for the kernels ([`baton_kernels::packed`]), kept
//! beside the bytes of a buffer of declared weights.
//!
//! A buffer declared to hold weights
//! ([`Buffer::declare_weights`](baton_core::backend::Buffer::declare_weights))
//! is sealed by the first computation that reads it: no write is accepted
//! after that (the core refuses it). So the first linear matmul that reads
//! a weight matrix from such a buffer packs it once, here, and every later
//! one multiplies the packed copy: it can never be stale. The packed copy
//! lives as long as the buffer, and costs about as much memory as the
//! matrix. In an allocated buffer the original bytes stay too (row lookups
//! and reads use them); in a file's mapping (`mapping`) their pages are
//! given back once packed, so the matrix is held once.
//! `BATON_REPACK=0` turns packing off for a process.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use baton_core::loom::Mutex;
use baton_core::DType;
use baton_kernels::packed::packable;
use baton_kernels::{KernelError, PackedWeights, WeightMatrix};

use crate::device_shared::CpuDeviceShared;
use crate::mapping::MappedPages;

/// Whether packing is on: off where [`set_repack`]`(false)` was called
/// (`--no-repack`) or the environment variable `BATON_REPACK=0` is set, to
/// measure or compare the weights' own layout.
pub fn enabled() -> bool {
    match REPACK.load(Ordering::Relaxed) {
        ON => true,
        OFF => false,
        _ => {
            let on = std::env::var("BATON_REPACK").map_or(true, |v| v != "0");
            let _ = REPACK.compare_exchange(UNSET, if on { ON } else { OFF }, Ordering::Relaxed, Ordering::Relaxed);
            REPACK.load(Ordering::Relaxed) == ON
        }
    }
}

/// Turns the packing of sealed matmul weights on or off for this process
/// (matrices packed already stay packed); it is on by default.
pub fn set_repack(on: bool) {
    REPACK.store(if on { ON } else { OFF }, Ordering::Relaxed);
}

const UNSET: u8 = 0;
const ON: u8 = 1;
const OFF: u8 = 2;
static REPACK: AtomicU8 = AtomicU8::new(UNSET);

/// What identifies a matrix in its buffer: the address of its first byte
/// and its shape (a buffer's address never changes while it lives).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    address: usize,
    dtype: DType,
    rows: usize,
    cols: usize,
    stride: usize,
}

impl Key {
    fn of(w: &WeightMatrix<'_>) -> Key {
        Key {
            address: w.data.as_ptr() as usize,
            dtype: w.dtype,
            rows: w.rows,
            cols: w.cols,
            stride: w.row_stride_bytes,
        }
    }
}

/// The packed matrices of one buffer.
#[derive(Default)]
pub(crate) struct PackedCache {
    entries: Mutex<HashMap<Key, Arc<PackedWeights>>>,
    /// Bytes of the packed matrices held.
    bytes: AtomicU64,
    /// The file mapping whose pages a packed matrix gives back; `None` for
    /// allocated buffers.
    source: Option<MappedPages>,
}

impl PackedCache {
    /// The cache of a buffer that maps a file's weights and is sealed from
    /// its creation: each matrix's pages are given back once it is packed.
    pub(crate) fn releasing(pages: MappedPages) -> PackedCache {
        PackedCache { source: Some(pages), ..PackedCache::default() }
    }

    /// Bytes of the packed matrices held.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// The packed form of `w` if it was packed already (a row lookup of a
    /// tied embedding reads it rather than the original pages, which a
    /// mapping gave back).
    pub(crate) fn get(&self, w: &WeightMatrix<'_>) -> Option<Arc<PackedWeights>> {
        self.entries.lock().get(&Key::of(w)).cloned()
    }

    /// The packed form of `w` (bytes inside this cache's sealed buffer),
    /// packed now on `device`'s pool if this is its first use (its size
    /// counted by the device); `None` for types without a packed form.
    /// Streams that ask at once wait for one packing.
    pub(crate) fn get_or_pack(
        &self,
        w: &WeightMatrix<'_>,
        device: &CpuDeviceShared,
    ) -> Result<Option<Arc<PackedWeights>>, KernelError> {
        if !packable(w.dtype) || !enabled() {
            return Ok(None);
        }
        let key = Key::of(w);
        let mut entries = self.entries.lock();
        if let Some(packed) = entries.get(&key) {
            return Ok(Some(packed.clone()));
        }
        let release = |rows: &[u8]| {
            if let Some(pages) = &self.source {
                // SAFETY: `source` is set only for a mapping that is sealed
                // weights from its creation (`CpuDevice::map_file`): the
                // runtime never wrote a byte of it.
                unsafe { pages.release(rows) };
            }
        };
        let Some(packed) = PackedWeights::pack_releasing(w, &device.pool, &release)? else { return Ok(None) };
        tracing::debug!(dtype = %w.dtype, rows = w.rows, cols = w.cols, bytes = packed.bytes(), "packed matmul weights");
        let bytes = packed.bytes() as u64;
        device.packed.fetch_add(bytes, Ordering::Relaxed);
        device.memory.add_derived(bytes);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        // Pages the chunks' edges kept.
        release(w.data);
        let packed = Arc::new(packed);
        entries.insert(key, packed.clone());
        Ok(Some(packed))
    }
}
