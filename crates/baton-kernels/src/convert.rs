//! Row conversions between f32 and the 16-bit floats (f16 with F16C, bf16 by
//! shifting), in typed form for callers and in byte form for encoded rows.

use half::{bf16, f16};

use crate::isa::Isa;

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// A 16-bit float format: how to widen and narrow one value and eight at
/// once, and widen sixteen at once.
pub(crate) trait Half16: Copy {
    /// The value with these bits widened to f32 (exact).
    fn widen(bits: u16) -> f32;
    /// `x` rounded to the nearest value of this format, as bits.
    fn narrow(x: f32) -> u16;

    /// Eight values at `src` (any alignment) widened to f32.
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C; `src` is readable for 8 `u16`.
    #[cfg(target_arch = "x86_64")]
    unsafe fn widen8(src: *const u16) -> __m256;

    /// Sixteen values (the 16-bit lanes of `bits`) widened to f32.
    ///
    /// # Safety
    /// The CPU has the `Isa::Avx512` features.
    #[cfg(target_arch = "x86_64")]
    unsafe fn widen16(bits: __m256i) -> __m512;

    /// Eight f32 narrowed (round to nearest even) into eight values at `dst`.
    ///
    /// # Safety
    /// The CPU has AVX2, FMA and F16C; `dst` is writable for 8 `u16`.
    #[cfg(target_arch = "x86_64")]
    unsafe fn narrow8(v: __m256, dst: *mut u16);
}

impl Half16 for f16 {
    #[inline]
    fn widen(bits: u16) -> f32 {
        f16::from_bits(bits).to_f32()
    }
    #[inline]
    fn narrow(x: f32) -> u16 {
        f16::from_f32(x).to_bits()
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn widen8(src: *const u16) -> __m256 {
        // SAFETY: 16 readable bytes at `src` (the trait method's contract).
        _mm256_cvtph_ps(unsafe { _mm_loadu_si128(src.cast()) })
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
    #[inline]
    unsafe fn widen16(bits: __m256i) -> __m512 {
        _mm512_cvtph_ps(bits)
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn narrow8(v: __m256, dst: *mut u16) {
        // SAFETY: 16 writable bytes at `dst` (the trait method's contract).
        unsafe { _mm_storeu_si128(dst.cast(), _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v)) };
    }
}

impl Half16 for bf16 {
    #[inline]
    fn widen(bits: u16) -> f32 {
        f32::from_bits(u32::from(bits) << 16)
    }
    #[inline]
    fn narrow(x: f32) -> u16 {
        bf16::from_f32(x).to_bits()
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn widen8(src: *const u16) -> __m256 {
        // SAFETY: 16 readable bytes at `src` (the trait method's contract).
        let wide = _mm256_cvtepu16_epi32(unsafe { _mm_loadu_si128(src.cast()) });
        _mm256_castsi256_ps(_mm256_slli_epi32::<16>(wide))
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
    #[inline]
    unsafe fn widen16(bits: __m256i) -> __m512 {
        _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(bits)))
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn narrow8(v: __m256, dst: *mut u16) {
        // Round to nearest even: add 0x7fff plus the lowest kept bit, then
        // keep the top half. NaNs keep their top half with the quiet bit set
        // (what `half::bf16::from_f32` does).
        let bits = _mm256_castps_si256(v);
        let lsb = _mm256_and_si256(_mm256_srli_epi32::<16>(bits), _mm256_set1_epi32(1));
        let rounded = _mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
        let rounded = _mm256_srli_epi32::<16>(rounded);
        let quiet = _mm256_or_si256(_mm256_srli_epi32::<16>(bits), _mm256_set1_epi32(0x40));
        let is_nan = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_UNORD_Q>(v, v));
        let halves = _mm256_blendv_epi8(rounded, quiet, is_nan);
        // Pack 8 x u32 (< 2^16) into 8 x u16 in the low 128 bits.
        let packed = _mm256_packus_epi32(halves, halves);
        let ordered = _mm256_permute4x64_epi64::<0b11_01_10_00>(packed);
        // SAFETY: 16 writable bytes at `dst` (the trait method's contract).
        unsafe { _mm_storeu_si128(dst.cast(), _mm256_castsi256_si128(ordered)) };
    }
}

/// Widens `n` values of format `H` at `src` into `dst`.
///
/// # Safety
/// `src` is readable for `n` `u16` (any alignment), `dst` writable for `n`
/// `f32`, and `isa` comes from [`Isa::current`].
pub(crate) unsafe fn widen_raw<H: Half16>(isa: Isa, src: *const u16, dst: *mut f32, n: usize) {
    let mut i = 0;
    #[cfg(target_arch = "x86_64")]
    if isa.has_avx2() {
        // SAFETY: `isa` comes from `Isa::current`, so the CPU has AVX2, FMA
        // and F16C (every level from Avx2 up); `i + 8 <= n`
        // keeps both pointers inside the caller's `n` elements.
        unsafe { i = widen_avx2::<H>(src, dst, n) };
    }
    let _ = isa;
    while i < n {
        // SAFETY: `i < n`, within the caller's guarantee.
        unsafe { *dst.add(i) = H::widen(src.add(i).read_unaligned()) };
        i += 1;
    }
}

/// Narrows `n` f32 at `src` into format `H` at `dst`.
///
/// # Safety
/// As [`widen_raw`], with the roles of source and destination swapped.
pub(crate) unsafe fn narrow_raw<H: Half16>(isa: Isa, src: *const f32, dst: *mut u16, n: usize) {
    let mut i = 0;
    #[cfg(target_arch = "x86_64")]
    if isa.has_avx2() {
        // SAFETY: as in `widen_raw`.
        unsafe { i = narrow_avx2::<H>(src, dst, n) };
    }
    let _ = isa;
    while i < n {
        // SAFETY: `i < n`, within the caller's guarantee.
        unsafe { dst.add(i).write_unaligned(H::narrow(*src.add(i))) };
        i += 1;
    }
}

/// Converts whole groups of 8 and returns how many elements it did.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn widen_avx2<H: Half16>(src: *const u16, dst: *mut f32, n: usize) -> usize {
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: `i + 8 <= n`; the caller guarantees `n` elements.
        unsafe { _mm256_storeu_ps(dst.add(i), H::widen8(src.add(i))) };
        i += 8;
    }
    i
}

