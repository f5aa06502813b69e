//! The fused attention op: every query row over its key positions, split
//! over the pool by key-value head and chunks of rows, or, for a few rows
//! over many positions (a decode step), by key-value head and groups of
//! key segments whose results are combined afterwards (the kernels are
//! `baton_kernels::attend`, `attend_segments` and `combine`; each row's
//! bits do not depend on the split). In slots (a batched step of several
//! sequences), each sequence's rows are a run over its own cache, and the
//! units of every run share the pool.

use baton_core::backend::StreamError;
use baton_core::graph::{NodeId, Op, ATTENTION_BLOCK};
use baton_core::parallel::Chunks;
use baton_core::DType;
use baton_core::Parallel;
use baton_kernels::{attend, attend_segments, combine, KernelError, KvRows, Partial, Query, QueryRow, SEGMENT};

use super::context::{node, node_error, Context, SharedPtr};
use super::workspace::Workspace;

/// Rows of one key-value head a unit of work takes at most: enough that
/// decoding a block of keys is a small part of using it.
const ROWS_PER_UNIT: usize = 128;

/// Rows of a key-value head up to which the keys, rather than the rows,
/// are split over the pool (when they span several segments).
const SPLIT_KEYS_ROWS: usize = 64;

/// The key positions a row at `position` sees (the kernel checks they
/// fit the cache's rows).
fn visible(position: i32, window: Option<usize>) -> std::ops::Range<usize> {
    let Ok(p) = usize::try_from(position) else { return 0..0 };
    let end = p.saturating_add(1);
    let start = window.map_or(0, |w| end.saturating_sub(w));
    start..end
}

/// Consecutive query rows (tokens) over one cache: `base` is the cache's
/// first row in `k` and `v` (0 for a pool of blocks), `len` its rows,
/// `slot` the sequence (its row of a block table).
#[derive(Clone, Debug)]
struct Run {
    tokens: std::ops::Range<usize>,
    base: usize,
    len: usize,
    slot: usize,
}

/// The runs of an op: one over the whole cache, or (in slots of `rows`
/// rows) one per stretch of rows reading the same slot; with a block table
/// of `paged` sequences, every slot's rows are blocks of the whole pool.
fn runs(t_len: usize, s_len: usize, slots: Option<(&[i32], usize)>, paged: Option<usize>) -> Result<Vec<Run>, String> {
    let Some((slots, rows)) = slots else {
        return Ok(vec![Run { tokens: 0..t_len, base: 0, len: s_len, slot: 0 }]);
    };
    let count = paged.unwrap_or(s_len / rows.max(1));
    let mut runs: Vec<Run> = Vec::new();
    for (t, &slot) in slots.iter().enumerate() {
        let slot = usize::try_from(slot)
            .ok()
            .filter(|&s| s < count)
            .ok_or_else(|| format!("row {t} reads slot {slot}; the caches hold {count}"))?;
        match runs.last_mut() {
            Some(run) if run.slot == slot && run.tokens.end == t => run.tokens.end = t + 1,
            _ => {
                let base = if paged.is_some() { 0 } else { slot * rows };
                runs.push(Run { tokens: t..t + 1, base, len: rows, slot });
            }
        }
    }
    Ok(runs)
}

/// Key-value head `g` of `run`'s cache in `bytes` (the data of `node`,
/// `[Hk, S, D]`): rows of `d` elements, in blocks where `blocks` says.
fn kv_rows<'b>(
    bytes: &'b [u8],
    node: &baton_core::graph::Node,
    g: usize,
    run: &Run,
    (d, blocks): (usize, Option<&'b [u32]>),
) -> Option<KvRows<'b>> {
    Some(KvRows {
        dtype: node.dtype,
        data: bytes.get(g * node.layout.strides[0] + run.base * node.layout.strides[1]..)?,
        stride: node.layout.strides[1],
        dim: d,
        len: run.len,
        blocks,
    })
}

/// A block table `[Q, M]` (i32) as the kernels read it, each entry checked
/// to be a block of the pool of `pool_rows` rows.
fn block_table(table: &[i32], pool_rows: usize) -> Result<Vec<u32>, String> {
    let blocks = pool_rows / ATTENTION_BLOCK;
    table
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            u32::try_from(b)
                .ok()
                .filter(|&b| (b as usize) < blocks)
                .ok_or_else(|| format!("block table entry {i} is block {b}; the pool holds {blocks}"))
        })
        .collect()
}

