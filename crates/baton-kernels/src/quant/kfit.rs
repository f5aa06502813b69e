//! The reference quantizers of the K-quants: a least-squares fit of each
//! sub-block's scale (and minimum), then the sub-block scales quantized
//! against one super-block scale, as GGML's reference quantizers do.
//!
//! A sub-block is fitted by trying a few candidate step sizes around the
//! naive `range / levels`, rounding the values with each, and solving the
//! weighted least-squares problem for the scale (and offset) that best maps
//! those integers back onto the values; the candidate with the smallest
//! weighted error wins. The weights `rms + |x|` favour the large values,
//! which dominate a dot product, at almost no cost in RMSE
//! (docs/measurements.md).
//!
//! Not byte-identical with GGML's quantizers (the search grid differs), but
//! the same format and the same kind of fit; the round-trip RMSE is in the
//! kernels' tests.

use half::f16;

use super::super_block::{GROUPS, GROUP_ELEMS, SUPER_ELEMS};

/// `v` rounded to the nearest integer (ties to even), for the small values
/// a fit produces; larger ones saturate at ±2^22 before every caller's clamp.
/// (`f32::round` is a library call on baseline x86_64 and dominated the
/// quantizers' time.)
fn nearest(v: f32) -> i32 {
    crate::ops::round_small(v.clamp(-4_194_304.0, 4_194_304.0)) as i32
}

/// Per-value weights of the fits: `rms + |x|` over the super-block.
fn fit_weights(x: &[f32; SUPER_ELEMS]) -> [f32; SUPER_ELEMS] {
    let rms = (x.iter().map(|v| v * v).sum::<f32>() / SUPER_ELEMS as f32).sqrt();
    x.map(|v| rms + v.abs())
}

/// Fits `x ≈ scale * q - min` with `q` in `0..=levels`, `scale >= 0` and
/// `min >= 0` (the format stores both unsigned, so 0 must be representable
/// whenever values are positive); returns `(scale, min)`.
fn fit_scale_min(x: &[f32], w: &[f32], levels: i32) -> (f32, f32) {
    let lo = x.iter().fold(0.0f32, |a, &v| a.min(v));
    let hi = x.iter().fold(f32::MIN, |a, &v| a.max(v));
    if hi <= lo {
        return (0.0, -lo);
    }
    let (mut best, mut best_err) = (((hi - lo) / levels as f32, -lo), f64::INFINITY);
    let (mut sw, mut sx, mut sxx) = (0.0f32, 0.0f32, 0.0f32);
    for (&v, &wt) in x.iter().zip(w) {
        sw += wt;
        sx += wt * v;
        sxx += wt * v * v;
    }
    for step in -10..=10 {
        let inverse = (levels as f32 + 0.1 * step as f32) / (hi - lo);
        let (mut sl, mut sll, mut slx) = (0.0f32, 0.0f32, 0.0f32);
        for (&v, &wt) in x.iter().zip(w) {
            let l = nearest(inverse * (v - lo)).clamp(0, levels) as f32;
            sl += wt * l;
            sll += wt * l * l;
            slx += wt * l * v;
        }
        let det = sw * sll - sl * sl;
        if det <= 0.0 {
            continue;
        }
        let (mut scale, mut offset) = ((sw * slx - sl * sx) / det, (sll * sx - sl * slx) / det);
        if offset > 0.0 {
            // The offset is `-min`, stored unsigned: it cannot be positive.
            offset = 0.0;
            scale = slx / sll;
        }
        if scale <= 0.0 {
            continue;
        }
        // Σ w (scale l + offset - x)² for these levels, from the sums; the
        // encoder re-rounds against the final scale, which can only do better.
        let (s, b) = (f64::from(scale), f64::from(offset));
        let err = f64::from(sxx) - 2.0 * s * f64::from(slx) - 2.0 * b * f64::from(sx)
            + s * s * f64::from(sll)
            + 2.0 * s * b * f64::from(sl)
            + b * b * f64::from(sw);
        if err < best_err {
            (best, best_err) = ((scale, -offset), err);
        }
    }
    best
}

