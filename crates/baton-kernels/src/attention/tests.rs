use super::*;
use crate::quant::{dequantize_row, quantize_row};
use crate::with_isa;
use baton_core::DType;

/// A deterministic pseudo-random value in [-1, 1).
pub(super) fn noise(i: usize, seed: u64) -> f32 {
    let mut x = (i as u64).wrapping_add(seed).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 32;
    (x % 20_000) as f32 / 10_000.0 - 1.0
}

fn encode(dtype: DType, values: &[f32], dim: usize) -> Vec<u8> {
    let row = dtype.row_bytes(dim).unwrap();
    let mut out = vec![0u8; values.len() / dim * row];
    for (v, o) in values.chunks_exact(dim).zip(out.chunks_exact_mut(row)) {
        quantize_row(dtype, v, o).unwrap();
    }
    out
}

fn decoded(dtype: DType, bytes: &[u8], dim: usize) -> Vec<f32> {
    let mut out = vec![0.0; bytes.len() / dtype.row_bytes(dim).unwrap() * dim];
    dequantize_row(dtype, bytes, &mut out).unwrap();
    out
}

/// The plain definition in f64: whole score rows, then a softmax.
fn reference(q: &[f32], k: &[f32], v: &[f32], d: usize, keys: Range<usize>, scale: f32) -> Vec<f64> {
    let scores: Vec<f64> =
        keys.clone().map(|s| (0..d).map(|i| q[i] as f64 * k[s * d + i] as f64).sum::<f64>() * scale as f64).collect();
    let top = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let weights: Vec<f64> = scores.iter().map(|s| (s - top).exp()).collect();
    let total: f64 = weights.iter().sum();
    (0..d).map(|i| keys.clone().zip(&weights).map(|(s, w)| w * v[s * d + i] as f64).sum::<f64>() / total).collect()
}

/// [`attend`] of queries `q` over `ranges` of keys `k` and values `v`
/// (scale 1/8, no sinks): each row's output.
fn attend_all(q: &[Vec<f32>], ranges: &[Range<usize>], k: KvRows<'_>, v: KvRows<'_>) -> Vec<Vec<f32>> {
    let mut outs = vec![vec![0.0; k.dim]; q.len()];
    let mut rows: Vec<QueryRow<'_>> = q
        .iter()
        .zip(ranges)
        .zip(outs.iter_mut())
        .map(|((q, r), out)| QueryRow { q, keys: r.clone(), out, sink: None })
        .collect();
    attend(&mut rows, k, v, 0.125, &mut AttentionScratch::default()).unwrap();
    outs
}

struct Case {
    dtype: DType,
    d: usize,
    len: usize,
    k: Vec<u8>,
    v: Vec<u8>,
}

impl Case {
    fn new(dtype: DType, d: usize, len: usize) -> Case {
        let k: Vec<f32> = (0..len * d).map(|i| noise(i, 1) * 2.0).collect();
        let v: Vec<f32> = (0..len * d).map(|i| noise(i, 2)).collect();
        Case { dtype, d, len, k: encode(dtype, &k, d), v: encode(dtype, &v, d) }
    }

    fn rows<'a>(&self, data: &'a [u8]) -> KvRows<'a> {
        let stride = self.dtype.row_bytes(self.d).unwrap();
        KvRows { dtype: self.dtype, data, stride, dim: self.d, len: self.len, blocks: None }
    }

    fn run(&self, queries: &[Vec<f32>], ranges: &[Range<usize>]) -> Vec<Vec<f32>> {
        attend_all(queries, ranges, self.rows(&self.k), self.rows(&self.v))
    }
}

#[test]
fn agrees_with_the_whole_row_softmax_for_every_cache_type() {
    for dtype in [DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0] {
        for (d, len) in [(32, 1), (64, 200), (128, 64), (256, 130)] {
            let case = Case::new(dtype, d, len);
            let (k, v) = (decoded(dtype, &case.k, d), decoded(dtype, &case.v, d));
            let ranges = [0..len, len / 2..len, 0..1, len - 1..len, 0..0];
            let queries: Vec<Vec<f32>> =
                (0..ranges.len()).map(|r| (0..d).map(|i| noise(i, 10 + r as u64)).collect()).collect();
            let outs = case.run(&queries, &ranges);
            for ((q, range), out) in queries.iter().zip(&ranges).zip(&outs) {
                if range.is_empty() {
                    assert!(out.iter().all(|&x| x == 0.0), "an empty range gives 0");
                    continue;
                }
                let want = reference(q, &k, &v, d, range.clone(), 0.125);
                for (o, w) in out.iter().zip(&want) {
                    assert!((*o as f64 - w).abs() < 1e-5, "{dtype} d={d} len={len} {range:?}: {o} vs {w}");
                }
            }
        }
    }
}