pub(crate) fn run<'a>(exec: &Workspace, ctx: &'a Context<'a>, id: NodeId) -> Result<(), StreamError> {
    let n = node(ctx, id);
    let Op::Attention { scale, window, slot_rows, sinks, paged } = n.op else {
        return Err(node_error(ctx.graph, id, "not an attention node"));
    };
    let err = |m: String| node_error(ctx.graph, id, m);
    let (qn, kn, vn) = (node(ctx, n.inputs[0]), node(ctx, n.inputs[1]), node(ctx, n.inputs[2]));
    let positions = ctx.indices(n.inputs[3])?;
    let [t_len, heads, d] = qn.layout.shape.dims()[..] else { return Err(err("q is not [T, H, D]".into())) };
    let (kv_heads, s_len) = (kn.layout.shape.dims()[0], kn.layout.shape.dims()[1]);
    let sink_input = if sinks { n.inputs.last().copied() } else { None };
    let slots = match (slot_rows, n.inputs.get(4).filter(|&&i| Some(i) != sink_input)) {
        (Some(rows), Some(&input)) => Some((ctx.indices(input)?, rows)),
        (None, None) => None,
        _ => return Err(err("the slots input and the rows of a slot go together".into())),
    };
    let sinks = match sink_input {
        Some(input) => Some(ctx.f32s(input)?),
        None => None,
    };
    // A paged op's table: each sequence's blocks, a row of the table each.
    let table = match (paged, n.inputs.get(5)) {
        (true, Some(&input)) => Some((block_table(ctx.indices(input)?, s_len).map_err(err)?, input)),
        (false, _) => None,
        (true, None) => return Err(err("a paged attention without its block table".into())),
    };
    let per_seq = slot_rows.unwrap_or(0).div_ceil(ATTENTION_BLOCK);
    let sequences = table.as_ref().map(|(t, _)| t.len() / per_seq.max(1));
    let runs = runs(t_len, s_len, slots, sequences).map_err(err)?;
    let table = table.map(|(t, _)| t);
    // The queries: rows of D f32s at byte strides (a view of heads is fine).
    let q = ctx.bytes(n.inputs[0])?;
    let (qs0, qs1) = (qn.layout.strides[0], qn.layout.strides[1]);
    if qn.dtype != DType::F32
        || (d > 1 && qn.layout.strides[2] != 4)
        || !(q.as_ptr() as usize).is_multiple_of(4)
        || !qs0.is_multiple_of(4)
        || !qs1.is_multiple_of(4)
    {
        return Err(err("queries must be aligned f32 rows".into()));
    }
    let q_row = |t: usize, h: usize| -> &[f32] {
        let at = t * qs0 + h * qs1;
        let bytes = &q[at..at + 4 * d];
        // SAFETY: `bytes` is 4-byte aligned (base and strides checked
        // above) and holds `d` initialised f32s of the view (`bytes` covers
        // the view's extent, which the slice indexing checks again).
        unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<f32>(), d) }
    };
    let (k, v) = (ctx.bytes(n.inputs[1])?, ctx.bytes(n.inputs[2])?);
    // Key-value head `g` of the cache of `run`.
    let blocks = |run: &Run| table.as_deref().map(|t| &t[run.slot * per_seq..(run.slot + 1) * per_seq]);
    let kv = |bytes, node, g, run: &Run| kv_rows(bytes, node, g, run, (d, blocks(run)));
    let ranges: Vec<_> = positions.iter().map(|&p| visible(p, window)).collect();
    // SAFETY: the op takes its output once, here.
    let out_rows = unsafe { ctx.out_f32(id)? };
    let group = heads / kv_heads.max(1);
    let threads = exec.device.pool_threads();
    // Rows of a key-value head in a run, token-major: row r is token
    // `run.tokens.start + r / group`, head g * group + r % group.
    let per_head = |run: &Run| group * run.tokens.len();
    let token = |run: &Run, r: usize| run.tokens.start + r / group;
    let query = |run: &Run, g: usize, r: usize| Query {
        q: q_row(token(run, r), g * group + r % group),
        keys: ranges[token(run, r)].clone(),
    };
    let out_at = |run: &Run, g: usize, r: usize| (token(run, r) * heads + g * group + r % group) * d;
    // Query head of row r of key-value head g's rows: its sink logit.
    let sink = |g: usize, r: usize| sinks.and_then(|s| s.get(g * group + r % group).copied());
    let span_of = |run: &Run| {
        let seen = ranges[run.tokens.clone()].iter().filter(|r| !r.is_empty());
        let (lo, hi) = seen.fold((usize::MAX, 0), |(lo, hi), r| (lo.min(r.start), hi.max(r.end)));
        lo.min(hi)..hi
    };
    let failure = baton_core::loom::Mutex::new(None::<KernelError>);
    let missing_head = |g: usize| KernelError::BufferTooSmall { what: "key-value heads", needed: g, actual: 0 };
    let run_units =
        |units: usize, serial: bool, work: &(dyn Fn(usize, &mut baton_kernels::AttentionScratch) + Sync)| {
            if serial || threads == 1 || units < 2 {
                let mut scratch = exec.attention[0].lock();
                for unit in 0..units {
                    work(unit, &mut scratch);
                }
            } else {
                let next = Chunks::new(units, threads, 1);
                exec.device.pool.run(&|thread| {
                    let mut scratch = exec.attention[thread].lock();
                    while let Some(taken) = next.next() {
                        for unit in taken {
                            work(unit, &mut scratch);
                        }
                    }
                });
            }
        };
    let one = runs.len() == 1;
    let span = span_of(&runs[0]);
    let segments = if span.is_empty() { 0..0 } else { span.start / SEGMENT..span.end.div_ceil(SEGMENT) };
    if one && threads > 1 && per_head(&runs[0]) <= SPLIT_KEYS_ROWS && segments.len() >= 2 {
        // One run of few rows over many keys. Units: (head, group of
        // segments); each writes the per-segment results of every row of
        // its head into its own part of `states` and `outs` (laid out
        // head, segment, row), then each row's segments are combined in
        // order.
        let run = &runs[0];
        let per_head = per_head(run);
        let n_seg = segments.len();
        let per_group = n_seg.div_ceil((2 * threads).div_ceil(kv_heads.max(1))).max(1);
        let groups = n_seg.div_ceil(per_group);
        let mut states = vec![Partial::default(); kv_heads * n_seg * per_head];
        let mut outs = vec![0.0f32; states.len() * d];
        let mut parts = Vec::with_capacity(kv_heads * groups);
        let (mut states_left, mut outs_left) = (&mut states[..], &mut outs[..]);
        for _ in 0..kv_heads {
            for i in 0..groups {
                let count = per_group.min(n_seg - i * per_group) * per_head;
                let (s, rest) = std::mem::take(&mut states_left).split_at_mut(count);
                let (o, rest_out) = std::mem::take(&mut outs_left).split_at_mut(count * d);
                (states_left, outs_left) = (rest, rest_out);
                parts.push(baton_core::loom::Mutex::new((s, o)));
            }
        }
        let work = |unit: usize, scratch: &mut baton_kernels::AttentionScratch| {
            let (g, i) = (unit / groups, unit % groups);
            let first = segments.start + i * per_group;
            let mine = first..(first + per_group).min(segments.end);
            let (Some(keys), Some(values)) = (kv(k, kn, g, run), kv(v, vn, g, run)) else {
                *failure.lock() = Some(missing_head(g));
                return;
            };
            let queries: Vec<Query<'_>> = (0..per_head).map(|r| query(run, g, r)).collect();
            let mut part = parts[unit].lock();
            let (states, outs) = &mut *part;
            if let Err(e) = attend_segments(&queries, keys, values, scale, mine, (states, outs), scratch) {
                *failure.lock() = Some(e);
            }
        };
        run_units(kv_heads * groups, false, &work);
        drop(parts);
        for g in 0..kv_heads {
            for r in 0..per_head {
                let at = |s: usize| (g * n_seg + s) * per_head + r;
                let results = (0..n_seg).map(|s| (states[at(s)], &outs[at(s) * d..(at(s) + 1) * d]));
                combine(results, sink(g, r), &mut out_rows[out_at(run, g, r)..][..d]);
            }
        }
    } else {
        let out = SharedPtr(out_rows.as_mut_ptr());
        // Units: (run, chunk of a head's rows, head), later (heavier, under
        // the causal mask) chunks of a run first. One run alone is cut into
        // enough chunks to give every thread work.
        let spread = if one { threads.div_ceil(kv_heads.max(1)) } else { 1 };
        let mut units = Vec::new();
        let mut work_total = 0;
        for (i, run) in runs.iter().enumerate() {
            let per_head = per_head(run);
            let chunks_per_head = per_head.div_ceil(ROWS_PER_UNIT).max(spread).min(per_head).max(1);
            let chunk = per_head.div_ceil(chunks_per_head).max(1);
            let chunks = per_head.div_ceil(chunk);
            for c in (0..chunks).rev() {
                units.extend((0..kv_heads).map(|g| (i, g, c * chunk..((c + 1) * chunk).min(per_head))));
            }
            work_total += per_head * kv_heads * d * span_of(run).len();
        }
        let work = |unit: usize, scratch: &mut baton_kernels::AttentionScratch| {
            let (i, g, ref rows) = units[unit];
            let run = &runs[i];
            let (Some(keys), Some(values)) = (kv(k, kn, g, run), kv(v, vn, g, run)) else {
                *failure.lock() = Some(missing_head(g));
                return;
            };
            let mut query_rows: Vec<QueryRow<'_>> = rows
                .clone()
                .map(|r| {
                    let Query { q, keys } = query(run, g, r);
                    // SAFETY: row (t, h) of the contiguous [T, H, D] output
                    // is `d` f32s inside it, and every (t, h) belongs to
                    // exactly one unit (one run holds token t, one head g,
                    // one chunk of its rows), so no two threads touch it.
                    let out = unsafe { std::slice::from_raw_parts_mut(out.get().add(out_at(run, g, r)), d) };
                    QueryRow { q, keys, out, sink: sink(g, r) }
                })
                .collect();
            if let Err(e) = attend(&mut query_rows, keys, values, scale, scratch) {
                *failure.lock() = Some(e);
            }
        };
        // Little work altogether: one thread, not the pool's wake-ups.
        run_units(units.len(), work_total < 64 * 1024, &work);
    }
    match failure.into_inner() {
        Some(e) => Err(err(e.to_string())),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::{block_table, runs};
    use baton_core::graph::ATTENTION_BLOCK;

    #[test]
    fn paged_runs_start_at_the_pool_and_a_table_entry_outside_it_is_an_error() {
        let got = runs(3, 4 * ATTENTION_BLOCK, Some((&[1, 1, 0], 128)), Some(2)).expect("runs");
        let got: Vec<_> = got.iter().map(|r| (r.tokens.clone(), r.base, r.slot)).collect();
        assert_eq!(got, [(0..2, 0, 1), (2..3, 0, 0)]);
        assert!(runs(1, 4 * ATTENTION_BLOCK, Some((&[2], 128)), Some(2)).is_err(), "a third sequence of two");
        assert_eq!(block_table(&[3, 0, 2], 4 * ATTENTION_BLOCK), Ok(vec![3, 0, 2]));
        for bad in [4, -1] {
            let err = block_table(&[0, bad], 4 * ATTENTION_BLOCK).expect_err("outside the pool");
            assert_eq!(err, format!("block table entry 1 is block {bad}; the pool holds 4"));
        }
    }

    #[test]
    fn rows_of_one_slot_in_a_row_are_one_run_and_a_slot_again_later_is_another() {
        let got = runs(5, 72, Some((&[2, 2, 0, 1, 2], 24)), None).expect("runs");
        let got: Vec<_> = got.iter().map(|r| (r.tokens.clone(), r.base, r.len)).collect();
        assert_eq!(got, [(0..2, 48, 24), (2..3, 0, 24), (3..4, 24, 24), (4..5, 48, 24)]);
        let whole = runs(3, 40, None, None).expect("one cache");
        assert_eq!(whole.iter().map(|r| (r.tokens.clone(), r.base, r.len)).collect::<Vec<_>>(), [(0..3, 0, 40)]);
    }

    #[test]
    fn a_slot_outside_the_caches_is_an_error() {
        for bad in [3, -1, i32::MAX] {
            let err = runs(2, 72, Some((&[0, bad], 24)), None).expect_err("a slot outside 0..3");
            assert!(err.contains(&format!("row 1 reads slot {bad}; the caches hold 3")), "{err}");
        }
    }
}
