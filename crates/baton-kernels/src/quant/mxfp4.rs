//! MXFP4 (OCP microscaling FP4, GGML type 39): blocks of 32 values, an
//! E8M0 exponent byte `e` and 16 bytes of 4-bit E2M1 codes (element `j` in
//! the low nibble of byte `j`, element `j + 16` in the high nibble), as
//! ggml's `block_mxfp4`. A code `c` stands for `KVALUES[c]`, the E2M1 value
//! doubled, and the scale is `2^(e - 128)` (the half makes up for the
//! doubling): `x = KVALUES[c] * 2^(e - 128)`.
//!
//! As a `BlockFormat` (`quant::MXFP4`) the codes index [`UNSIGNED`] (`KVALUES + 12`, in
//! `0..=24`) with the centre 12, so MXFP4 runs through the same unsigned
//! integer dot products as Q4_0 (`d * (q - 12)` is `d * KVALUES[c]`); the
//! SIMD tiles look the 16 entries up with a byte shuffle.

/// The E2M1 values, doubled, by code (ggml's `kvalues_mxfp4`): code 8 is
/// E2M1's negative zero, which decodes as 0.
pub(crate) const KVALUES: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// What [`UNSIGNED`] adds to [`KVALUES`].
pub(crate) const CENTRE: i32 = 12;

/// [`KVALUES`] plus 12: the unsigned integers the tiles multiply.
pub(crate) const UNSIGNED: [u8; 16] = {
    let mut table = [0u8; 16];
    let mut i = 0;
    while i < 16 {
        table[i] = (KVALUES[i] as i32 + CENTRE) as u8;
        i += 1;
    }
    table
};

/// ggml's reference quantizer (`quantize_row_mxfp4_ref`): `e =
/// floor(log2(amax)) - 2 + 127` (0 for an all-zero block; the f32 cast to
/// `u8` saturates), then each value takes the code whose `KVALUES[c] * d`
/// is nearest, the first such code on a tie.
/// Returns the scale byte and the 32 codes (the caller lays them out).
pub(crate) fn encode(src: &[f32; 32]) -> (u8, [u8; 32]) {
    let amax = src.iter().fold(0.0f32, |a, x| a.max(x.abs()));
    let e = if amax > 0.0 { (amax.log2().floor() - 2.0 + 127.0) as u8 } else { 0 };
    let d = e8m0_half(e);
    (e, src.map(|x| nearest_code(x, d)))
}

/// `2^(e - 128)` as an f32, as ggml's `GGML_E8M0_TO_FP32_HALF`: the bits
/// `(e - 1) << 23` for `e >= 2`, and the subnormals `0x0020_0000 << e` for
/// `e` 0 and 1.
#[inline]
pub(crate) fn e8m0_half(e: u8) -> f32 {
    let bits = if e < 2 { 0x0020_0000u32 << e } else { u32::from(e - 1) << 23 };
    f32::from_bits(bits)
}