#[test]
fn a_row_gives_the_same_bits_alone_among_others_and_at_every_level() {
    for dtype in [DType::Q8_0, DType::Q4_0, DType::F16, DType::BF16, DType::F32] {
        rows_alone_and_together(dtype);
    }
}

fn rows_alone_and_together(dtype: DType) {
    let case = Case::new(dtype, 64, 300);
    // Four rows that see the same keys (folded together as one tile), and
    // rows that do not.
    let ranges = [0..300, 0..300, 5..300, 0..300, 0..300, 10..140, 0..65, 200..263, 0..300];
    let q: Vec<Vec<f32>> = (0..ranges.len()).map(|r| (0..64).map(|i| noise(i, 20 + r as u64)).collect()).collect();
    let together = case.run(&q, &ranges);
    let levels: Vec<Isa> = Isa::available();
    for level in levels {
        with_isa(level, || {
            for (i, range) in ranges.iter().enumerate() {
                let alone = case.run(&q[i..=i], std::slice::from_ref(range));
                assert_eq!(alone[0], together[i], "{dtype} row {i} at {level:?}");
            }
            assert_eq!(case.run(&q, &ranges), together, "{dtype} all rows at {level:?}");
            // Three rows that see the same keys: a tile filled up with a
            // spare row.
            assert_eq!(case.run(&q[..3], &ranges[..3]), together[..3], "{dtype} three rows at {level:?}");
        });
    }
}

/// A ring of the last positions (a sliding-window layer's cache): rows
/// whose positions wrap around it give the bits of the same rows over a
/// cache of every position.
#[test]
fn a_ring_of_the_last_positions_gives_the_bits_of_the_whole_cache() {
    // Past the first segment, so rows also cross a segment's edge.
    let (d, total, ring) = (64, SEGMENT + 100, 128);
    let whole = Case::new(DType::Q8_0, d, total);
    let row = DType::Q8_0.row_bytes(d).unwrap();
    // Position s of the whole cache at row s % ring: the last `ring` positions.
    let mut k = vec![0u8; ring * row];
    let mut v = vec![0u8; ring * row];
    for s in total - ring..total {
        k[(s % ring) * row..][..row].copy_from_slice(&whole.k[s * row..][..row]);
        v[(s % ring) * row..][..row].copy_from_slice(&whole.v[s * row..][..row]);
    }
    // Position SEGMENT is row 0 of the ring: rows that wrap, rows that do
    // not, rows across the segment's edge.
    let ranges = [
        SEGMENT - 20..SEGMENT + 50,
        total - 50..total - 10,
        total - 100..total,
        total - ring..total - 1,
        total - 120..total - 60,
    ];
    // Under Miri (scripts/miri.sh, where this test took most of CI's Miri
    // time) the first two: one that wraps across the segment's edge, one
    // that does not.
    let ranges = &ranges[..if cfg!(miri) { 2 } else { ranges.len() }];
    let q: Vec<Vec<f32>> = (0..ranges.len()).map(|r| (0..d).map(|i| noise(i, 40 + r as u64)).collect()).collect();
    let want = whole.run(&q, ranges);
    let kv = |data| KvRows { dtype: DType::Q8_0, data, stride: row, dim: d, len: ring, blocks: None };
    assert_eq!(attend_all(&q, ranges, kv(&k), kv(&v)), want);
}

