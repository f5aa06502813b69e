//! Quantize/dequantize round trips, GGML byte layout, and the f16/bf16 row
//! conversions, on both instruction sets.

use baton_kernels::convert::{bf16_to_f32_row, f16_to_f32_row, f32_to_bf16_row, f32_to_f16_row};
use baton_kernels::with_isa;
use baton_kernels::{dequantize_row, quantize_row, DType, KernelError, WEIGHT_TYPES};
use half::{bf16, f16};
use proptest::prelude::*;

use crate::common::{for_each_isa, isas, nmse, Guarded, Rng};

/// Largest round-trip error allowed for one element of a block, from the
/// format's step size: half a step for rounding, plus the f16 rounding of the
/// stored scale (and minimum) times the largest integer; Q4_0 and Q5_0 lose
/// up to a whole step at the clamped end (`+max` maps to level 16, stored as
/// 15; Q5_0: 32 as 31). MXFP4's grid (`d = 2^(floor(log2 amax) - 3)`) has
/// its widest gap, 4 d, between 8 d and 12 d, and values above 12 d (up to
/// 16 d) clamp to 12 d.
fn element_bound(dtype: DType, block: &[f32]) -> f32 {
    let amax = block.iter().fold(0.0f32, |a, v| a.max(v.abs()));
    let (min, max) = block.iter().fold((f32::MAX, f32::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    let f16_rel = 1.0 / 1024.0;
    match dtype {
        DType::Q8_0 => amax / 127.0 * (0.5 + 127.0 * f16_rel) + 1e-6,
        DType::Q4_0 => amax / 8.0 * (1.0 + 16.0 * f16_rel) + 1e-6,
        DType::Q4_1 => (max - min) / 15.0 * (0.5 + 15.0 * f16_rel) + min.abs() * f16_rel + 1e-6,
        DType::Q5_0 => amax / 16.0 * (1.0 + 32.0 * f16_rel) + 1e-6,
        DType::Q5_1 => (max - min) / 31.0 * (0.5 + 31.0 * f16_rel) + min.abs() * f16_rel + 1e-6,
        DType::MXFP4 => {
            let d = (amax.log2().floor() - 3.0).exp2();
            (2.0 * d).max(amax - 12.0 * d) + 1e-30
        }
        DType::F16 => amax * f16_rel / 2.0 + 6e-8,
        DType::BF16 => amax / 256.0,
        DType::F32 => 0.0,
        _ => unreachable!("no element bound for {dtype}"),
    }
}

fn round_trip(dtype: DType, src: &[f32]) -> Vec<f32> {
    let mut bytes = vec![0u8; dtype.row_bytes(src.len()).unwrap()];
    quantize_row(dtype, src, &mut bytes).unwrap();
    let mut out = Guarded::new(src.len());
    dequantize_row(dtype, &bytes, out.inner()).unwrap();
    out.check_guards("dequantize_row");
    out.view().to_vec()
}

/// The weight types but the K-quants (tested in `kquant.rs`).
fn types() -> impl Iterator<Item = DType> {
    WEIGHT_TYPES.into_iter().filter(|t| !t.is_k_quant())
}

#[test]
fn round_trip_errors_are_within_the_format_step() {
    for_each_isa(|isa| {
        let mut rng = Rng::new(1);
        for dtype in types() {
            let src = rng.vec(32 * 40, 2.0);
            let out = round_trip(dtype, &src);
            for (b, (got, want)) in out.chunks(32).zip(src.chunks(32)).enumerate() {
                let bound = element_bound(dtype, want);
                for (g, w) in got.iter().zip(want) {
                    assert!((g - w).abs() <= bound, "{dtype} {isa:?} block {b}: {g} vs {w} (bound {bound})");
                }
            }
            let expected: Vec<f64> = src.iter().map(|&v| f64::from(v)).collect();
            println!("round-trip nmse {dtype:>5} {isa:?}: {:.3e}", nmse(&out, &expected));
        }
    });
}

#[test]
fn q8_0_bytes_match_ggml_reference_quantizer() {
    // Values 0..32: amax 31, d = 31/127, q_j = round(j * 127 / 31).
    let src: Vec<f32> = (0..32).map(|j| j as f32).collect();
    let mut bytes = [0u8; 34];
    quantize_row(DType::Q8_0, &src, &mut bytes).unwrap();
    assert_eq!(bytes[..2], f16::from_f32(31.0 / 127.0).to_bits().to_le_bytes());
    let id = 127.0f32 / 31.0;
    for j in 0..32 {
        assert_eq!(bytes[2 + j] as i8, (j as f32 * id).round() as i8, "element {j}");
    }
}

#[test]
fn centred_formats_use_the_signed_maximum() {
    // The largest magnitude is negative: d = max / -c > 0 (c = 8 for Q4_0,
    // 16 for Q5_0) and that value is level 0.
    for (dtype, centre, qs) in [(DType::Q4_0, 8u8, 2), (DType::Q5_0, 16, 6)] {
        let mut src = [0.5f32; 32];
        src[3] = -0.5 * f32::from(centre);
        src[20] = 3.0; // 0.5 * (c + 6 - c)
        let mut bytes = vec![0u8; dtype.block_bytes()];
        quantize_row(dtype, &src, &mut bytes).unwrap();
        assert_eq!(f16::from_le_bytes([bytes[0], bytes[1]]).to_f32(), 0.5, "{dtype}");
        assert_eq!(bytes[qs + 3] & 0x0f, 0, "{dtype}: the maximum is level 0");
        let level_20 = centre + 6;
        assert_eq!(bytes[qs + 4] >> 4, level_20 & 0x0f, "{dtype}: element 20 in the high nibble of byte 4");
        if dtype == DType::Q5_0 {
            let qh = u32::from_le_bytes([bytes[2], bytes[3], bytes[4], bytes[5]]);
            assert_eq!(qh, !(1 << 3), "every value but the maximum is at level 16 or above");
        }
    }
}

#[test]
fn q5_fifth_bits_follow_element_order() {
    // Element j's fifth bit is bit j of the little-endian u32 after the f16
    // fields; the low nibbles follow, ordered as in Q4_0 and Q4_1.
    let bits = (1u32 << 0) | (1 << 17) | (1 << 31);
    for (dtype, min) in [(DType::Q5_0, None), (DType::Q5_1, Some(-1.0f32))] {
        let mut block = vec![0u8; dtype.block_bytes()];
        block[..2].copy_from_slice(&f16::from_f32(0.5).to_bits().to_le_bytes());
        let mut qh = 2;
        if let Some(m) = min {
            block[2..4].copy_from_slice(&f16::from_f32(m).to_bits().to_le_bytes());
            qh = 4;
        }
        block[qh..qh + 4].copy_from_slice(&bits.to_le_bytes());
        let qs = qh + 4;
        block[qs] = 0x3a; // element 0: 10 (+ 16), element 16: 3
        block[qs + 1] = 0x50; // element 17: 5 (+ 16)
        block[qs + 15] = 0xf0; // element 31: 15 (+ 16)
        let mut out = [0.0f32; 32];
        dequantize_row(dtype, &block, &mut out).unwrap();
        let value = |q: i32| match min {
            None => 0.5 * (q - 16) as f32,
            Some(m) => 0.5 * q as f32 + m,
        };
        for (j, q) in [(0, 26), (1, 0), (16, 3), (17, 21), (30, 0), (31, 31)] {
            assert_eq!(out[j], value(q), "{dtype} element {j}");
        }
    }
}

#[test]
fn lengths_are_checked() {
    let mut bytes = [0u8; 34];
    assert!(matches!(quantize_row(DType::Q8_0, &[0.0; 31], &mut bytes), Err(KernelError::PartialBlock { .. })));
    assert!(matches!(
        quantize_row(DType::Q8_0, &[0.0; 32], &mut bytes[..33]),
        Err(KernelError::LengthMismatch { expected: 34, actual: 33, .. })
    ));
    let mut out = [0.0f32; 3];
    assert!(matches!(dequantize_row(DType::F16, &[0u8; 5], &mut out), Err(KernelError::LengthMismatch { .. })));
}

#[test]
fn half_conversions_match_half_crate_bit_for_bit() {
    let mut rng = Rng::new(2);
    let mut values: Vec<f32> = rng.vec(1000, 100.0);
    values.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1e-7,
        -3e-8,
        65504.0,
        70000.0,
        1.0 + 1.0 / 2048.0,
        1.0 + 3.0 / 2048.0,
        f32::from_bits(0x3f80_8000),
        f32::from_bits(0x3f81_8000),
        f32::MIN_POSITIVE / 3.0,
    ]);
    for_each_isa(|isa| {
        for len in [0, 1, 7, 8, 9, values.len()] {
            let src = &values[..len];
            let mut h = vec![f16::ZERO; len];
            f32_to_f16_row(src, &mut h);
            let mut b = vec![bf16::ZERO; len];
            f32_to_bf16_row(src, &mut b);
            for (i, &v) in src.iter().enumerate() {
                assert_eq!(h[i].to_bits(), f16::from_f32(v).to_bits(), "f16 of {v} ({isa:?})");
                assert_eq!(b[i].to_bits(), bf16::from_f32(v).to_bits(), "bf16 of {v} ({isa:?})");
            }
            let mut back = Guarded::new(len);
            f16_to_f32_row(&h, back.inner());
            back.check_guards("f16_to_f32_row");
            for (i, got) in back.view().iter().enumerate() {
                assert_eq!(got.to_bits(), h[i].to_f32().to_bits(), "widen f16 ({isa:?})");
            }
            bf16_to_f32_row(&b, back.inner());
            for (i, got) in back.view().iter().enumerate() {
                assert_eq!(got.to_bits(), b[i].to_f32().to_bits(), "widen bf16 ({isa:?})");
            }
        }
    });
}

proptest! {
    #[test]
    fn quantized_round_trip_stays_within_the_step(
        blocks in prop::collection::vec(prop::collection::vec(-1e4f32..1e4f32, 32), 1..4),
        // Up to 8e4: larger blocks overflow the f16 scale (inf), in GGML too.
        scale_exp in -20i32..3,
    ) {
        let scale = 2f32.powi(scale_exp);
        let src: Vec<f32> = blocks.concat().iter().map(|v| v * scale).collect();
        for dtype in types().filter(|t| t.is_quantized()) {
            for isa in isas() {
                let out = with_isa(isa, || round_trip(dtype, &src));
                for (got, want) in out.chunks(32).zip(src.chunks(32)) {
                    let bound = element_bound(dtype, want).max(1e-30);
                    for (g, w) in got.iter().zip(want) {
                        // f16 cannot hold scales below 2^-24: only require
                        // the bound where the scale is representable.
                        let representable = want.iter().any(|v| v.abs() > 1e-3);
                        prop_assert!(!representable || (g - w).abs() <= bound,
                            "{} {:?}: {} vs {} (bound {})", dtype, isa, g, w, bound);
                    }
                }
            }
        }
    }
}