/// Fits `x ≈ scale * q` with `q` in `-half..half` (32 for Q6_K, 4 for
/// Q3_K) and a signed `scale`; the value of largest magnitude maps near
/// `-half`, the level with no positive twin.
fn fit_signed_scale(x: &[f32], w: &[f32], half: i32) -> f32 {
    let max = x.iter().fold(0.0f32, |a, &v| if v.abs() > a.abs() { v } else { a });
    if max == 0.0 {
        return 0.0;
    }
    let (mut best, mut best_score) = (max / -(half as f32), 0.0f32);
    for step in -9..=9 {
        let inverse = -(half as f32 + 0.1 * step as f32) / max;
        let (mut slx, mut sll) = (0.0f32, 0.0f32);
        for (&v, &wt) in x.iter().zip(w) {
            let l = nearest(inverse * v).clamp(-half, half - 1) as f32;
            slx += wt * l * v;
            sll += wt * l * l;
        }
        // The least-squares error is Σ w x² - slx² / sll: maximise the second term.
        if sll > 0.0 && slx * slx / sll > best_score {
            (best, best_score) = (slx / sll, slx * slx / sll);
        }
    }
    best
}

/// The f16 super-scale for sub-block values up to `max` in integers up to
/// `top` (63 for 6 bits, 15 for 4): `max / top`, returned as bits and as the
/// value decoders see.
fn super_scale(max: f32, top: u8) -> (u16, f32) {
    let d = f16::from_f32(max / f32::from(top));
    (d.to_bits(), d.to_f32())
}

/// The integer of `v` in a sub-block with this decoded scale (given as its
/// inverse, 0 for a zero scale) and minimum.
fn level(v: f32, inverse: f32, min: f32, levels: i32) -> i32 {
    nearest((v + min) * inverse).clamp(0, levels)
}

fn inverse_or_zero(scale: f32) -> f32 {
    if scale > 0.0 {
        1.0 / scale
    } else {
        0.0
    }
}

/// Weighted squared error of a sub-block encoded with this scale and minimum.
fn sub_block_error(x: &[f32], w: &[f32], scale: f32, min: f32, levels: i32) -> f32 {
    let inverse = inverse_or_zero(scale);
    x.iter().zip(w).map(|(&v, &wt)| wt * (scale * level(v, inverse, min, levels) as f32 - min - v).powi(2)).sum()
}

/// Quantized scales of a format's sub-blocks: integers up to `top` (63
/// for Q4_K's 6 bits, 15 for Q2_K's 4) against the super-scales `d` and `dmin`.
#[derive(Clone, Copy)]
struct ScaleGrid {
    d: f32,
    dmin: f32,
    top: u8,
}

/// The integer scale and minimum of a sub-block against `scales`: each
/// rounded down or up, whichever pair encodes the values best (rounding
/// alone can shrink a sub-block's range by a third when its scale is small
/// next to the largest one).
fn quantize_sub_block(x: &[f32], w: &[f32], fitted: (f32, f32), scales: ScaleGrid, levels: i32) -> (u8, u8) {
    let ScaleGrid { d, dmin, top } = scales;
    let candidates = |v: f32, step: f32| {
        let r = if step > 0.0 { v / step } else { 0.0 };
        let top = f32::from(top);
        [r.floor().clamp(0.0, top) as u8, r.ceil().clamp(0.0, top) as u8]
    };
    let mut best = (0, 0, f32::INFINITY);
    for ls in candidates(fitted.0, d) {
        for lm in candidates(fitted.1, dmin) {
            let err = sub_block_error(x, w, d * f32::from(ls), dmin * f32::from(lm), levels);
            if err < best.2 {
                best = (ls, lm, err);
            }
        }
    }
    (best.0, best.1)
}