/// The code whose value times `d` is nearest `x` (ggml's
/// `best_index_mxfp4`: the lowest code on a tie).
fn nearest_code(x: f32, d: f32) -> u8 {
    let mut best = (0u8, (f32::from(KVALUES[0]) * d - x).abs());
    for (code, &value) in KVALUES.iter().enumerate().skip(1) {
        let err = (f32::from(value) * d - x).abs();
        if err < best.1 {
            best = (code as u8, err);
        }
    }
    best.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::{BlockFormat, MXFP4};

    fn block(e: u8, qs: [u8; 16]) -> [u8; 17] {
        let mut block = [0u8; 17];
        block[0] = e;
        block[1..].copy_from_slice(&qs);
        block
    }

    #[test]
    fn e8m0_half_is_ggml_s_table() {
        assert_eq!(e8m0_half(0).to_bits(), 0x0020_0000);
        assert_eq!(e8m0_half(1).to_bits(), 0x0040_0000);
        assert_eq!(e8m0_half(0), 2f32.powi(-128));
        assert_eq!(e8m0_half(1), 2f32.powi(-127));
        assert_eq!(e8m0_half(2), 2f32.powi(-126));
        assert_eq!(e8m0_half(128), 1.0);
        assert_eq!(e8m0_half(130), 4.0);
        assert_eq!(e8m0_half(255), 2f32.powi(127));
    }

    /// The SIMD tiles' conversion of 8 exponents at once gives these bits
    /// for every byte (checked where the CPU has AVX2, which it needs).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_vector_scales_are_these_for_every_byte() {
        use std::arch::x86_64::*;
        let avx2 = crate::isa::Isa::available().iter().any(|isa| isa.has_avx2());
        for first in (0..=255u8).step_by(8).filter(|_| avx2) {
            let e: [i32; 8] = std::array::from_fn(|i| i32::from(first) + i as i32);
            let mut out = [0.0f32; 8];
            // SAFETY: the CPU has AVX2, FMA and F16C (`Isa::available`); `e`
            // and `out` are 8 lanes each.
            unsafe {
                _mm256_storeu_ps(out.as_mut_ptr(), crate::simd::e8m0_half_ps(_mm256_loadu_si256(e.as_ptr().cast())))
            };
            for (e, got) in e.iter().zip(out) {
                assert_eq!(got.to_bits(), e8m0_half(*e as u8).to_bits(), "e = {e}");
            }
        }
    }

    #[test]
    fn hand_computed_blocks_decode() {
        // e = 128: d = 1. Byte j: element j low, element j + 16 high.
        let mut qs = [0u8; 16];
        qs[0] = 0x71; // element 0: code 1 = 1, element 16: code 7 = 12
        qs[1] = 0xf5; // element 1: code 5 = 6, element 17: code 15 = -12
        qs[2] = 0x8a; // element 2: code 10 = -2, element 18: code 8 = -0 -> 0
        let mut out = [f32::NAN; 32];
        MXFP4::dequantize_block(&block(128, qs), &mut out);
        assert_eq!((out[0], out[16], out[1], out[17], out[2]), (1.0, 12.0, 6.0, -12.0, -2.0));
        assert_eq!(out[18].to_bits(), 0, "code 8 decodes as +0, as ggml's table");
        assert!(out[3..16].iter().chain(&out[19..]).all(|&x| x.to_bits() == 0));

        // e = 126: d = 1/4; code 6 = 8 -> 2, code 11 = -3 -> -0.75.
        let mut out = [0.0; 32];
        MXFP4::dequantize_block(&block(126, [0xb6; 16]), &mut out);
        assert!(out[..16].iter().all(|&x| x == 2.0) && out[16..].iter().all(|&x| x == -0.75), "{out:?}");
    }

    #[test]
    fn subnormal_scales_decode_exactly() {
        for (e, d) in [(0u8, 2f32.powi(-128)), (1, 2f32.powi(-127))] {
            let mut out = [0.0; 32];
            MXFP4::dequantize_block(&block(e, [0x3f; 16]), &mut out);
            // code 15 = -12, code 3 = 3: exact multiples of the subnormal d.
            assert_eq!(out[0], -12.0 * d, "e = {e}");
            assert_eq!(out[16], 3.0 * d, "e = {e}");
            assert!(d > 0.0 && !d.is_normal(), "the scale of e = {e} is subnormal");
        }
    }

    #[test]
    fn the_quantizer_follows_ggml() {
        // amax 6: e = floor(log2 6) - 2 + 127 = 127, d = 1/2; values on the
        // grid come back exactly, and the tie at 0.25 (between 0 and 0.5)
        // takes the first code.
        let mut src = [0.0f32; 32];
        src[0] = 6.0;
        src[1] = -0.5;
        src[2] = 0.25;
        src[3] = -1.5;
        src[20] = 5.1; // nearest is 6 (12 * 0.5)
        let mut bytes = [0u8; 17];
        MXFP4::quantize_block(&src, &mut bytes);
        assert_eq!(bytes[0], 127);
        let mut out = [0.0; 32];
        MXFP4::dequantize_block(&bytes, &mut out);
        assert_eq!((out[0], out[1], out[2], out[3], out[20]), (6.0, -0.5, 0.0, -1.5, 6.0));
        assert_eq!(bytes[3] & 0x0f, 0, "the tie at 0.25 takes code 0");

        let mut zero = [0xffu8; 17];
        MXFP4::quantize_block(&[0.0; 32], &mut zero);
        assert_eq!(zero, [0; 17], "an all-zero block has e = 0 and code 0");
    }

    #[test]
    fn the_quantizer_round_trips_within_half_a_step() {
        let mut seed = 0x1357_9bdfu32;
        for _ in 0..64 {
            let src: [f32; 32] = std::array::from_fn(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 17;
                seed ^= seed << 5;
                (seed as f32 / u32::MAX as f32 - 0.5) * 7.0
            });
            let mut bytes = [0u8; 17];
            MXFP4::quantize_block(&src, &mut bytes);
            let mut out = [0.0; 32];
            MXFP4::dequantize_block(&bytes, &mut out);
            let d = e8m0_half(bytes[0]);
            let amax = src.iter().fold(0.0f32, |a, x| a.max(x.abs()));
            for (&x, &y) in src.iter().zip(&out) {
                // The grid's widest gap is 4 d (between 8 d and 12 d), and
                // values past 12 d (amax up to 16 d) clamp to it.
                let bound = if x.abs() > 12.0 * d { x.abs() - 12.0 * d } else { 2.0 * d };
                assert!((x - y).abs() <= bound, "{x} decoded as {y} (d {d}, amax {amax})");
            }
            // Quantizing the decoded values again gives the same bytes.
            let mut again = [0u8; 17];
            MXFP4::quantize_block(&out, &mut again);
            let mut out_again = [0.0; 32];
            MXFP4::dequantize_block(&again, &mut out_again);
            assert_eq!(out, out_again);
        }
    }
}
