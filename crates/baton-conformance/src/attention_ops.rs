//! The fused attention op against the f64 definition: whole score rows,
//! a softmax, then the weighted values.

use baton_core::graph::{Flags, Graph, Op, ATTENTION_BLOCK};
use baton_core::DType;

use crate::op_harness::{check, encode, f32s, input_f32, input_i32, run, Input, FLOAT_NMSE};
use crate::reference as r;
use crate::util::{random, Fixture};

/// Query heads, key-value heads, head size, cached positions.
const HEADS: usize = 4;
const KV_HEADS: usize = 2;
const DIM: usize = 32;
const KEYS: usize = 70;

/// Attention over an f16 cache (grouped-query, keys past one block of
/// 64), rows at positions in both blocks and one at -1 (sees nothing: 0).
pub fn op_attention_f16(f: &Fixture) {
    attention_case(f, (DType::F16, DType::F16), None, false);
}

/// Attention over an f32 cache with a sliding window of 5 keys, the
/// queries a view of some heads of a wider tensor.
pub fn op_attention_window(f: &Fixture) {
    attention_case(f, (DType::F32, DType::F32), Some(5), true);
}

/// Attention over a cache of 8-bit blocks (`-ctk q8_0 -ctv q8_0`), on
/// devices that declare it; the others must refuse it.
pub fn op_attention_q8_0(f: &Fixture) {
    attention_case(f, (DType::Q8_0, DType::Q8_0), None, false);
}

/// Attention over 4-bit keys and f16 values (`-ctk q4_0 -ctv f16`).
pub fn op_attention_q4_0_keys(f: &Fixture) {
    attention_case(f, (DType::Q4_0, DType::F16), Some(40), false);
}

fn attention_case(f: &Fixture, (kt, vt): (DType, DType), window: Option<usize>, strided_q: bool) {
    let op = Op::Attention { scale: 0.3, window, slot_rows: None, sinks: false, paged: false };
    if !f.devices.iter().all(|d| d.supports(&op, kt) && d.supports(&op, vt)) {
        return;
    }
    let positions = [40i32, 66, -1, 69];
    let t = positions.len();
    // A wider query tensor whose heads 1..=HEADS are the queries when strided.
    let q_heads = if strided_q { HEADS + 2 } else { HEADS };
    let q = random(t * q_heads * DIM, 31);
    let (k_values, v_values) = (random(KV_HEADS * KEYS * DIM, 32), random(KV_HEADS * KEYS * DIM, 33));
    let (k_bytes, v_bytes) = (encode(kt, &k_values), encode(vt, &v_values));
    let k = r::decode_row(kt, &k_bytes, k_values.len());
    let v = r::decode_row(vt, &v_bytes, v_values.len());
    let first = if strided_q { 1 } else { 0 };
    let out = run_attention(f, (&q, q_heads, first), (kt, k_bytes), (vt, v_bytes), &positions, window);
    let mut expected = Vec::with_capacity(t * HEADS * DIM);
    for (ti, &p) in positions.iter().enumerate() {
        for h in 0..HEADS {
            let query = &q[(ti * q_heads + first + h) * DIM..][..DIM];
            let kv = h / (HEADS / KV_HEADS);
            let end = usize::try_from(p + 1).unwrap_or(0).min(KEYS);
            let start = window.map_or(0, |w| end.saturating_sub(w));
            expected.extend(attend(query, &k[kv * KEYS * DIM..], &v[kv * KEYS * DIM..], start..end));
        }
    }
    check(&format!("attention {kt} keys, {vt} values"), &out, &expected, FLOAT_NMSE);
}