/// Packs eight 6-bit scales and mins into Q4_K's 12 bytes (the inverse of
/// `kquant::unpack_scales_mins`).
pub(crate) fn pack_scales_mins(scales: &[u8; 8], mins: &[u8; 8], out: &mut [u8]) {
    for j in 0..4 {
        out[j] = scales[j] | ((scales[j + 4] >> 4) << 6);
        out[j + 4] = mins[j] | ((mins[j + 4] >> 4) << 6);
        out[j + 8] = (scales[j + 4] & 0x0f) | ((mins[j + 4] & 0x0f) << 4);
    }
}

/// Q4_K (`levels` 15) or Q5_K (`levels` 31): 8 sub-blocks of 32.
pub(crate) fn encode_q4k_like(x: &[f32; SUPER_ELEMS], levels: i32, dst: &mut [u8]) {
    let w = fit_weights(x);
    let (mut scales, mut mins) = ([0.0f32; 8], [0.0f32; 8]);
    for s in 0..8 {
        (scales[s], mins[s]) = fit_scale_min(&x[32 * s..][..32], &w[32 * s..][..32], levels);
    }
    let (d_bits, d) = super_scale(scales.iter().fold(0.0f32, |a, &v| a.max(v)), 63);
    let (dmin_bits, dmin) = super_scale(mins.iter().fold(0.0f32, |a, &v| a.max(v)), 63);
    let (mut ls, mut lm) = ([0u8; 8], [0u8; 8]);
    for s in 0..8 {
        let range = 32 * s..32 * (s + 1);
        let fitted = (scales[s], mins[s]);
        (ls[s], lm[s]) =
            quantize_sub_block(&x[range.clone()], &w[range], fitted, ScaleGrid { d, dmin, top: 63 }, levels);
    }
    dst[0..2].copy_from_slice(&d_bits.to_le_bytes());
    dst[2..4].copy_from_slice(&dmin_bits.to_le_bytes());
    pack_scales_mins(&ls, &lm, &mut dst[4..16]);
    // The integers, against the scales as the decoder will see them.
    let mut q = [0u8; SUPER_ELEMS];
    for s in 0..8 {
        let (inverse, min) = (inverse_or_zero(d * f32::from(ls[s])), dmin * f32::from(lm[s]));
        for (q, &v) in q[32 * s..][..32].iter_mut().zip(&x[32 * s..]) {
            *q = level(v, inverse, min, levels) as u8;
        }
    }
    let (high, low) = if levels == 31 { dst[16..176].split_at_mut(32) } else { dst[16..144].split_at_mut(0) };
    high.fill(0);
    for (c, values) in q.chunks_exact(32).enumerate() {
        for (l, &v) in values.iter().enumerate() {
            let byte = &mut low[32 * (c / 2) + l];
            if c % 2 == 0 {
                *byte = v & 0x0f;
            } else {
                *byte |= (v & 0x0f) << 4;
            }
            if levels == 31 {
                high[l] |= (v >> 4) << c;
            }
        }
    }
}

/// The integer of `v` in `-half..half` for a scale given as its inverse (0
/// for a zero scale).
fn signed_level(v: f32, inverse: f32, half: i32) -> i32 {
    nearest(v * inverse).clamp(-half, half - 1)
}

fn signed_inverse(scale: f32) -> f32 {
    if scale != 0.0 {
        1.0 / scale
    } else {
        0.0
    }
}

/// Weighted squared error of a group encoded with this scale, integers in
/// `-half..half`.
fn signed_error(x: &[f32], w: &[f32], scale: f32, half: i32) -> f32 {
    let inverse = signed_inverse(scale);
    x.iter().zip(w).map(|(&v, &wt)| wt * (scale * signed_level(v, inverse, half) as f32 - v).powi(2)).sum()
}

