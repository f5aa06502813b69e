//! Plain f64 references for every op, written for clarity, not speed, and
//! independent of the backends' kernels (the block formats are decoded here
//! from their byte layout).

use baton_core::DType;
use half::{bf16, f16};

pub mod kquant;

fn f16_at(bytes: &[u8], at: usize) -> f64 {
    f64::from(f16::from_le_bytes([bytes[at], bytes[at + 1]]).to_f32())
}

/// Where a 4- or 5-bit block of 32 (Q4_0, Q4_1, Q5_0, Q5_1) keeps its
/// fields: an f16 scale at 0, an f16 minimum at 2 (`has_min`), the fifth
/// bits as a little-endian u32 at `qh`, the low nibbles at `qs` (element
/// `j < 16` low in byte `j`, `j >= 16` high in byte `j - 16`).
struct SmallBlock {
    has_min: bool,
    qh: Option<usize>,
    qs: usize,
    /// The largest integer: 15 or 31.
    max: u8,
}

impl SmallBlock {
    fn of(dtype: DType) -> SmallBlock {
        match dtype {
            DType::Q4_0 => SmallBlock { has_min: false, qh: None, qs: 2, max: 15 },
            DType::Q4_1 => SmallBlock { has_min: true, qh: None, qs: 4, max: 15 },
            DType::Q5_0 => SmallBlock { has_min: false, qh: Some(2), qs: 6, max: 31 },
            DType::Q5_1 => SmallBlock { has_min: true, qh: Some(4), qs: 8, max: 31 },
            _ => panic!("{dtype} is not a 4- or 5-bit block of 32"),
        }
    }

    /// The integer of a centred format's zero (8 or 16).
    fn centre(&self) -> f64 {
        f64::from(self.max / 2 + 1)
    }
}

/// MXFP4's E2M1 values, doubled, by 4-bit code (code 8 is negative zero,
/// which decodes as 0).
const MXFP4_VALUES: [f64; 16] =
    [0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 0.0, -1.0, -2.0, -3.0, -4.0, -6.0, -8.0, -12.0];

/// An MXFP4 block's scale: `2^(e - 128)` for its exponent byte `e`.
fn mxfp4_scale(e: u8) -> f64 {
    2f64.powi(i32::from(e) - 128)
}

/// Decodes one row of `dtype` into f64 values.
pub fn decode_row(dtype: DType, bytes: &[u8], elems: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(elems);
    match dtype {
        DType::F32 => out
            .extend(bytes.chunks_exact(4).take(elems).map(|b| f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])))),
        DType::F16 => out.extend((0..elems).map(|i| f16_at(bytes, 2 * i))),
        DType::BF16 => {
            out.extend((0..elems).map(|i| f64::from(bf16::from_le_bytes([bytes[2 * i], bytes[2 * i + 1]]).to_f32())))
        }
        DType::I32 => out
            .extend(bytes.chunks_exact(4).take(elems).map(|b| f64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])))),
        DType::Q8_0 => {
            for block in bytes.chunks_exact(34).take(elems / 32) {
                let d = f16_at(block, 0);
                out.extend(block[2..34].iter().map(|&q| d * f64::from(q as i8)));
            }
        }
        DType::Q2_K | DType::Q3_K | DType::Q4_K | DType::Q5_K | DType::Q6_K | DType::Q8_K => {
            out.extend(kquant::decode(dtype, bytes, elems))
        }
        DType::MXFP4 => {
            for block in bytes.chunks_exact(17).take(elems / 32) {
                let d = mxfp4_scale(block[0]);
                let code = |j: usize| (block[1 + j % 16] >> (4 * (j / 16))) & 15;
                out.extend((0..32).map(|j| d * MXFP4_VALUES[usize::from(code(j))]));
            }
        }
        DType::Q4_0 | DType::Q4_1 | DType::Q5_0 | DType::Q5_1 => {
            let layout = SmallBlock::of(dtype);
            for block in bytes.chunks_exact(dtype.block_bytes()).take(elems / 32) {
                let d = f16_at(block, 0);
                for j in 0..32 {
                    let mut q = (block[layout.qs + j % 16] >> (4 * (j / 16))) & 15;
                    if let Some(qh) = layout.qh {
                        q |= ((block[qh + j / 8] >> (j % 8)) & 1) << 4;
                    }
                    let q = f64::from(q);
                    out.push(if layout.has_min { d * q + f16_at(block, 2) } else { d * (q - layout.centre()) });
                }
            }
        }
    }
    out
}

