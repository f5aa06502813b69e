//! The values' kernel of a block (`values::accumulate`) and the scores read
//! in place (`direct_scores`) at every instruction level against their
//! portable forms, for every source of rows, head size, count of keys and
//! of rows. (The transposed scores' kernel is portable code compiled per
//! level: `tests.rs` checks rows at every level.)

use half::{bf16, f16};

use super::block::TILE_ROWS;
use super::direct_scores::{applies, scores_direct};
use super::scores::scores;
use super::source::{with_elements, BlockRows, F32Rows, HalfRows, Source};
use super::tests::noise;
use super::transpose::{transpose_rows, RowType};
use super::values::accumulate;
use super::BLOCK;
use crate::isa::Isa;
use crate::quant::{dequantize_row, quantize_row};
use baton_core::DType;

fn levels() -> Vec<Isa> {
    Isa::available()
}

/// `BLOCK` rows of `d` values in each form: f32, f16 and bf16 bytes, and
/// Q8_0 and Q4_0 blocks where `d` is whole blocks (each with its values
/// widened or decoded to f32).
struct Rows {
    f32s: Vec<f32>,
    f16_bytes: Vec<u8>,
    f16_wide: Vec<f32>,
    bf16_bytes: Vec<u8>,
    bf16_wide: Vec<f32>,
    /// Q8_0 and Q4_0 rows and their decoded values (whole blocks only).
    blocks: Vec<(&'static str, Vec<u8>, Vec<f32>)>,
}

impl Rows {
    fn new(d: usize, seed: u64) -> Rows {
        let f32s: Vec<f32> = (0..BLOCK * d).map(|i| noise(i, seed) * 3.0).collect();
        let f16s: Vec<f16> = f32s.iter().map(|&x| f16::from_f32(x)).collect();
        let bf16s: Vec<bf16> = f32s.iter().map(|&x| bf16::from_f32(x)).collect();
        let blocks = if d.is_multiple_of(32) {
            [("q8_0", DType::Q8_0), ("q4_0", DType::Q4_0)]
                .into_iter()
                .map(|(name, dtype)| {
                    let row = dtype.row_bytes(d).unwrap();
                    let mut bytes = vec![0u8; BLOCK * row];
                    let mut wide = vec![0.0f32; BLOCK * d];
                    for (j, (b, w)) in bytes.chunks_exact_mut(row).zip(wide.chunks_exact_mut(d)).enumerate() {
                        quantize_row(dtype, &f32s[j * d..(j + 1) * d], b).unwrap();
                        dequantize_row(dtype, b, w).unwrap();
                    }
                    (name, bytes, wide)
                })
                .collect()
        } else {
            Vec::new()
        };
        Rows {
            blocks,
            f16_bytes: f16s.iter().flat_map(|h| h.to_le_bytes()).collect(),
            f16_wide: f16s.iter().map(|h| h.to_f32()).collect(),
            bf16_bytes: bf16s.iter().flat_map(|h| h.to_le_bytes()).collect(),
            bf16_wide: bf16s.iter().map(|h| h.to_f32()).collect(),
            f32s,
        }
    }