/// Attention over a ring of the last 32 positions (a sliding-window
/// layer's cache): position `s` at row `s mod 32`, rows at positions that
/// wrap around it, a window of 12.
pub fn op_attention_ring(f: &Fixture) {
    let (rows, window) = (32usize, 12usize);
    let positions = [100i32, 95, 110];
    let t = positions.len();
    let q = random(t * HEADS * DIM, 36);
    let ((k_bytes, k), (v_bytes, v)) = (f16_cache(rows, 37), f16_cache(rows, 38));
    let out = run_attention(f, (&q, HEADS, 0), (DType::F16, k_bytes), (DType::F16, v_bytes), &positions, Some(window));
    // The keys and values by position: position s is row s mod 32.
    let by_position = |cache: &[f64], kv: usize| -> Vec<f64> {
        (0..120).flat_map(|s| cache[(kv * rows + s % rows) * DIM..][..DIM].to_vec()).collect()
    };
    let mut expected = Vec::new();
    for (ti, &p) in positions.iter().enumerate() {
        for h in 0..HEADS {
            let kv = h / (HEADS / KV_HEADS);
            let end = p as usize + 1;
            let query = &q[(ti * HEADS + h) * DIM..][..DIM];
            expected.extend(attend(query, &by_position(&k, kv), &by_position(&v, kv), end - window..end));
        }
    }
    check("attention over a ring", &out, &expected, FLOAT_NMSE);
}

/// A decode step over a long f16 cache (1,200 positions: several of the
/// CPU kernel's segments, which a device may split over its threads), with
/// a window on one case.
pub fn op_attention_long(f: &Fixture) {
    const LONG: usize = 1200;
    for window in [None, Some(700)] {
        let positions = [1199i32, 530];
        let t = positions.len();
        let q = random(t * HEADS * DIM, 39);
        let ((k_bytes, k), (v_bytes, v)) = (f16_cache(LONG, 40), f16_cache(LONG, 41));
        let out = run_attention(f, (&q, HEADS, 0), (DType::F16, k_bytes), (DType::F16, v_bytes), &positions, window);
        let mut expected = Vec::new();
        for (ti, &p) in positions.iter().enumerate() {
            for h in 0..HEADS {
                let kv = h / (HEADS / KV_HEADS);
                let end = p as usize + 1;
                let start = window.map_or(0, |w| end.saturating_sub(w));
                let query = &q[(ti * HEADS + h) * DIM..][..DIM];
                expected.extend(attend(query, &k[kv * LONG * DIM..], &v[kv * LONG * DIM..], start..end));
            }
        }
        check(&format!("attention over {LONG} positions, window {window:?}"), &out, &expected, FLOAT_NMSE);
    }
}