#[test]
fn bad_arguments_are_errors() {
    let case = Case::new(DType::F16, 64, 10);
    let q = vec![0.0f32; 64];
    let mut out = vec![0.0f32; 64];
    let mut rows = [QueryRow { q: &q, keys: 3..14, out: &mut out, sink: None }];
    let err = attend(&mut rows, case.rows(&case.k), case.rows(&case.v), 1.0, &mut AttentionScratch::default());
    assert!(matches!(err, Err(KernelError::RangeOutOfBounds { .. })), "{err:?}");
    let short = KvRows { len: 11, ..case.rows(&case.k) };
    rows[0].keys = 0..1;
    let err = attend(&mut rows, short, short, 1.0, &mut AttentionScratch::default());
    assert!(matches!(err, Err(KernelError::BufferTooSmall { .. })), "{err:?}");
    let q5 = KvRows { dtype: DType::Q8_0, dim: 48, ..case.rows(&case.k) };
    let err = attend(&mut rows, q5, q5, 1.0, &mut AttentionScratch::default());
    assert!(matches!(err, Err(KernelError::PartialBlock { .. })), "{err:?}");
}

/// Rows over several segments, their keys split over "threads" by groups
/// of segments and combined afterwards, give the bits of one call that
/// takes every key, at every level.
#[test]
fn keys_split_by_segment_and_combined_give_the_bits_of_one_call() {
    let (d, len) = (64, 3 * SEGMENT + 70);
    let case = Case::new(DType::F16, d, len);
    let ranges = [0..len, 100..len, 0..SEGMENT + 3, 2 * SEGMENT..2 * SEGMENT + 1, 0..0, 5..len - 9];
    let q: Vec<Vec<f32>> = (0..ranges.len()).map(|r| (0..d).map(|i| noise(i, 60 + r as u64)).collect()).collect();
    let want = case.run(&q, &ranges);
    let queries: Vec<Query<'_>> = q.iter().zip(&ranges).map(|(q, r)| Query { q, keys: r.clone() }).collect();
    let n_seg = len.div_ceil(SEGMENT);
    for level in Isa::available() {
        with_isa(level, || {
            for per_group in [1, 2, n_seg] {
                let mut states = vec![Partial::default(); n_seg * q.len()];
                let mut outs = vec![0.0f32; n_seg * q.len() * d];
                for first in (0..n_seg).step_by(per_group) {
                    let mine = first..(first + per_group).min(n_seg);
                    let at = first * q.len();
                    let n = mine.len() * q.len();
                    attend_segments(
                        &queries,
                        case.rows(&case.k),
                        case.rows(&case.v),
                        0.125,
                        mine,
                        (&mut states[at..at + n], &mut outs[at * d..(at + n) * d]),
                        &mut AttentionScratch::default(),
                    )
                    .unwrap();
                }
                for (r, want) in want.iter().enumerate() {
                    let mut out = vec![1.0f32; d];
                    let at = |s: usize| s * q.len() + r;
                    combine((0..n_seg).map(|s| (states[at(s)], &outs[at(s) * d..(at(s) + 1) * d])), None, &mut out);
                    assert_eq!(&out, want, "row {r} {:?} at {level:?}, {per_group} segments a group", ranges[r]);
                }
            }
        });
    }
}

/// The kernels read f32, f16, bf16, Q8_0 and Q4_0 rows where the cache
/// holds them when they lie in one run of bytes (and f32 is aligned), else
/// decode them first: both give the same bits.
#[test]
fn rows_read_in_place_give_the_bits_of_rows_decoded_first() {
    // Two blocks of positions, the second short.
    let len = 70;
    for dtype in [DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0] {
        let d = dtype.block_elems().max(16);
        let case = Case::new(dtype, d, len);
        let row = dtype.row_bytes(d).unwrap();
        let ranges = [0..len, 0..len, 7..69];
        let q: Vec<Vec<f32>> = (0..ranges.len()).map(|r| (0..d).map(|i| noise(i, 50 + r as u64)).collect()).collect();
        let run = |k: KvRows<'_>, v: KvRows<'_>| attend_all(&q, &ranges, k, v);
        // In place: rows one after the other, f32 at an aligned address.
        let aligned =
            |bytes: &[u8]| -> Vec<u32> { bytes.chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect() };
        let (k_words, v_words) = (aligned(&case.k), aligned(&case.v));
        // SAFETY: a u32 is 4 plain bytes; the views live no longer than the words.
        let (k_bytes, v_bytes) = unsafe {
            (
                std::slice::from_raw_parts(k_words.as_ptr().cast::<u8>(), case.k.len()),
                std::slice::from_raw_parts(v_words.as_ptr().cast::<u8>(), case.v.len()),
            )
        };
        let kv = |data, stride| KvRows { dtype, data, stride, dim: d, len, blocks: None };
        let in_place = run(kv(k_bytes, row), kv(v_bytes, row));
        // Decoded: rows 8 bytes apart more than their size.
        let spread =
            |bytes: &[u8]| -> Vec<u8> { bytes.chunks(row).flat_map(|r| r.iter().copied().chain([0u8; 8])).collect() };
        let (k_spread, v_spread) = (spread(&case.k), spread(&case.v));
        assert_eq!(run(kv(&k_spread, row + 8), kv(&v_spread, row + 8)), in_place, "{dtype} spread rows");
        // Decoded: f32 rows at an odd address.
        let shifted = |bytes: &[u8]| -> Vec<u8> { std::iter::once(0u8).chain(bytes.iter().copied()).collect() };
        let (k_odd, v_odd) = (shifted(&case.k), shifted(&case.v));
        assert_eq!(run(kv(&k_odd[1..], row), kv(&v_odd[1..], row)), in_place, "{dtype} rows at an odd address");
    }
}