    /// Each source with the f32 values it holds.
    fn sources(&self, d: usize) -> Vec<(&'static str, Source<'_>, &[f32])> {
        let mut sources = vec![
            ("f32", Source::F32(F32Rows::new(&self.f32s, d)), &self.f32s[..]),
            ("f16", Source::F16(HalfRows::new(&self.f16_bytes, d)), &self.f16_wide[..]),
            ("f16 decoded", Source::F32(F32Rows::new(&self.f16_wide, d)), &self.f16_wide[..]),
            ("bf16", Source::Bf16(HalfRows::new(&self.bf16_bytes, d)), &self.bf16_wide[..]),
        ];
        for (name, bytes, wide) in &self.blocks {
            let source = match *name {
                "q8_0" => Source::Q8_0(BlockRows::new(bytes, d)),
                _ => Source::Q4_0(BlockRows::new(bytes, d)),
            };
            sources.push((name, source, &wide[..]));
        }
        sources
    }
}

const HEAD_SIZES: [usize; 8] = [8, 16, 24, 40, 64, 80, 128, 256];
const KEY_COUNTS: [usize; 8] = [1, 3, 4, 15, 16, 17, 50, BLOCK];

/// [`accumulate`] for `R` rows of `source` at every level against the
/// portable bits, and those against the weighted sums in f64.
fn values_of<const R: usize>(name: &str, source: Source<'_>, wide: &[f32], d: usize, n: usize) {
    let probs: [[f32; BLOCK]; R] =
        std::array::from_fn(|r| std::array::from_fn(|j| (noise(j, 30 + r as u64) + 1.0) / 2.0));
    let corrections: [f32; R] = std::array::from_fn(|r| 0.25 + r as f32 / 8.0);
    let start: Vec<Vec<f32>> = (0..R).map(|r| (0..d).map(|i| noise(i, 40 + r as u64)).collect()).collect();
    let run = |level| {
        let mut outs = start.clone();
        let mut rows = outs.iter_mut();
        let mut refs: [&mut [f32]; R] = std::array::from_fn(|_| &mut rows.next().expect("R rows")[..]);
        with_elements!(source, rows => accumulate(level, &probs, n, rows, &corrections, &mut refs));
        outs
    };
    let want = run(Isa::Scalar);
    for r in 0..R {
        for i in 0..d {
            let exact = f64::from(start[r][i]) * f64::from(corrections[r])
                + (0..n).map(|j| f64::from(probs[r][j]) * f64::from(wide[j * d + i])).sum::<f64>();
            assert!((f64::from(want[r][i]) - exact).abs() <= 1e-4, "{name} d {d} n {n} row {r} element {i}");
        }
    }
    for level in levels() {
        assert_eq!(run(level), want, "{name} d {d} n {n} rows {R} at {level:?}");
    }
}

#[test]
fn values_give_the_portable_bits_at_every_level_and_the_weighted_sums() {
    for d in HEAD_SIZES {
        let values = Rows::new(d, 2);
        for (name, source, wide) in values.sources(d) {
            for n in KEY_COUNTS {
                values_of::<1>(name, source, wide, d, n);
                values_of::<2>(name, source, wide, d, n);
                values_of::<3>(name, source, wide, d, n);
                values_of::<TILE_ROWS>(name, source, wide, d, n);
            }
        }
    }
}

/// The scores of `rows` queries against the first `n` keys of `source`
/// read in place, where a level takes them so, against the portable
/// transposed path over the keys' f32 values: the same bits in every
/// column of the keys.
fn direct_scores_of(name: &str, source: Source<'_>, wide: &[f32], d: usize, n: usize, rows: usize) {
    let queries: Vec<Vec<f32>> = (0..TILE_ROWS).map(|r| (0..d).map(|i| noise(i, 50 + r as u64)).collect()).collect();
    let qs: [&[f32]; TILE_ROWS] = std::array::from_fn(|r| &queries[r][..]);
    let keys: Vec<&[u8]> = (0..n)
        .map(|j| {
            let row = &wide[j * d..(j + 1) * d];
            // SAFETY: any f32 is 4 plain bytes, and the view lives no
            // longer than `wide`, which nothing writes.
            unsafe { std::slice::from_raw_parts(row.as_ptr().cast::<u8>(), 4 * d) }
        })
        .collect();
    let mut transposed = vec![0.0f32; d * BLOCK];
    transpose_rows(Isa::Scalar, RowType::F32, &keys, d, &mut transposed);
    let mut want = [[f32::NAN; BLOCK]; TILE_ROWS];
    scores(Isa::Scalar, qs, rows, n, &transposed, &mut want);
    for level in levels() {
        assert_eq!(applies(level, d), level == Isa::Avx512 && d.is_multiple_of(16), "{level:?} d {d}");
        if !applies(level, d) {
            continue;
        }
        let mut got = [[f32::NAN; BLOCK]; TILE_ROWS];
        scores_direct(level, source, n, qs, rows, &mut got);
        for r in 0..rows {
            for j in 0..n {
                assert_eq!(got[r][j].to_bits(), want[r][j].to_bits(), "{name} d {d} n {n} row {r} of {rows} key {j}");
            }
        }
    }
    let exact = |r: usize, j: usize| (0..d).map(|i| f64::from(qs[r][i]) * f64::from(wide[j * d + i])).sum::<f64>();
    for (r, scores) in want.iter().enumerate().take(rows) {
        for (j, &score) in scores.iter().enumerate().take(n) {
            assert!((f64::from(score) - exact(r, j)).abs() <= 1e-3, "{name} d {d} n {n} row {r} key {j}");
        }
    }
}

#[test]
fn scores_read_in_place_give_the_transposed_bits_at_every_level() {
    for d in HEAD_SIZES {
        let keys = Rows::new(d, 3);
        for (name, source, wide) in keys.sources(d) {
            for n in KEY_COUNTS {
                for rows in 1..=TILE_ROWS {
                    direct_scores_of(name, source, wide, d, n, rows);
                }
            }
        }
    }
}
