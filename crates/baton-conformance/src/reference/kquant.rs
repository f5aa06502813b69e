//! The K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K) for the op references: a decoder
//! written element by element from the GGUF byte layout, and a plain encoder
//! that makes valid (not optimal) super-blocks. Independent of the kernels.

use baton_core::DType;
use half::f16;

/// Values per super-block.
const SUPER: usize = 256;

fn f16_at(bytes: &[u8], at: usize) -> f64 {
    f64::from(f16::from_le_bytes([bytes[at], bytes[at + 1]]).to_f32())
}

/// Scale and min of sub-block `s` (0..8) from Q4_K/Q5_K's 12 packed bytes.
fn scale_min(packed: &[u8], s: usize) -> (f64, f64) {
    let (scale, min) = if s < 4 {
        (packed[s] & 63, packed[s + 4] & 63)
    } else {
        ((packed[s + 4] & 15) | ((packed[s - 4] >> 6) << 4), (packed[s + 4] >> 4) | ((packed[s] >> 6) << 4))
    };
    (f64::from(scale), f64::from(min))
}

/// Decodes `elems` values (whole super-blocks) of a K-quant.
pub fn decode(dtype: DType, bytes: &[u8], elems: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(elems);
    for block in bytes.chunks_exact(dtype.block_bytes()).take(elems / SUPER) {
        for e in 0..SUPER {
            let l = e % 32;
            out.push(match dtype {
                DType::Q4_K | DType::Q5_K => {
                    let s = e / 32;
                    let qs = if dtype == DType::Q4_K { 16 } else { 48 };
                    let mut q = (block[qs + 32 * (s / 2) + l] >> (4 * (s % 2))) & 15;
                    if dtype == DType::Q5_K {
                        q |= ((block[16 + l] >> s) & 1) << 4;
                    }
                    let (scale, min) = scale_min(&block[4..16], s);
                    f16_at(block, 0) * scale * f64::from(q) - f16_at(block, 2) * min
                }
                DType::Q2_K => {
                    let (h, r, g) = (e / 128, (e % 128) / 32, e / 16);
                    let q = (block[16 + 32 * h + l] >> (2 * r)) & 3;
                    let (scale, min) = (block[g] & 15, block[g] >> 4);
                    f16_at(block, 80) * f64::from(scale) * f64::from(q) - f16_at(block, 82) * f64::from(min)
                }
                DType::Q3_K => {
                    let (h, r, g) = (e / 128, (e % 128) / 32, e / 16);
                    let low = (block[32 + 32 * h + l] >> (2 * r)) & 3;
                    let high = (block[l] >> (e / 32)) & 1;
                    let q = i32::from(low | (high << 2)) - 4;
                    let scale_low = (block[96 + g % 8] >> (4 * (g / 8))) & 15;
                    let scale_top = (block[104 + g % 4] >> (2 * (g / 4))) & 3;
                    let scale = i32::from(scale_low | (scale_top << 4)) - 32;
                    f16_at(block, 108) * f64::from(scale) * f64::from(q)
                }
                DType::Q6_K => {
                    let (n, r) = (e / 128, (e % 128) / 32);
                    let low = (block[64 * n + 32 * (r % 2) + l] >> (4 * (r / 2))) & 15;
                    let high = (block[128 + 32 * n + l] >> (2 * r)) & 3;
                    let q = i32::from(low | (high << 4)) - 32;
                    f16_at(block, 208) * f64::from(block[192 + e / 16] as i8) * f64::from(q)
                }
                DType::Q8_K => {
                    let d = f32::from_le_bytes([block[0], block[1], block[2], block[3]]);
                    f64::from(d) * f64::from(block[4 + e] as i8)
                }
                _ => panic!("kquant::decode: {dtype} is not a K-quant"),
            });
        }
    }
    out
}

fn round_to(v: f32, lo: i32, hi: i32) -> i32 {
    (v.round() as i32).clamp(lo, hi)
}