/// Converts whole groups of 8 and returns how many elements it did.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn narrow_avx2<H: Half16>(src: *const f32, dst: *mut u16, n: usize) -> usize {
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: `i + 8 <= n`; the caller guarantees `n` elements.
        unsafe { H::narrow8(_mm256_loadu_ps(src.add(i)), dst.add(i)) };
        i += 8;
    }
    i
}

/// Widens little-endian 16-bit floats in `src` (2 bytes each) into `dst`.
/// The caller has checked `src.len() == 2 * dst.len()`.
pub(crate) fn widen_bytes<H: Half16>(isa: Isa, src: &[u8], dst: &mut [f32]) {
    assert_eq!(src.len(), 2 * dst.len(), "widen_bytes: caller checked lengths");
    // SAFETY: the assert above sizes both buffers for `dst.len()` elements;
    // the host is little-endian (checked at compile time in lib.rs).
    unsafe { widen_raw::<H>(isa, src.as_ptr().cast(), dst.as_mut_ptr(), dst.len()) }
}

/// Narrows `src` into little-endian 16-bit floats in `dst` (2 bytes each).
pub(crate) fn narrow_bytes<H: Half16>(isa: Isa, src: &[f32], dst: &mut [u8]) {
    assert_eq!(dst.len(), 2 * src.len(), "narrow_bytes: caller checked lengths");
    // SAFETY: as in `widen_bytes`.
    unsafe { narrow_raw::<H>(isa, src.as_ptr(), dst.as_mut_ptr().cast(), src.len()) }
}

macro_rules! typed_conversions {
    ($half:ty, $to_f32:ident, $from_f32:ident, $name:literal) => {
        #[doc = concat!("Converts a row of ", $name, " to f32 (exact).")]
        ///
        /// # Panics
        /// If the lengths differ (a caller bug).
        pub fn $to_f32(src: &[$half], dst: &mut [f32]) {
            assert_eq!(src.len(), dst.len(), concat!(stringify!($to_f32), ": lengths differ"));
            // SAFETY: `$half` is `repr(transparent)` over `u16`; both slices
            // hold `dst.len()` elements (assert above).
            unsafe { widen_raw::<$half>(Isa::current(), src.as_ptr().cast(), dst.as_mut_ptr(), dst.len()) }
        }

        #[doc = concat!("Converts a row of f32 to ", $name, ", rounding to nearest even.")]
        ///
        /// # Panics
        /// If the lengths differ (a caller bug).
        pub fn $from_f32(src: &[f32], dst: &mut [$half]) {
            assert_eq!(src.len(), dst.len(), concat!(stringify!($from_f32), ": lengths differ"));
            // SAFETY: as above.
            unsafe { narrow_raw::<$half>(Isa::current(), src.as_ptr(), dst.as_mut_ptr().cast(), src.len()) }
        }
    };
}

typed_conversions!(f16, f16_to_f32_row, f32_to_f16_row, "f16");
typed_conversions!(bf16, bf16_to_f32_row, f32_to_bf16_row, "bf16");