/// The signed scales of 16 groups of 16 whose integers lie in
/// `-half..half`, quantized to integers in `-scale_half..scale_half`
/// against one f16 `d` (the scale of largest magnitude maps to
/// `-scale_half`, which has no positive twin); returns `d` and the integer
/// scales.
fn signed_group_scales(x: &[f32; SUPER_ELEMS], half: i32, scale_half: i32) -> (f16, [i8; GROUPS]) {
    let w = fit_weights(x);
    let scales: [f32; GROUPS] =
        std::array::from_fn(|g| fit_signed_scale(&x[GROUP_ELEMS * g..][..GROUP_ELEMS], &w[GROUP_ELEMS * g..], half));
    let max = scales.iter().fold(0.0f32, |a, &v| if v.abs() > a.abs() { v } else { a });
    let inverse = if max != 0.0 { -(scale_half as f32) / max } else { 0.0 };
    let d = f16::from_f32(if max != 0.0 { 1.0 / inverse } else { 0.0 });
    let decoded_d = d.to_f32();
    let (lowest, highest) = (-scale_half as f32, (scale_half - 1) as f32);
    let ls: [i8; GROUPS] = std::array::from_fn(|g| {
        // Rounded down or up, whichever encodes the group best.
        let range = GROUP_ELEMS * g..GROUP_ELEMS * (g + 1);
        let r = if decoded_d != 0.0 { scales[g] / decoded_d } else { 0.0 };
        let error = |l: f32| signed_error(&x[range.clone()], &w[range.clone()], decoded_d * l, half);
        let (low, high) = (r.floor().clamp(lowest, highest), r.ceil().clamp(lowest, highest));
        (if error(high) < error(low) { high } else { low }) as i8
    });
    (d, ls)
}

/// The integers of `x` in `0..2 half`: each value against its group's
/// decoded scale `d * ls[g]`, plus `half`.
fn centred_levels(x: &[f32; SUPER_ELEMS], d: f16, ls: &[i8; GROUPS], half: i32) -> [u8; SUPER_ELEMS] {
    let inverses: [f32; GROUPS] = ls.map(|l| signed_inverse(d.to_f32() * f32::from(l)));
    std::array::from_fn(|e| (signed_level(x[e], inverses[e / GROUP_ELEMS], half) + half) as u8)
}

/// Q6_K: 16 sub-blocks of 16, signed scales quantized to `i8` against `d`.
pub(crate) fn encode_q6k(x: &[f32; SUPER_ELEMS], dst: &mut [u8]) {
    let (d, ls) = signed_group_scales(x, 32, 128);
    let (ql, rest) = dst.split_at_mut(128);
    let (qh, rest) = rest.split_at_mut(64);
    ql.fill(0);
    qh.fill(0);
    for (g, &l) in ls.iter().enumerate() {
        rest[g] = l as u8;
    }
    rest[16..18].copy_from_slice(&d.to_bits().to_le_bytes());
    for (e, &q) in centred_levels(x, d, &ls, 32).iter().enumerate() {
        let (c, l) = (e / 32, e % 32);
        let (n, r) = (c / 4, c % 4);
        ql[64 * n + 32 * (r % 2) + l] |= (q & 0x0f) << (4 * (r / 2));
        qh[32 * n + l] |= (q >> 4) << (2 * r);
    }
}

/// Q8_K: `d = amax / 127`, `q = round(x / d)`, and the sums of 16.
pub(crate) fn encode_q8k(x: &[f32; SUPER_ELEMS], dst: &mut [u8]) {
    let amax = x.iter().fold(0.0f32, |a, v| a.max(v.abs()));
    let d = amax / 127.0;
    let inverse = if amax > 0.0 { 127.0 / amax } else { 0.0 };
    dst[0..4].copy_from_slice(&d.to_le_bytes());
    let q: [i8; SUPER_ELEMS] = x.map(|v| nearest(v * inverse).clamp(-127, 127) as i8);
    for (b, &v) in dst[4..260].iter_mut().zip(&q) {
        *b = v as u8;
    }
    for (g, sum) in dst[260..292].chunks_exact_mut(2).enumerate() {
        let s: i16 = q[GROUP_ELEMS * g..][..GROUP_ELEMS].iter().map(|&v| i16::from(v)).sum();
        sum.copy_from_slice(&s.to_le_bytes());
    }
}