/// Encodes values (whole super-blocks) as a K-quant: each sub-block's scale
/// from its range, the scales quantized against their maximum.
pub fn encode(dtype: DType, values: &[f32]) -> Vec<u8> {
    let mut out = Vec::new();
    for x in values.chunks_exact(SUPER) {
        let mut block = vec![0u8; dtype.block_bytes()];
        match dtype {
            DType::Q4_K | DType::Q5_K => encode_q4k_like(dtype, x, &mut block),
            DType::Q2_K => encode_q2k(x, &mut block),
            DType::Q3_K => encode_q3k(x, &mut block),
            DType::Q6_K => encode_q6k(x, &mut block),
            DType::Q8_K => {
                let amax = x.iter().fold(0f32, |a, v| a.max(v.abs()));
                let d = amax / 127.0;
                block[..4].copy_from_slice(&d.to_le_bytes());
                for (g, group) in x.chunks(16).enumerate() {
                    let mut sum = 0i16;
                    for (i, &v) in group.iter().enumerate() {
                        let q = if d > 0.0 { round_to(v / d, -127, 127) } else { 0 };
                        block[4 + 16 * g + i] = q as i8 as u8;
                        sum += q as i16;
                    }
                    block[260 + 2 * g..262 + 2 * g].copy_from_slice(&sum.to_le_bytes());
                }
            }
            _ => panic!("kquant::encode: {dtype} is not a K-quant"),
        }
        out.extend(block);
    }
    out
}

fn encode_q4k_like(dtype: DType, x: &[f32], block: &mut [u8]) {
    let levels = if dtype == DType::Q4_K { 15 } else { 31 };
    let mut scales = [0f32; 8];
    let mut mins = [0f32; 8];
    for (s, sub) in x.chunks(32).enumerate() {
        let lo = sub.iter().fold(0f32, |a, &v| a.min(v));
        let hi = sub.iter().fold(f32::MIN, |a, &v| a.max(v));
        scales[s] = (hi - lo) / levels as f32;
        mins[s] = -lo;
    }
    let d = f16::from_f32(scales.iter().fold(0f32, |a, &v| a.max(v)) / 63.0);
    let dmin = f16::from_f32(mins.iter().fold(0f32, |a, &v| a.max(v)) / 63.0);
    let six_bits = |v: f32, step: f32| if step > 0.0 { round_to(v / step, 0, 63) as u8 } else { 0 };
    let ls: Vec<u8> = scales.iter().map(|&v| six_bits(v, d.to_f32())).collect();
    let lm: Vec<u8> = mins.iter().map(|&v| six_bits(v, dmin.to_f32())).collect();
    block[..2].copy_from_slice(&d.to_le_bytes());
    block[2..4].copy_from_slice(&dmin.to_le_bytes());
    for j in 0..4 {
        block[4 + j] = ls[j] | ((ls[j + 4] >> 4) << 6);
        block[8 + j] = lm[j] | ((lm[j + 4] >> 4) << 6);
        block[12 + j] = (ls[j + 4] & 15) | ((lm[j + 4] & 15) << 4);
    }
    let qs = if dtype == DType::Q4_K { 16 } else { 48 };
    for (e, &v) in x.iter().enumerate() {
        let (s, l) = (e / 32, e % 32);
        let scale = d.to_f32() * f32::from(ls[s]);
        let min = dmin.to_f32() * f32::from(lm[s]);
        let q = if scale > 0.0 { round_to((v + min) / scale, 0, levels) as u8 } else { 0 };
        block[qs + 32 * (s / 2) + l] |= (q & 15) << (4 * (s % 2));
        if dtype == DType::Q5_K {
            block[16 + l] |= (q >> 4) << s;
        }
    }
}