/// Every sequence of a batched step in one node (in slots): 3 caches of
/// 24 rows in one f16 tensor, rows reading slots out of order (one slot
/// twice, apart), once over whole caches and once over rings of the last
/// 24 positions with a window of 20 (positions that wrap). Devices that do
/// not declare the form are skipped.
pub fn op_attention_in_slots(f: &Fixture) {
    const SLOT_ROWS: usize = 24;
    const SLOTS: usize = 3;
    let op = Op::Attention { scale: 0.3, window: None, slot_rows: Some(SLOT_ROWS), sinks: false, paged: false };
    if !f.devices.iter().all(|d| d.supports(&op, DType::F16)) {
        return;
    }
    let slots = [2i32, 0, 2, 1, 0];
    for (window, positions) in [(None, [23i32, 5, 0, 17, -1]), (Some(20), [30, 70, 47, 23, 100])] {
        let t = positions.len();
        let q = random(t * HEADS * DIM, 42);
        let ((k_bytes, k), (v_bytes, v)) = (f16_cache(SLOTS * SLOT_ROWS, 43), f16_cache(SLOTS * SLOT_ROWS, 44));
        let mut g = Graph::new();
        let ql = g.leaf("q", DType::F32, &[t, HEADS, DIM], Flags::INPUT).expect("leaf");
        let kl = g.leaf("k", DType::F16, &[KV_HEADS, SLOTS * SLOT_ROWS, DIM], Flags::STATE).expect("leaf");
        let vl = g.leaf("v", DType::F16, &[KV_HEADS, SLOTS * SLOT_ROWS, DIM], Flags::STATE).expect("leaf");
        let pl = g.leaf("pos", DType::I32, &[t], Flags::INPUT).expect("leaf");
        let sl = g.leaf("slots", DType::I32, &[t], Flags::INPUT).expect("leaf");
        let y = g.attention_in_slots(ql, (kl, vl), (pl, sl), SLOT_ROWS, 0.3, window).expect("attention");
        g.mark(y, Flags::OUTPUT).expect("mark");
        g.set_name(y, "y").expect("name");
        let inputs = vec![
            input_f32("q", &q),
            Input { name: "k", bytes: k_bytes },
            Input { name: "v", bytes: v_bytes },
            input_i32("pos", &positions),
            input_i32("slots", &slots),
        ];
        let out = f32s(&run(f, g, inputs)["y"]);
        // Slot `slot`'s keys or values by position: position s is row
        // `slot · 24 + s mod 24`.
        let by_position = |cache: &[f64], kv: usize, slot: usize| -> Vec<f64> {
            let base = kv * SLOTS * SLOT_ROWS + slot * SLOT_ROWS;
            (0..101).flat_map(|s| cache[(base + s % SLOT_ROWS) * DIM..][..DIM].to_vec()).collect()
        };
        let mut expected = Vec::new();
        for (ti, (&p, &slot)) in positions.iter().zip(&slots).enumerate() {
            for h in 0..HEADS {
                let kv = h / (HEADS / KV_HEADS);
                let end = usize::try_from(p + 1).unwrap_or(0);
                let start = window.map_or(0, |w| end.saturating_sub(w));
                let query = &q[(ti * HEADS + h) * DIM..][..DIM];
                let (keys, values) = (by_position(&k, kv, slot as usize), by_position(&v, kv, slot as usize));
                expected.extend(attend(query, &keys, &values, start..end));
            }
        }
        check(&format!("attention in slots, window {window:?}"), &out, &expected, FLOAT_NMSE);
    }
}