/// A sink logit counts in the softmax's denominator only: against the
/// whole-row definition in f64, and the segments combined with it give the
/// bits of one pass with it.
#[test]
fn a_sink_logit_takes_its_share_of_the_softmax_and_combines_to_the_same_bits() {
    let (d, len) = (64, 2 * SEGMENT + 30);
    let case = Case::new(DType::F32, d, len);
    let (k, v) = (decoded(DType::F32, &case.k, d), decoded(DType::F32, &case.v, d));
    let ranges = [0..len, 40..len, 0..1, 0..0];
    let sinks = [0.7f32, -3.0, 25.0, 1.5];
    let q: Vec<Vec<f32>> = (0..ranges.len()).map(|r| (0..d).map(|i| noise(i, 80 + r as u64)).collect()).collect();
    let mut outs = vec![vec![0.0; d]; q.len()];
    let mut rows: Vec<QueryRow<'_>> = q
        .iter()
        .zip(&ranges)
        .zip(outs.iter_mut())
        .zip(sinks)
        .map(|(((q, r), out), sink)| QueryRow { q, keys: r.clone(), out, sink: Some(sink) })
        .collect();
    attend(&mut rows, case.rows(&case.k), case.rows(&case.v), 0.125, &mut AttentionScratch::default()).unwrap();
    for (r, out) in outs.iter().enumerate() {
        let keys = ranges[r].clone();
        let scores: Vec<f64> =
            keys.clone().map(|s| (0..d).map(|i| q[r][i] as f64 * k[s * d + i] as f64).sum::<f64>() * 0.125).collect();
        let top = scores.iter().cloned().fold(f64::from(sinks[r]), f64::max);
        let total: f64 = scores.iter().map(|s| (s - top).exp()).sum::<f64>() + (f64::from(sinks[r]) - top).exp();
        for i in 0..d {
            let want: f64 =
                keys.clone().zip(&scores).map(|(s, w)| (w - top).exp() * v[s * d + i] as f64).sum::<f64>() / total;
            assert!((out[i] as f64 - want).abs() <= 1e-5 * (1.0 + want.abs()), "row {r} [{i}]: {} vs {want}", out[i]);
        }
    }
    assert!(outs[3].iter().all(|&x| x == 0.0), "a row that sees no key is 0");
    let queries: Vec<Query<'_>> = q.iter().zip(&ranges).map(|(q, r)| Query { q, keys: r.clone() }).collect();
    let n_seg = len.div_ceil(SEGMENT);
    let mut states = vec![Partial::default(); n_seg * q.len()];
    let mut parts = vec![0.0f32; n_seg * q.len() * d];
    attend_segments(
        &queries,
        case.rows(&case.k),
        case.rows(&case.v),
        0.125,
        0..n_seg,
        (&mut states, &mut parts),
        &mut AttentionScratch::default(),
    )
    .unwrap();
    for (r, want) in outs.iter().enumerate() {
        let mut out = vec![0.0f32; d];
        let at = |s: usize| s * q.len() + r;
        combine((0..n_seg).map(|s| (states[at(s)], &parts[at(s) * d..(at(s) + 1) * d])), Some(sinks[r]), &mut out);
        assert_eq!(&out, want, "row {r}: segments with the sink");
    }
}