/// Encodes f32 values as a row of a plain float type (f32, f16, bf16).
pub fn encode_float_row(dtype: DType, values: &[f32]) -> Vec<u8> {
    match dtype {
        DType::F16 => values.iter().flat_map(|&v| f16::from_f32(v).to_le_bytes()).collect(),
        DType::BF16 => values.iter().flat_map(|&v| bf16::from_f32(v).to_le_bytes()).collect(),
        _ => values.iter().flat_map(|&v| v.to_le_bytes()).collect(),
    }
}

/// Quantizes f32 values to a block type with a simple, valid encoder (the
/// test needs valid blocks, not the best ones).
pub fn encode_blocks(dtype: DType, values: &[f32]) -> Vec<u8> {
    if dtype.is_k_quant() {
        return kquant::encode(dtype, values);
    }
    let mut out = Vec::new();
    for block in values.chunks_exact(32) {
        let (min, max) = block.iter().fold((f32::MAX, f32::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
        match dtype {
            DType::Q8_0 => {
                let d = block.iter().fold(0f32, |a, v| a.max(v.abs())) / 127.0;
                let d = f16::from_f32(d);
                out.extend(d.to_le_bytes());
                let inv = if d.to_f32() == 0.0 { 0.0 } else { 1.0 / d.to_f32() };
                out.extend(block.iter().map(|&v| (v * inv).round().clamp(-127.0, 127.0) as i8 as u8));
            }
            DType::Q4_0 | DType::Q4_1 | DType::Q5_0 | DType::Q5_1 => {
                let layout = SmallBlock::of(dtype);
                let (d, m) = if layout.has_min {
                    ((max - min) / f32::from(layout.max), min)
                } else {
                    let amax = block.iter().fold(0f32, |a, v| a.max(v.abs()));
                    (amax / (layout.centre() as f32 - 1.0), 0.0)
                };
                let (d16, m16) = (f16::from_f32(d), f16::from_f32(m));
                let mut bytes = vec![0u8; dtype.block_bytes()];
                bytes[..2].copy_from_slice(&d16.to_le_bytes());
                if layout.has_min {
                    bytes[2..4].copy_from_slice(&m16.to_le_bytes());
                }
                let (d, m) = (d16.to_f32(), m16.to_f32());
                let inv = if d == 0.0 { 0.0 } else { 1.0 / d };
                for (j, &v) in block.iter().enumerate() {
                    let q = if layout.has_min {
                        ((v - m) * inv).round()
                    } else {
                        (v * inv).round() + layout.centre() as f32
                    };
                    let q = q.clamp(0.0, f32::from(layout.max)) as u8;
                    bytes[layout.qs + j % 16] |= (q & 15) << (4 * (j / 16));
                    if let Some(qh) = layout.qh {
                        bytes[qh + j / 8] |= (q >> 4) << (j % 8);
                    }
                }
                out.extend(bytes);
            }
            DType::MXFP4 => {
                // The smallest power-of-two scale whose largest value (12 d)
                // covers the block's maximum, then the nearest code.
                let amax = f64::from(block.iter().fold(0f32, |a, v| a.max(v.abs())));
                let e = (0..=254u8).find(|&e| 12.0 * mxfp4_scale(e) >= amax).unwrap_or(254);
                let d = mxfp4_scale(e);
                let nearest = |v: f32| {
                    let error = |c: usize| (MXFP4_VALUES[c] * d - f64::from(v)).abs();
                    (0..16).min_by(|&a, &b| error(a).total_cmp(&error(b))).unwrap_or(0) as u8
                };
                out.push(e);
                out.extend((0..16).map(|j| nearest(block[j]) | (nearest(block[j + 16]) << 4)));
            }
            _ => panic!("encode_blocks: {dtype} is not a block type"),
        }
    }
    out
}

/// `y[m][n] = Σ_k x[m][k] w[n][k]`.
pub fn matmul(x: &[f64], w: &[f64], m: usize, n: usize, k: usize) -> Vec<f64> {
    let mut y = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            y[i * n + j] = (0..k).map(|p| x[i * k + p] * w[j * k + p]).sum();
        }
    }
    y
}