/// Sequences whose caches are blocks of one pool (a paged cache): 3
/// sequences of 2 blocks in a pool of 7 (f16), tables out of order, two
/// sequences sharing their first block (a shared prefix); rows read them
/// out of order. Against the f64 definition, and bit for bit the op in
/// slots over the same keys laid out in one run per sequence. Devices that
/// do not declare the form are skipped.
pub fn op_attention_in_blocks(f: &Fixture) {
    const B: usize = ATTENTION_BLOCK;
    const POOL: usize = 7 * B;
    const PER_SEQ: usize = 2 * B;
    let op = Op::Attention { scale: 0.3, window: None, slot_rows: Some(PER_SEQ), sinks: false, paged: true };
    if !f.devices.iter().all(|d| d.supports(&op, DType::F16)) {
        return;
    }
    let table = [5i32, 1, 5, 3, 0, 6];
    let slots = [1i32, 0, 2, 1, 0];
    let positions = [100i32, 127, 70, 64, -1];
    let t = positions.len();
    let q = random(t * HEADS * DIM, 45);
    let ((k_bytes, k), (v_bytes, v)) = (f16_cache(POOL, 46), f16_cache(POOL, 47));
    // Sequence `seq`'s rows by position, from the pool.
    let pool_row = |seq: usize, s: usize| table[seq * 2 + s / B] as usize * B + s % B;
    let by_position = |cache: &[f64], kv: usize, seq: usize| -> Vec<f64> {
        (0..PER_SEQ).flat_map(|s| cache[(kv * POOL + pool_row(seq, s)) * DIM..][..DIM].to_vec()).collect()
    };
    let mut expected = Vec::new();
    for (ti, (&p, &seq)) in positions.iter().zip(&slots).enumerate() {
        for h in 0..HEADS {
            let kv = h / (HEADS / KV_HEADS);
            let query = &q[(ti * HEADS + h) * DIM..][..DIM];
            let (keys, values) = (by_position(&k, kv, seq as usize), by_position(&v, kv, seq as usize));
            expected.extend(attend(query, &keys, &values, 0..usize::try_from(p + 1).unwrap_or(0)));
        }
    }
    let graph = |paged: bool, rows: usize| {
        let mut g = Graph::new();
        let ql = g.leaf("q", DType::F32, &[t, HEADS, DIM], Flags::INPUT).expect("leaf");
        let kl = g.leaf("k", DType::F16, &[KV_HEADS, rows, DIM], Flags::STATE).expect("leaf");
        let vl = g.leaf("v", DType::F16, &[KV_HEADS, rows, DIM], Flags::STATE).expect("leaf");
        let pl = g.leaf("pos", DType::I32, &[t], Flags::INPUT).expect("leaf");
        let sl = g.leaf("slots", DType::I32, &[t], Flags::INPUT).expect("leaf");
        let y = if paged {
            let tl = g.leaf("table", DType::I32, &[3, 2], Flags::INPUT).expect("leaf");
            g.attention_in_blocks(ql, (kl, vl), (pl, sl, tl), PER_SEQ, 0.3, None)
        } else {
            g.attention_in_slots(ql, (kl, vl), (pl, sl), PER_SEQ, 0.3, None)
        };
        let y = y.expect("attention");
        g.mark(y, Flags::OUTPUT).expect("mark");
        g.set_name(y, "y").expect("name");
        g
    };
    let inputs = |k: Vec<u8>, v: Vec<u8>| {
        vec![
            input_f32("q", &q),
            Input { name: "k", bytes: k },
            Input { name: "v", bytes: v },
            input_i32("pos", &positions),
            input_i32("slots", &slots),
            input_i32("table", &table),
        ]
    };
    let paged = f32s(&run(f, graph(true, POOL), inputs(k_bytes.clone(), v_bytes.clone()))["y"]);
    check("attention in blocks", &paged, &expected, FLOAT_NMSE);
    // The same keys in one run per sequence (3 x 128 rows per head).
    let row = DType::F16.row_bytes(DIM).expect("row");
    let contiguous = |bytes: &[u8]| -> Vec<u8> {
        let mut out = Vec::new();
        for kv in 0..KV_HEADS {
            for seq in 0..3 {
                for s in 0..PER_SEQ {
                    out.extend_from_slice(&bytes[(kv * POOL + pool_row(seq, s)) * row..][..row]);
                }
            }
        }
        out
    };
    let mut slot_inputs = inputs(contiguous(&k_bytes), contiguous(&v_bytes));
    slot_inputs.pop();
    let in_slots = f32s(&run(f, graph(false, 3 * PER_SEQ), slot_inputs)["y"]);
    let same = paged.iter().zip(&in_slots).all(|(a, b)| a.to_bits() == b.to_bits());
    assert!(same, "attention in blocks differs from the same keys in slots");
}

/// Random keys or values of `rows` positions per KV head in f16: the
/// bytes, and the values they hold.
fn f16_cache(rows: usize, seed: u64) -> (Vec<u8>, Vec<f64>) {
    let values = random(KV_HEADS * rows * DIM, seed);
    let bytes = encode(DType::F16, &values);
    let decoded = r::decode_row(DType::F16, &bytes, values.len());
    (bytes, decoded)
}

/// Runs one attention node: queries `q` (`[T, q_heads, DIM]`, heads
/// `first..first + HEADS` used), keys and values (`[KV_HEADS, rows, DIM]`
/// encoded), positions; returns the output.
fn run_attention(
    f: &Fixture,
    (q, q_heads, first): (&[f32], usize, usize),
    (kt, k_bytes): (DType, Vec<u8>),
    (vt, v_bytes): (DType, Vec<u8>),
    positions: &[i32],
    window: Option<usize>,
) -> Vec<f32> {
    let t = positions.len();
    let rows = k_bytes.len() / kt.row_bytes(DIM).expect("row") / KV_HEADS;
    let mut g = Graph::new();
    let ql = g.leaf("q", DType::F32, &[t, q_heads, DIM], Flags::INPUT).expect("leaf");
    let kl = g.leaf("k", kt, &[KV_HEADS, rows, DIM], Flags::STATE).expect("leaf");
    let vl = g.leaf("v", vt, &[KV_HEADS, rows, DIM], Flags::STATE).expect("leaf");
    let pl = g.leaf("pos", DType::I32, &[t], Flags::INPUT).expect("leaf");
    let qv = if q_heads != HEADS { g.narrow(ql, 1, first, HEADS).expect("narrow") } else { ql };
    let y = g.attention(qv, (kl, vl), pl, 0.3, window).expect("attention");
    g.mark(y, Flags::OUTPUT).expect("mark");
    g.set_name(y, "y").expect("name");
    let inputs = vec![
        input_f32("q", q),
        Input { name: "k", bytes: k_bytes },
        Input { name: "v", bytes: v_bytes },
        input_i32("pos", positions),
    ];
    f32s(&run(f, g, inputs)["y"])
}