/// The blocks of `bytes` (rows of `row` bytes, `BLOCK` to a block) moved
/// into a pool of `pool` blocks at `table`'s places; the pool's other
/// blocks hold noise that no row must read.
fn scattered(bytes: &[u8], row: usize, table: &[u32], pool: usize) -> Vec<u8> {
    let block = BLOCK * row;
    let mut out: Vec<u8> = (0..pool * block).map(|i| (noise(i, 77) * 100.0) as i8 as u8).collect();
    for (j, chunk) in bytes.chunks(block).enumerate() {
        let at = table[j] as usize * block;
        out[at..at + chunk.len()].copy_from_slice(chunk);
    }
    out
}

#[test]
fn rows_in_blocks_of_a_pool_give_the_bits_of_one_run_for_every_cache_type() {
    let len = SEGMENT + 3 * BLOCK + 17;
    let blocks = len.div_ceil(BLOCK);
    // Blocks in a shuffled order, in a pool with spare blocks between them.
    let table: Vec<u32> = (0..blocks as u32).map(|j| (j * 7 + 3) % (2 * blocks as u32 + 1)).collect();
    let pool = 2 * blocks + 1;
    for dtype in [DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0] {
        let d = 64;
        let case = Case::new(dtype, d, len);
        let row = dtype.row_bytes(d).unwrap();
        let (k, v) = (scattered(&case.k, row, &table, pool), scattered(&case.v, row, &table, pool));
        let ranges = [0..len, 5..len - 3, len - 1..len, BLOCK - 1..BLOCK + 1, SEGMENT - 9..SEGMENT + 70, 0..0];
        let q: Vec<Vec<f32>> = (0..ranges.len()).map(|r| (0..d).map(|i| noise(i, 50 + r as u64)).collect()).collect();
        let want = case.run(&q, &ranges);
        let paged = |data| KvRows { blocks: Some(&table), ..case.rows(data) };
        assert_eq!(attend_all(&q, &ranges, paged(&k), paged(&v)), want, "{dtype}");
        // Split by segments and combined: the same bits again.
        let queries: Vec<Query<'_>> = q.iter().zip(&ranges).map(|(q, r)| Query { q, keys: r.clone() }).collect();
        let segments = 0..len.div_ceil(SEGMENT);
        let n = queries.len() * segments.len();
        let (mut states, mut parts) = (vec![Partial::default(); n], vec![0.0; n * d]);
        let results = (&mut states[..], &mut parts[..]);
        let mut scratch = AttentionScratch::default();
        attend_segments(&queries, paged(&k), paged(&v), 0.125, segments.clone(), results, &mut scratch).unwrap();
        for (r, want) in want.iter().enumerate() {
            let mut out = vec![0.0; d];
            let at = |s: usize| s * queries.len() + r;
            combine(segments.clone().map(|s| (states[at(s)], &parts[at(s) * d..(at(s) + 1) * d])), None, &mut out);
            assert_eq!(&out, want, "{dtype} row {r} by segments");
        }
    }
}

#[test]
fn a_block_table_too_short_or_past_the_pool_is_an_error() {
    let case = Case::new(DType::F16, 64, 2 * BLOCK + 1);
    let row = DType::F16.row_bytes(64).unwrap();
    let table = [2u32, 0, 1];
    let k = scattered(&case.k, row, &table, 3);
    let q = vec![0.1f32; 64];
    let mut out = vec![0.0f32; 64];
    let mut rows = [QueryRow { q: &q, keys: 0..2 * BLOCK + 1, out: &mut out, sink: None }];
    let mut scratch = AttentionScratch::default();
    let with = |blocks| KvRows { blocks: Some(blocks), ..case.rows(&k) };
    attend(&mut rows, with(&table), with(&table), 1.0, &mut scratch).expect("three blocks in a pool of three");
    let err = attend(&mut rows, with(&table[..2]), with(&table[..2]), 1.0, &mut scratch);
    assert!(matches!(err, Err(KernelError::BufferTooSmall { what: "block table entries", .. })), "{err:?}");
    let err = attend(&mut rows, with(&[2, 0, 3]), with(&[2, 0, 3]), 1.0, &mut scratch);
    assert!(matches!(err, Err(KernelError::BufferTooSmall { .. })), "{err:?}");
}