/// `x` (rows of `k`) as a matmul with `dtype` weights sees it: for
/// block-quantized types rounded to 8 bits per weight block in f32, as
/// `Op::MatMul` states; other types unchanged.
pub fn matmul_activations(dtype: DType, x: &[f32], k: usize) -> Vec<f64> {
    if !dtype.is_quantized() {
        return x.iter().map(|&v| f64::from(v)).collect();
    }
    let block = if dtype.is_k_quant() { 256 } else { 32 };
    assert_eq!(k % block, 0, "rows of {k} are not whole blocks of {block}");
    x.chunks_exact(block)
        .flat_map(|values| {
            let amax = values.iter().fold(0.0f32, |a, v| a.max(v.abs()));
            let d = amax / 127.0;
            let id = if d != 0.0 { 1.0 / d } else { 0.0 };
            values.iter().map(move |&v| f64::from(d) * f64::from((v * id).round_ties_even()))
        })
        .collect()
}

/// RMS norm of each row of `cols`.
pub fn rms_norm(x: &[f64], cols: usize, eps: f64) -> Vec<f64> {
    x.chunks(cols)
        .flat_map(|row| {
            let scale = 1.0 / (row.iter().map(|v| v * v).sum::<f64>() / cols as f64 + eps).sqrt();
            row.iter().map(move |v| v * scale)
        })
        .collect()
}

/// Softmax of each row of `s` columns after scaling; causal rows mask keys
/// past `t + (s - t_len)`.
pub fn softmax(x: &[f64], t_len: usize, s: usize, scale: f64, causal: bool) -> Vec<f64> {
    x.chunks(s)
        .enumerate()
        .flat_map(|(r, row)| {
            let visible = if causal { (r % t_len + 1 + s - t_len).min(s) } else { s };
            let max = row[..visible].iter().map(|v| v * scale).fold(f64::MIN, f64::max);
            let exps: Vec<f64> = (0..s).map(|j| if j < visible { (row[j] * scale - max).exp() } else { 0.0 }).collect();
            let sum: f64 = exps.iter().sum();
            exps.into_iter().map(move |e| e / sum)
        })
        .collect()
}

/// The parameters of a RoPE reference.
#[derive(Clone, Copy)]
pub struct Rope {
    /// Heads per token.
    pub heads: usize,
    /// Elements per head.
    pub head_dim: usize,
    /// Elements that rotate.
    pub dims: usize,
    /// Frequency base.
    pub base: f64,
    /// Position scale.
    pub scale: f64,
    /// Half-split pairs instead of adjacent ones.
    pub neox: bool,
}

/// RoPE of `x [T, H, D]` at `positions`.
pub fn rope(x: &[f64], positions: &[i32], p: &Rope) -> Vec<f64> {
    let Rope { heads, head_dim, dims, base, scale, neox } = *p;
    let mut out = x.to_vec();
    for (t, &pos) in positions.iter().enumerate() {
        for h in 0..heads {
            let head = &mut out[(t * heads + h) * head_dim..][..head_dim];
            for i in 0..dims / 2 {
                let theta = f64::from(pos) * scale * base.powf(-2.0 * i as f64 / dims as f64);
                let (a_i, b_i) = if neox { (i, i + dims / 2) } else { (2 * i, 2 * i + 1) };
                let (a, b) = (head[a_i], head[b_i]);
                head[a_i] = a * theta.cos() - b * theta.sin();
                head[b_i] = a * theta.sin() + b * theta.cos();
            }
        }
    }
    out
}

/// `x * sigmoid(x)`.
pub fn silu(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
}

/// `0.5 x (1 + tanh(sqrt(2/π) (x + 0.044715 x³)))`.
pub fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
}

/// Normalised mean squared error: `Σ(a-b)² / Σb²` (a relative measure; 0
/// when both are zero).
pub fn nmse(actual: &[f32], expected: &[f64]) -> f64 {
    assert_eq!(actual.len(), expected.len(), "lengths differ");
    let err: f64 = actual.iter().zip(expected).map(|(&a, &b)| (f64::from(a) - b).powi(2)).sum();
    let norm: f64 = expected.iter().map(|b| b * b).sum();
    if norm == 0.0 {
        err
    } else {
        err / norm
    }
}
