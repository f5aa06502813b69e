//! Where the attention kernels find a key-value head's rows: one run of
//! rows (a cache of every position, or a ring of the last `len`), or rows
//! in blocks of [`BLOCK`] positions scattered over a pool (a paged cache,
//! each block wherever its table says). Every read of a row goes through
//! [`KvRows::row_index`] or [`KvRows::run`], so the two layouts differ only
//! in addresses: the same keys give the same bits wherever they lie.

use std::ops::Range;

use baton_core::graph::ATTENTION_BLOCK as BLOCK;
use baton_core::DType;

use super::source::{BlockRows, F32Rows, HalfRows, Source};
use super::transpose::{transpose_rows, RowType};
use crate::error::KernelError;
use crate::isa::Isa;
use crate::quant::dequantize_row;

/// Keys or values of one key-value head: position `s` is `dim` elements of
/// `dtype` (whole blocks) at row `r = s mod len` (a cache of every
/// position, or a ring of the last `len`), which is row `r` of `data`, or
/// with a block table, row `blocks[r / BLOCK] · BLOCK + r mod BLOCK` (a
/// block of a pool); a row is `stride` bytes from the one before.
#[derive(Clone, Copy, Debug)]
pub struct KvRows<'a> {
    /// Element type.
    pub dtype: DType,
    /// The rows' bytes.
    pub data: &'a [u8],
    /// Bytes from one position's row to the next.
    pub stride: usize,
    /// Elements per row (the head size).
    pub dim: usize,
    /// Positions.
    pub len: usize,
    /// The physical block of each [`BLOCK`] of positions (at least `len /
    /// BLOCK` rounded up), or `None` for rows in one run.
    pub blocks: Option<&'a [u32]>,
}

impl KvRows<'_> {
    /// Checks the rows fit `data` (and the table covers `len`); returns
    /// the bytes of one row.
    pub(super) fn check(&self, what: &'static str) -> Result<usize, KernelError> {
        let row = self.dtype.row_bytes(self.dim).ok_or(KernelError::PartialBlock {
            dtype: self.dtype,
            block_elems: self.dtype.block_elems(),
            elems: self.dim,
        })?;
        if self.len > 1 && self.stride < row {
            return Err(KernelError::StrideTooSmall { what, stride: self.stride, row });
        }
        // The last row read, past which `data` need not go.
        let last = match self.blocks {
            None => self.len.checked_sub(1),
            Some(blocks) => {
                let used = self.len.div_ceil(BLOCK);
                if blocks.len() < used {
                    return Err(KernelError::BufferTooSmall {
                        what: "block table entries",
                        needed: used,
                        actual: blocks.len(),
                    });
                }
                // Logical block `j` holds rows up to `len` of its BLOCK.
                (0..used).map(|j| blocks[j] as usize * BLOCK + (self.len - j * BLOCK).min(BLOCK) - 1).max()
            }
        };
        let needed = last.map_or(0, |r| r.saturating_mul(self.stride).saturating_add(row));
        if self.data.len() < needed {
            return Err(KernelError::BufferTooSmall { what, needed, actual: self.data.len() });
        }
        Ok(row)
    }

    /// The row of `data` that holds position `s`.
    pub(super) fn row_index(&self, s: usize) -> usize {
        let r = s % self.len.max(1);
        match self.blocks {
            None => r,
            Some(blocks) => blocks[r / BLOCK] as usize * BLOCK + r % BLOCK,
        }
    }

    /// The first byte of positions `range`'s rows when they lie in one run
    /// of bytes (rows `row` bytes apart, not wrapping the ring, inside one
    /// block of a table), else `None`.
    fn run(&self, range: Range<usize>, row: usize) -> Option<usize> {
        let (first, n) = (range.start % self.len.max(1), range.len());
        let in_one = match self.blocks {
            None => true,
            Some(_) => n == 0 || first / BLOCK == (first + n - 1) / BLOCK,
        };
        (self.stride == row && first + n <= self.len && in_one).then(|| self.row_index(range.start) * row)
    }

    /// Decodes positions `range` (at most `len` of them) into `out`
    /// (`range.len() * dim` values).
    fn decode(&self, range: Range<usize>, row: usize, out: &mut [f32]) -> Result<(), KernelError> {
        if let Some(at) = self.run(range.clone(), row) {
            return dequantize_row(self.dtype, &self.data[at..at + range.len() * row], out);
        }
        for (s, o) in range.zip(out.chunks_exact_mut(self.dim)) {
            let at = self.row_index(s) * self.stride;
            dequantize_row(self.dtype, &self.data[at..at + row], o)?;
        }
        Ok(())
    }
}