/// One row: `Σ_s softmax(0.3 q·k_s) v_s` over `keys`, 0 if there are none.
fn attend(q: &[f32], k: &[f64], v: &[f64], keys: std::ops::Range<usize>) -> Vec<f64> {
    if keys.is_empty() {
        return vec![0.0; DIM];
    }
    let scores: Vec<f64> =
        keys.clone().map(|s| 0.3 * (0..DIM).map(|i| f64::from(q[i]) * k[s * DIM + i]).sum::<f64>()).collect();
    let max = scores.iter().cloned().fold(f64::MIN, f64::max);
    let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
    let total: f64 = weights.iter().sum();
    (0..DIM).map(|i| keys.clone().zip(&weights).map(|(s, w)| w * v[s * DIM + i]).sum::<f64>() / total).collect()
}

/// Rows scattered into a cache of 8-bit blocks (`-ctk q8_0`) at positions
/// given as input: each written row decodes to its values within half a
/// step of its block's scale, the other rows stay as they were.
pub fn op_scatter_rows_q8_0(f: &Fixture) {
    let op = Op::ScatterRows;
    if !f.devices.iter().all(|d| d.supports(&op, DType::Q8_0)) {
        return;
    }
    let (cap, heads, dim) = (6, 2, 64);
    let rows = [4i32, 1];
    let src = random(rows.len() * heads * dim, 34);
    let old = random(cap * heads * dim, 35);
    let old_bytes = encode(DType::Q8_0, &old);
    let old_decoded = r::decode_row(DType::Q8_0, &old_bytes, old.len());
    let mut g = Graph::new();
    let c = g.leaf("cache", DType::Q8_0, &[heads, cap, dim], Flags::STATE).expect("leaf");
    let s = g.leaf("src", DType::F32, &[rows.len(), heads, dim], Flags::INPUT).expect("leaf");
    let r = g.leaf("rows", DType::I32, &[rows.len()], Flags::INPUT).expect("leaf");
    let by_position = g.permute(c, &[1, 0, 2]).expect("permute");
    g.scatter_rows(by_position, s, r).expect("scatter_rows");
    let inputs = vec![input_f32("src", &src), input_i32("rows", &rows), Input { name: "cache", bytes: old_bytes }];
    let out = run(f, g, inputs);
    let got = r::decode_row(DType::Q8_0, &out["cache"], old.len());
    for h in 0..heads {
        for p in 0..cap {
            let at = (h * cap + p) * dim;
            let Some(t) = rows.iter().position(|&x| x as usize == p) else {
                assert_eq!(got[at..at + dim], old_decoded[at..at + dim], "row {p} of head {h} changed");
                continue;
            };
            let want = &src[(t * heads + h) * dim..][..dim];
            for (block, values) in want.chunks(32).enumerate() {
                let step = values.iter().fold(0.0f32, |m, v| m.max(v.abs())) as f64 / 127.0;
                for (i, &w) in values.iter().enumerate() {
                    let g = got[at + block * 32 + i];
                    assert!((g - f64::from(w)).abs() <= step * 0.51 + 1e-6, "cache[{h}][{p}][{i}]: {g} vs {w}");
                }
            }
        }
    }
}
