//! The fused attention op: every query row over its key positions, split
//! over the pool by key-value head and chunks of rows, or, for a few rows
//! over many positions (a decode step), by key-value head and groups of
//! key segments whose results are combined afterwards (the kernels are
//! `baton_kernels::attend`, `attend_segments` and `combine`; each row's
//! bits do not depend on the split).

use baton_core::backend::StreamError;
use baton_core::graph::{NodeId, Op};
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

pub(crate) fn run<'a>(exec: &Workspace, ctx: &'a Context<'a>, id: NodeId) -> Result<(), StreamError> {
    let n = node(ctx, id);
    let Op::Attention { scale, window } = n.op else {
        return Err(node_error(ctx.graph, id, "not an attention node"));
    };
    let err = |m: String| node_error(ctx.graph, id, m);
    let (qn, kn, vn) = (node(ctx, n.inputs[0]), node(ctx, n.inputs[1]), node(ctx, n.inputs[2]));
    let positions = ctx.indices(n.inputs[3])?;
    let [t_len, heads, d] = qn.layout.shape.dims()[..] else { return Err(err("q is not [T, H, D]".into())) };
    let (kv_heads, s_len) = (kn.layout.shape.dims()[0], kn.layout.shape.dims()[1]);
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
    let kv = |bytes: &'a [u8], node: &baton_core::graph::Node, g: usize| -> Option<KvRows<'a>> {
        Some(KvRows {
            dtype: node.dtype,
            data: bytes.get(g * node.layout.strides[0]..)?,
            stride: node.layout.strides[1],
            dim: d,
            len: s_len,
        })
    };
    let ranges: Vec<_> = positions.iter().map(|&p| visible(p, window)).collect();
    // SAFETY: the op takes its output once, here.
    let out_rows = unsafe { ctx.out_f32(id)? };
    let group = heads / kv_heads.max(1);
    // Rows of a key-value head, token-major: row r is token r / group, head
    // g * group + r % group.
    let per_head = group * t_len;
    let threads = exec.device.pool_threads();
    let query =
        |g: usize, r: usize| Query { q: q_row(r / group, g * group + r % group), keys: ranges[r / group].clone() };
    let out_at = |g: usize, r: usize| ((r / group) * heads + g * group + r % group) * d;
    let span = {
        let seen = ranges.iter().filter(|r| !r.is_empty());
        let (lo, hi) = seen.fold((usize::MAX, 0), |(lo, hi), r| (lo.min(r.start), hi.max(r.end)));
        lo.min(hi)..hi
    };
    let segments = if span.is_empty() { 0..0 } else { span.start / SEGMENT..span.end.div_ceil(SEGMENT) };
    let failure = baton_core::loom::Mutex::new(None::<KernelError>);
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
    if threads > 1 && per_head <= SPLIT_KEYS_ROWS && segments.len() >= 2 {
        // Units: (head, group of segments); each writes the per-segment
        // results of every row of its head into its own part of `states`
        // and `outs` (laid out head, segment, row), then each row's
        // segments are combined in order.
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
            let (Some(keys), Some(values)) = (kv(k, kn, g), kv(v, vn, g)) else {
                *failure.lock() = Some(KernelError::BufferTooSmall { what: "key-value heads", needed: g, actual: 0 });
                return;
            };
            let queries: Vec<Query<'_>> = (0..per_head).map(|r| query(g, r)).collect();
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
                combine(results, &mut out_rows[out_at(g, r)..][..d]);
            }
        }
    } else {
        let out = SharedPtr(out_rows.as_mut_ptr());
        // Units: chunks of each head's rows, later (heavier, under the
        // causal mask) chunks first.
        let chunks_per_head =
            per_head.div_ceil(ROWS_PER_UNIT).max(threads.div_ceil(kv_heads.max(1))).min(per_head).max(1);
        let chunk = per_head.div_ceil(chunks_per_head).max(1);
        let chunks = per_head.div_ceil(chunk);
        let units = chunks * kv_heads;
        let work = |unit: usize, scratch: &mut baton_kernels::AttentionScratch| {
            let (c, g) = (chunks - 1 - unit / kv_heads, unit % kv_heads);
            let (Some(keys), Some(values)) = (kv(k, kn, g), kv(v, vn, g)) else {
                *failure.lock() = Some(KernelError::BufferTooSmall { what: "key-value heads", needed: g, actual: 0 });
                return;
            };
            let rows = c * chunk..((c + 1) * chunk).min(per_head);
            let mut query_rows: Vec<QueryRow<'_>> = rows
                .map(|r| {
                    let Query { q, keys } = query(g, r);
                    // SAFETY: row (t, h) of the contiguous [T, H, D] output
                    // is `d` f32s inside it, and every (t, h) belongs to
                    // exactly one unit (one head g, one chunk c), so no two
                    // threads touch it.
                    let out = unsafe { std::slice::from_raw_parts_mut(out.get().add(out_at(g, r)), d) };
                    QueryRow { q, keys, out }
                })
                .collect();
            if let Err(e) = attend(&mut query_rows, keys, values, scale, scratch) {
                *failure.lock() = Some(e);
            }
        };
        let work_per_unit = chunk * d * span.len();
        // Little work altogether: one thread, not the pool's wake-ups.
        run_units(units, work_per_unit * units < 64 * 1024, &work);
    }
    match failure.into_inner() {
        Some(e) => Err(err(e.to_string())),
        None => Ok(()),
    }
}
