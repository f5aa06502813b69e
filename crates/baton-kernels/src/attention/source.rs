//! A block of keys or values as the kernels read it: rows of `d` elements,
//! either straight from the cache (f32, f16, bf16, Q8_0 or Q4_0 rows that
//! lie in one run of bytes) or decoded to f32 beforehand (other block
//! types, and a ring's block that wraps around). The kernels widen 16-bit
//! elements and decode blocks (`d · q`, one rounding) as they load them,
//! which gives the values decoding gives, so both give the same bits.

use std::marker::PhantomData;

use half::{bf16, f16};

use crate::convert::Half16;

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Rows of `d` elements, read element by element or a register at a time.
///
/// # Safety
/// An implementation's `len` rows of `d` elements are all readable, which
/// the vector loads rely on.
pub(super) unsafe trait Elements: Copy {
    /// Rows held.
    fn len(&self) -> usize;

    /// Element `i` of row `j` (`j < len`, `i < d`).
    fn get(&self, j: usize, i: usize) -> f32;

    /// Elements `i..i + 8` of row `j`.
    ///
    /// # Safety
    /// `j < len`, `i + 8 <= d`; the CPU has AVX2, FMA and F16C.
    #[cfg(target_arch = "x86_64")]
    unsafe fn load8(&self, j: usize, i: usize) -> __m256;

    /// Elements `i..i + 16` of row `j`.
    ///
    /// # Safety
    /// `j < len`, `i + 16 <= d`; the CPU has the `Isa::Avx512` features.
    #[cfg(target_arch = "x86_64")]
    unsafe fn load16(&self, j: usize, i: usize) -> __m512;
}

/// Rows already in f32.
#[derive(Clone, Copy, Debug)]
pub(super) struct F32Rows<'a> {
    data: &'a [f32],
    d: usize,
}

impl<'a> F32Rows<'a> {
    /// The whole rows in `data` (`d > 0`).
    pub(super) fn new(data: &'a [f32], d: usize) -> F32Rows<'a> {
        F32Rows { data: &data[..data.len() / d * d], d }
    }
}

// SAFETY: `data` is cut to `len * d` elements (`new`), and every load
// reads inside row `j < len`.
unsafe impl Elements for F32Rows<'_> {
    fn len(&self) -> usize {
        self.data.len() / self.d
    }

    #[inline(always)]
    fn get(&self, j: usize, i: usize) -> f32 {
        self.data[j * self.d + i]
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(&self, j: usize, i: usize) -> __m256 {
        // SAFETY: the caller's `j < len`, `i + 8 <= d`; AVX is part of AVX2.
        unsafe { _mm256_loadu_ps(self.data.as_ptr().add(j * self.d + i)) }
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load16(&self, j: usize, i: usize) -> __m512 {
        // SAFETY: as above, with AVX-512 F.
        unsafe { _mm512_loadu_ps(self.data.as_ptr().add(j * self.d + i)) }
    }
}

/// Little-endian rows of a 16-bit float format `H` in the cache's bytes,
/// `d` elements each, one after the other.
#[derive(Debug)]
pub(super) struct HalfRows<'a, H> {
    data: &'a [u8],
    d: usize,
    format: PhantomData<H>,
}

impl<H> Clone for HalfRows<'_, H> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<H> Copy for HalfRows<'_, H> {}

impl<'a, H> HalfRows<'a, H> {
    /// The whole rows in `data` (`d > 0`).
    pub(super) fn new(data: &'a [u8], d: usize) -> HalfRows<'a, H> {
        HalfRows { data: &data[..data.len() / (2 * d) * 2 * d], d, format: PhantomData }
    }
}

// SAFETY: `data` is cut to `len * d` elements of 2 bytes (`new`), and every
// load reads inside row `j < len`.
unsafe impl<H: Half16> Elements for HalfRows<'_, H> {
    fn len(&self) -> usize {
        self.data.len() / (2 * self.d)
    }