fn encode_q6k(x: &[f32], block: &mut [u8]) {
    let scales: Vec<f32> = x.chunks(16).map(|g| g.iter().fold(0f32, |a, v| a.max(v.abs())) / 31.0).collect();
    let d = f16::from_f32(scales.iter().fold(0f32, |a, &v| a.max(v)) / 127.0);
    for (g, &s) in scales.iter().enumerate() {
        block[192 + g] = if d.to_f32() > 0.0 { round_to(s / d.to_f32(), 0, 127) as u8 } else { 0 };
    }
    block[208..210].copy_from_slice(&d.to_le_bytes());
    for (e, &v) in x.iter().enumerate() {
        let scale = d.to_f32() * f32::from(block[192 + e / 16] as i8);
        let q = (if scale > 0.0 { round_to(v / scale, -32, 31) } else { 0 } + 32) as u8;
        let (n, r, l) = (e / 128, (e % 128) / 32, e % 32);
        block[64 * n + 32 * (r % 2) + l] |= (q & 15) << (4 * (r / 2));
        block[128 + 32 * n + l] |= (q >> 4) << (2 * r);
    }
}

/// Q2_K: each group of 16 spans `0..=3` steps above its minimum; 4-bit
/// scales and mins against their maxima.
fn encode_q2k(x: &[f32], block: &mut [u8]) {
    let mut scales = [0f32; 16];
    let mut mins = [0f32; 16];
    for (g, group) in x.chunks(16).enumerate() {
        let lo = group.iter().fold(0f32, |a, &v| a.min(v));
        let hi = group.iter().fold(f32::MIN, |a, &v| a.max(v));
        scales[g] = (hi - lo) / 3.0;
        mins[g] = -lo;
    }
    let d = f16::from_f32(scales.iter().fold(0f32, |a, &v| a.max(v)) / 15.0);
    let dmin = f16::from_f32(mins.iter().fold(0f32, |a, &v| a.max(v)) / 15.0);
    let four_bits = |v: f32, step: f32| if step > 0.0 { round_to(v / step, 0, 15) as u8 } else { 0 };
    for g in 0..16 {
        block[g] = four_bits(scales[g], d.to_f32()) | (four_bits(mins[g], dmin.to_f32()) << 4);
    }
    block[80..82].copy_from_slice(&d.to_le_bytes());
    block[82..84].copy_from_slice(&dmin.to_le_bytes());
    for (e, &v) in x.iter().enumerate() {
        let g = e / 16;
        let scale = d.to_f32() * f32::from(block[g] & 15);
        let min = dmin.to_f32() * f32::from(block[g] >> 4);
        let q = if scale > 0.0 { round_to((v + min) / scale, 0, 3) as u8 } else { 0 };
        block[16 + 32 * (e / 128) + e % 32] |= q << (2 * ((e % 128) / 32));
    }
}

/// Q3_K: each group of 16 as `scale * (q - 4)` with a positive scale (the
/// format's scales are signed; these use half the range); 6-bit scales
/// stored plus 32.
fn encode_q3k(x: &[f32], block: &mut [u8]) {
    let scales: Vec<f32> = x.chunks(16).map(|g| g.iter().fold(0f32, |a, v| a.max(v.abs())) / 4.0).collect();
    let d = f16::from_f32(scales.iter().fold(0f32, |a, &v| a.max(v)) / 31.0);
    let levels: Vec<u8> =
        scales.iter().map(|&s| if d.to_f32() > 0.0 { round_to(s / d.to_f32(), 0, 31) as u8 } else { 0 }).collect();
    for (g, &level) in levels.iter().enumerate() {
        let stored = level + 32;
        block[96 + g % 8] |= (stored & 15) << (4 * (g / 8));
        block[104 + g % 4] |= (stored >> 4) << (2 * (g / 4));
    }
    block[108..110].copy_from_slice(&d.to_le_bytes());
    for (e, &v) in x.iter().enumerate() {
        let scale = d.to_f32() * f32::from(levels[e / 16]);
        let q = (if scale > 0.0 { round_to(v / scale, -4, 3) } else { 0 } + 4) as u8;
        block[32 + 32 * (e / 128) + e % 32] |= (q & 3) << (2 * ((e % 128) / 32));
        block[e % 32] |= (q >> 2) << (e / 32);
    }
}