impl<'a> KvRows<'a> {
    /// Positions `range` (at most [`BLOCK`]) as the kernels read them: the
    /// cache's own rows where they are f32, f16, bf16, Q8_0 or Q4_0 in one
    /// run of bytes, else decoded into `buf` (`range.len() * dim` values).
    pub(super) fn source<'s>(
        &self,
        range: Range<usize>,
        row: usize,
        buf: &'s mut [f32],
    ) -> Result<Source<'s>, KernelError>
    where
        'a: 's,
    {
        let (n, d) = (range.len(), self.dim);
        if let Some(at) = self.run(range.clone(), row).filter(|_| d > 0) {
            let bytes: &'a [u8] = &self.data[at..at + n * row];
            match self.dtype {
                DType::F16 => return Ok(Source::F16(HalfRows::new(bytes, d))),
                DType::BF16 => return Ok(Source::Bf16(HalfRows::new(bytes, d))),
                DType::Q8_0 => return Ok(Source::Q8_0(BlockRows::new(bytes, d))),
                DType::Q4_0 => return Ok(Source::Q4_0(BlockRows::new(bytes, d))),
                DType::F32 => {
                    // SAFETY: every bit pattern is a valid f32, and
                    // `align_to` returns a middle part that is aligned.
                    let (head, floats, _) = unsafe { bytes.align_to::<f32>() };
                    if head.is_empty() && floats.len() == n * d {
                        return Ok(Source::F32(F32Rows::new(floats, d)));
                    }
                }
                _ => {}
            }
        }
        let out = &mut buf[..n * d];
        self.decode(range, row, out)?;
        Ok(Source::F32(F32Rows::new(out, d.max(1))))
    }

    /// Decodes positions `range` (at most [`BLOCK`]) transposed into
    /// `out` (`out[i * BLOCK + j]`: element `i` of the `j`th; zeros past
    /// them), through `keys` for the block types.
    pub(super) fn decode_transposed(
        &self,
        isa: Isa,
        range: Range<usize>,
        row: usize,
        keys: &mut [f32],
        out: &mut [f32],
    ) -> Result<(), KernelError> {
        let mut rows: [&[u8]; BLOCK] = [&[]; BLOCK];
        let n = range.len();
        let kind = match self.dtype {
            DType::F32 => Some(RowType::F32),
            DType::F16 => Some(RowType::F16),
            DType::BF16 => Some(RowType::Bf16),
            _ => None,
        };
        let kind = match kind {
            Some(kind) => {
                for (r, s) in rows.iter_mut().zip(range) {
                    let at = self.row_index(s) * self.stride;
                    *r = &self.data[at..at + row];
                }
                kind
            }
            None => {
                let d = self.dim;
                self.decode(range, row, &mut keys[..n * d])?;
                // SAFETY: any initialised f32 is 4 plain bytes, a `u8` needs
                // no alignment, and the byte view lives no longer than
                // `keys`, which nothing writes meanwhile.
                let bytes = unsafe { std::slice::from_raw_parts(keys.as_ptr().cast::<u8>(), 4 * n * d) };
                for (r, chunk) in rows.iter_mut().zip(bytes.chunks_exact((4 * d).max(1))) {
                    *r = chunk;
                }
                RowType::F32
            }
        };
        transpose_rows(isa, kind, &rows[..n], self.dim, out);
        Ok(())
    }

    /// Asks the CPU to start loading the rows of positions `range` (when
    /// they lie in one run of bytes) into L2, so the next block finds them
    /// in cache. (Into L1, a block's hundreds of lines held its few miss
    /// buffers: decode over 4,096 positions of SmolLM2 ran 10% slower.)
    pub(super) fn prefetch(&self, range: Range<usize>, row: usize) {
        let Some(at) = self.run(range.clone(), row) else { return };
        let Some(bytes) = self.data.get(at..at + range.len() * row) else { return };
        #[cfg(target_arch = "x86_64")]
        for line in bytes.chunks(64) {
            // SAFETY: SSE, the one feature `_mm_prefetch` needs, is part of
            // every x86_64 CPU; a prefetch is a hint that never faults and
            // changes no state a program can see (and the address is inside
            // `bytes` anyway).
            unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(line.as_ptr().cast()) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = bytes;
    }
}