    #[inline(always)]
    fn get(&self, j: usize, i: usize) -> f32 {
        let at = 2 * (j * self.d + i);
        H::widen(u16::from_le_bytes([self.data[at], self.data[at + 1]]))
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(&self, j: usize, i: usize) -> __m256 {
        // SAFETY: the caller's `j < len`, `i + 8 <= d` keep 16 bytes inside
        // the rows; the CPU has AVX2, FMA and F16C.
        unsafe { H::widen8(self.data.as_ptr().add(2 * (j * self.d + i)).cast()) }
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load16(&self, j: usize, i: usize) -> __m512 {
        // SAFETY: as above, 32 bytes; the CPU has the AVX-512 features.
        unsafe { H::widen16(_mm256_loadu_si256(self.data.as_ptr().add(2 * (j * self.d + i)).cast())) }
    }
}

/// A 32-value block format whose value is `d · q` with an integer `q`:
/// Q8_0 (`q` signed bytes) and Q4_0 (`q` a nibble less 8).
pub(super) trait BlockKind: Copy {
    /// Bytes of a block: the f16 `d`, then the integers.
    const BYTES: usize;

    /// `q` of element `k` of `block`.
    fn quant(block: &[u8], k: usize) -> i32;

    /// `q` of elements `o..o + 16` (`o` 0 or 16) of the block at `block`.
    ///
    /// # Safety
    /// `block` is readable for a block; the CPU has the `Isa::Avx512`
    /// features.
    #[cfg(target_arch = "x86_64")]
    unsafe fn quants16(block: *const u8, o: usize) -> __m512i;

    /// `q` of elements `o..o + 8` (`o` a multiple of 8 below 32).
    ///
    /// # Safety
    /// `block` is readable for a block; the CPU has AVX2.
    #[cfg(target_arch = "x86_64")]
    unsafe fn quants8(block: *const u8, o: usize) -> __m256i;
}

/// Q8_0 blocks.
#[derive(Clone, Copy, Debug)]
pub(super) struct Q8;

impl BlockKind for Q8 {
    const BYTES: usize = 34;

    fn quant(block: &[u8], k: usize) -> i32 {
        i32::from(block[2 + k] as i8)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
    unsafe fn quants16(block: *const u8, o: usize) -> __m512i {
        // SAFETY: bytes 2 + o .. 2 + o + 16 <= 34 of the block.
        _mm512_cvtepi8_epi32(unsafe { _mm_loadu_si128(block.add(2 + o).cast()) })
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn quants8(block: *const u8, o: usize) -> __m256i {
        // SAFETY: bytes 2 + o .. 2 + o + 8 <= 34 of the block.
        _mm256_cvtepi8_epi32(unsafe { _mm_loadl_epi64(block.add(2 + o).cast()) })
    }
}

/// Q4_0 blocks: element `k < 16` in the low nibble of byte `k`, `k >= 16`
/// in the high nibble of byte `k - 16`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Q4;

impl BlockKind for Q4 {
    const BYTES: usize = 18;

    fn quant(block: &[u8], k: usize) -> i32 {
        let byte = block[2 + k % 16];
        i32::from(if k < 16 { byte & 15 } else { byte >> 4 }) - 8
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
    unsafe fn quants16(block: *const u8, o: usize) -> __m512i {
        // SAFETY: bytes 2..18 of the block.
        let bytes = unsafe { _mm_loadu_si128(block.add(2).cast()) };
        let nibbles = if o < 16 { bytes } else { _mm_srli_epi16::<4>(bytes) };
        let nibbles = _mm_and_si128(nibbles, _mm_set1_epi8(15));
        _mm512_sub_epi32(_mm512_cvtepu8_epi32(nibbles), _mm512_set1_epi32(8))
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn quants8(block: *const u8, o: usize) -> __m256i {
        // SAFETY: bytes 2 + o % 16 .. + 8 <= 18 of the block.
        let bytes = unsafe { _mm_loadl_epi64(block.add(2 + o % 16).cast()) };
        let nibbles = if o < 16 { bytes } else { _mm_srli_epi16::<4>(bytes) };
        let nibbles = _mm_and_si128(nibbles, _mm_set1_epi8(15));
        _mm256_sub_epi32(_mm256_cvtepu8_epi32(nibbles), _mm256_set1_epi32(8))
    }
}

/// Rows of `d` elements (whole blocks) of block format `K` in the cache's
/// bytes, one after the other. An element is `d · q` rounded once, as
/// decoding gives it.
#[derive(Debug)]
pub(super) struct BlockRows<'a, K> {
    data: &'a [u8],
    /// Bytes of a row.
    row: usize,
    kind: PhantomData<K>,
}

impl<K> Clone for BlockRows<'_, K> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K> Copy for BlockRows<'_, K> {}

impl<'a, K: BlockKind> BlockRows<'a, K> {
    /// The whole rows in `data` (`d` a positive multiple of 32).
    pub(super) fn new(data: &'a [u8], d: usize) -> BlockRows<'a, K> {
        let row = d / 32 * K::BYTES;
        BlockRows { data: &data[..data.len() / row * row], row, kind: PhantomData }
    }

    /// The block holding element `i` of row `j`, and its `d`.
    #[inline(always)]
    fn block(&self, j: usize, i: usize) -> (&'a [u8], f32) {
        let at = j * self.row + i / 32 * K::BYTES;
        let block = &self.data[at..at + K::BYTES];
        (block, f16::from_le_bytes([block[0], block[1]]).to_f32())
    }
}

// SAFETY: `data` is cut to whole rows (`new`); every load reads inside the
// block of element `i` of row `j < len`, found through a bounds-checked
// slice.
unsafe impl<K: BlockKind> Elements for BlockRows<'_, K> {
    fn len(&self) -> usize {
        self.data.len() / self.row
    }

    #[inline(always)]
    fn get(&self, j: usize, i: usize) -> f32 {
        let (block, d) = self.block(j, i);
        d * K::quant(block, i % 32) as f32
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(&self, j: usize, i: usize) -> __m256 {
        // SAFETY: the caller's `j < len` and `i < d` put the block inside
        // the rows (`new` cut them whole); `i % 32` is a multiple of 8 (the
        // kernels load at multiples of 8); the CPU has AVX2 and F16C.
        unsafe {
            let block = self.data.as_ptr().add(j * self.row + i / 32 * K::BYTES);
            let d = _mm256_cvtph_ps(_mm_set1_epi16(block.cast::<i16>().read_unaligned()));
            _mm256_mul_ps(d, _mm256_cvtepi32_ps(K::quants8(block, i % 32)))
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load16(&self, j: usize, i: usize) -> __m512 {
        // SAFETY: as above, `i % 32` 0 or 16; the AVX-512 features.
        unsafe {
            let block = self.data.as_ptr().add(j * self.row + i / 32 * K::BYTES);
            let d = _mm512_cvtph_ps(_mm256_set1_epi16(block.cast::<i16>().read_unaligned()));
            _mm512_mul_ps(d, _mm512_cvtepi32_ps(K::quants16(block, i % 32)))
        }
    }
}

/// A block of keys or values, in one of the forms the kernels read.
#[derive(Clone, Copy, Debug)]
pub(super) enum Source<'a> {
    /// Decoded to f32, or f32 in the cache (aligned as f32).
    F32(F32Rows<'a>),
    /// f16 rows of the cache.
    F16(HalfRows<'a, f16>),
    /// bf16 rows of the cache.
    Bf16(HalfRows<'a, bf16>),
    /// Q8_0 rows of the cache.
    Q8_0(BlockRows<'a, Q8>),
    /// Q4_0 rows of the cache.
    Q4_0(BlockRows<'a, Q4>),
}

impl<'a> Source<'a> {
    /// Rows `from..` of the block.
    pub(super) fn skip(self, from: usize) -> Source<'a> {
        match self {
            Source::F32(r) => Source::F32(F32Rows { data: &r.data[from * r.d..], d: r.d }),
            Source::F16(r) => Source::F16(HalfRows::new(&r.data[2 * from * r.d..], r.d)),
            Source::Bf16(r) => Source::Bf16(HalfRows::new(&r.data[2 * from * r.d..], r.d)),
            Source::Q8_0(r) => Source::Q8_0(BlockRows { data: &r.data[from * r.row..], ..r }),
            Source::Q4_0(r) => Source::Q4_0(BlockRows { data: &r.data[from * r.row..], ..r }),
        }
    }
}

/// Evaluates `$body` with `$rows` bound to the [`Elements`] inside the
/// [`Source`] `$source`.
macro_rules! with_elements {
    ($source:expr, $rows:ident => $body:expr) => {
        match $source {
            $crate::attention::source::Source::F32($rows) => $body,
            $crate::attention::source::Source::F16($rows) => $body,
            $crate::attention::source::Source::Bf16($rows) => $body,
            $crate::attention::source::Source::Q8_0($rows) => $body,
            $crate::attention::source::Source::Q4_0($rows) => $body,
        }
    };
}
pub(super) use with_elements;