/// Packs 2-bit integers (`0..4`, element order) into `qs` as Q2_K and Q3_K
/// store them: element `32r + l` of half `h` in bits `2r..2r+2` of
/// `qs[32h + l]`.
fn pack_two_bits(q: &[u8; SUPER_ELEMS], qs: &mut [u8]) {
    qs[..64].fill(0);
    for (e, &v) in q.iter().enumerate() {
        let (c, l) = (e / 32, e % 32);
        qs[32 * (c / 4) + l] |= (v & 3) << (2 * (c % 4));
    }
}

/// Q2_K: 16 sub-blocks of 16, `x ≈ d sc q - dmin m` with `q` in `0..=3` and
/// 4-bit `sc` and `m`.
pub(crate) fn encode_q2k(x: &[f32; SUPER_ELEMS], dst: &mut [u8]) {
    let w = fit_weights(x);
    let (mut scales, mut mins) = ([0.0f32; GROUPS], [0.0f32; GROUPS]);
    for g in 0..GROUPS {
        let range = GROUP_ELEMS * g..GROUP_ELEMS * (g + 1);
        (scales[g], mins[g]) = fit_scale_min(&x[range.clone()], &w[range], 3);
    }
    let (d_bits, d) = super_scale(scales.iter().fold(0.0f32, |a, &v| a.max(v)), 15);
    let (dmin_bits, dmin) = super_scale(mins.iter().fold(0.0f32, |a, &v| a.max(v)), 15);
    let mut q = [0u8; SUPER_ELEMS];
    for g in 0..GROUPS {
        let range = GROUP_ELEMS * g..GROUP_ELEMS * (g + 1);
        let fitted = (scales[g], mins[g]);
        let (ls, lm) =
            quantize_sub_block(&x[range.clone()], &w[range.clone()], fitted, ScaleGrid { d, dmin, top: 15 }, 3);
        dst[g] = ls | (lm << 4);
        // The integers, against the scales as the decoder will see them.
        let (inverse, min) = (inverse_or_zero(d * f32::from(ls)), dmin * f32::from(lm));
        for (q, &v) in q[range.clone()].iter_mut().zip(&x[range]) {
            *q = level(v, inverse, min, 3) as u8;
        }
    }
    pack_two_bits(&q, &mut dst[16..80]);
    dst[80..82].copy_from_slice(&d_bits.to_le_bytes());
    dst[82..84].copy_from_slice(&dmin_bits.to_le_bytes());
}

/// Packs Q3_K's sixteen signed 6-bit scales (`-32..=31`) into its 12 bytes
/// (the inverse of `kquant_low_bits::unpack_q3k_scales`).
pub(crate) fn pack_q3k_scales(scales: &[i8; GROUPS], out: &mut [u8]) {
    out[..12].fill(0);
    for (s, &sc) in scales.iter().enumerate() {
        let biased = (sc + 32) as u8;
        out[s % 8] |= (biased & 0x0f) << (4 * (s / 8));
        out[8 + s % 4] |= (biased >> 4) << (2 * (s / 4));
    }
}

/// Q3_K: 16 sub-blocks of 16, `x ≈ d sc (q - 4)` with `q` in `0..8` and
/// signed 6-bit `sc`.
pub(crate) fn encode_q3k(x: &[f32; SUPER_ELEMS], dst: &mut [u8]) {
    let (d, ls) = signed_group_scales(x, 4, 32);
    let q = centred_levels(x, d, &ls, 4);
    let (high, rest) = dst.split_at_mut(32);
    high.fill(0);
    for (e, &v) in q.iter().enumerate() {
        high[e % 32] |= (v >> 2) << (e / 32);
    }
    pack_two_bits(&q, &mut rest[..64]);
    pack_q3k_scales(&ls, &mut rest[64..76]);
    rest[76..78].copy_from_slice(&d.to_bits().to_le_bytes());
}
