//! A recurrent layer's state-carrying ops ([`Op::SsmConv`],
//! [`Op::GatedDeltaNet`]): each takes the rows in order and writes its
//! first input, the slots' state, in place. The work is split over
//! channels (convolution) or heads (delta rule): a thread owns its
//! channels' or heads' state in every slot and their outputs in every row,
//! so no two threads touch the same state, and a row's result does not
//! depend on the split.
//!
//! [`Op::SsmConv`]: baton_core::graph::Op::SsmConv
//! [`Op::GatedDeltaNet`]: baton_core::graph::Op::GatedDeltaNet

use baton_core::backend::StreamError;
use baton_core::graph::NodeId;
use baton_core::DType;
use baton_kernels::delta_chunk::{delta_rule_chunk, ChunkScratch};
use baton_kernels::recurrent::{conv_step, delta_rule_step};

use super::context::{node, node_error, Context, SharedPtr};
use super::workspace::{for_rows, Workspace};

/// The state input of `id` as a mutable f32 slice, checked not to overlap
/// any other input of the op.
///
/// # Safety
///
/// The caller must not hold another slice of the state while this one
/// lives (the op takes it once).
#[allow(clippy::mut_from_ref)]
unsafe fn state_of<'a>(ctx: &'a Context<'_>, id: NodeId) -> Result<&'a mut [f32], StreamError> {
    // SAFETY: the caller's guarantee.
    unsafe { state_input(ctx, id, 0) }
}

/// Input `input` of `id`, a state the op writes in place, as a mutable f32
/// slice, checked not to overlap any other input of the op.
///
/// # Safety
///
/// The caller must not hold another slice of that input while this one
/// lives (the op takes it once).
#[allow(clippy::mut_from_ref)]
unsafe fn state_input<'a>(ctx: &'a Context<'_>, id: NodeId, input: usize) -> Result<&'a mut [f32], StreamError> {
    let n = node(ctx, id);
    let state = n.inputs[input];
    let s = node(ctx, state);
    if s.dtype != DType::F32 || !s.layout.is_contiguous(DType::F32) {
        return Err(node_error(ctx.graph, id, "the state must be contiguous f32"));
    }
    let raw = ctx.raw(state)?;
    let bytes = s.layout.shape.elems() * 4;
    if !(raw.ptr() as usize).is_multiple_of(4) {
        return Err(node_error(ctx.graph, id, "the state is not 4-byte aligned"));
    }
    let (s0, s1) = (raw.ptr() as usize, raw.ptr() as usize + bytes);
    for (_, &other) in n.inputs.iter().enumerate().filter(|&(i, _)| i != input) {
        let b = ctx.bytes(other)?;
        let (i0, i1) = (b.as_ptr() as usize, b.as_ptr() as usize + b.len());
        if i0 < s1 && s0 < i1 {
            return Err(node_error(ctx.graph, id, "the state overlaps another input"));
        }
    }
    // SAFETY: `raw` checked that the state's extent lies in its storage,
    // the pointer is aligned (checked), no other input of this op overlaps
    // it (checked), the op's output is a separate block (module doc of
    // `exec`), and the caller holds no other view of it.
    Ok(unsafe { std::slice::from_raw_parts_mut(raw.ptr().cast(), s.layout.shape.elems()) })
}

/// Each row's slot, checked against `slots` slots.
fn checked_slots(ctx: &Context<'_>, id: NodeId, input: usize, slots: usize) -> Result<Vec<usize>, StreamError> {
    ctx.indices(node(ctx, id).inputs[input])?
        .iter()
        .map(|&s| {
            usize::try_from(s)
                .ok()
                .filter(|&s| s < slots)
                .ok_or_else(|| node_error(ctx.graph, id, format!("slot {s} outside 0..{slots}")))
        })
        .collect()
}

/// An op's kept states (inputs `first` and `first + 1`, see
/// [`KeptStates`](baton_core::graph::KeptStates)): where the state after
/// each row is copied, `per_slot` values a row.
struct Kept {
    rows: SharedPtr<f32>,
    /// Per row of the op, its row of `rows`, if kept.
    keep: Vec<Option<usize>>,
    per_slot: usize,
}

impl Kept {
    /// The op's kept states, if it has them, each `keep` checked.
    fn of(ctx: &Context<'_>, id: NodeId, first: usize) -> Result<Option<Kept>, StreamError> {
        let n = node(ctx, id);
        if n.inputs.len() < first + 2 {
            return Ok(None);
        }
        let dims = node(ctx, n.inputs[first]).layout.shape.dims().to_vec();
        let (count, per_slot) = (dims[0], dims[1..].iter().product());
        let keep = ctx
            .indices(n.inputs[first + 1])?
            .iter()
            .map(|&k| match k {
                -1 => Ok(None),
                k => usize::try_from(k)
                    .ok()
                    .filter(|&k| k < count)
                    .map(Some)
                    .ok_or_else(|| node_error(ctx.graph, id, format!("kept row {k} outside -1..{count}"))),
            })
            .collect::<Result<_, _>>()?;
        // SAFETY: the kept states are taken once, here.
        let rows = SharedPtr(unsafe { state_input(ctx, id, first)? }.as_mut_ptr());
        Ok(Some(Kept { rows, keep, per_slot }))
    }

    /// Copies `part` (the values at `offset` of one slot's state, after
    /// row `t`) into row `t`'s kept row, if it has one.
    ///
    /// # Safety
    /// `offset + part.len()` is at most `per_slot`, and no other thread
    /// writes those values of any kept row during the call.
    unsafe fn keep(&self, t: usize, offset: usize, part: &[f32]) {
        if let Some(row) = self.keep[t] {
            // SAFETY: row `row` is inside the kept states (checked in
            // `of`), the values inside the row (the caller's guarantee),
            // and no other thread touches them.
            let to = unsafe {
                std::slice::from_raw_parts_mut(self.rows.get().add(row * self.per_slot + offset), part.len())
            };
            to.copy_from_slice(part);
        }
    }
}

/// [`Op::SsmConv`](baton_core::graph::Op::SsmConv).
pub(crate) fn ssm_conv(exec: &Workspace, ctx: &Context<'_>, id: NodeId) -> Result<(), StreamError> {
    let n = node(ctx, id);
    let dims = node(ctx, n.inputs[0]).layout.shape.dims().to_vec();
    let (slots, channels, past) = (dims[0], dims[1], dims[2]);
    let x = ctx.f32s(n.inputs[1])?;
    let w = ctx.f32s(n.inputs[2])?;
    let rows = checked_slots(ctx, id, 3, slots)?;
    let positions = ctx.indices(n.inputs[4])?;
    // SAFETY: the state is taken once, here.
    let state = SharedPtr(unsafe { state_of(ctx, id)? }.as_mut_ptr());
    // SAFETY: the op takes its output once, here.
    let out = SharedPtr(unsafe { ctx.out_f32(id)? }.as_mut_ptr());
    let kept = Kept::of(ctx, id, 5)?;
    let taps = past + 1;
    for_rows(exec, channels, rows.len() * taps, &|range| {
        for (t, (&slot, &pos)) in rows.iter().zip(positions).enumerate() {
            for c in range.clone() {
                // SAFETY: channel `c` of slot `slot` is `past` values inside
                // the state ([S, C, K-1]; slot checked), and channel ranges
                // of different threads are disjoint (split_range).
                let p = unsafe { std::slice::from_raw_parts_mut(state.get().add((slot * channels + c) * past), past) };
                if pos == 0 {
                    p.fill(0.0);
                }
                let y = conv_step(p, x[t * channels + c], &w[c * taps..(c + 1) * taps]);
                if let Some(kept) = &kept {
                    // SAFETY: channel `c`'s values of a slot, this thread's
                    // alone (disjoint channel ranges).
                    unsafe { kept.keep(t, c * past, p) };
                }
                // SAFETY: row `t`, channel `c` is inside the output [T, C];
                // disjoint channels per thread.
                unsafe { *out.get().add(t * channels + c) = y };
            }
        }
    });
    Ok(())
}

/// [`Op::GatedDeltaNet`](baton_core::graph::Op::GatedDeltaNet): row by
/// row, or with `chunk` above 0 each run of a slot's consecutive positions
/// in chunks of that many rows ([`delta_rule_chunk`]).
pub(crate) fn gated_delta_net(
    exec: &Workspace,
    ctx: &Context<'_>,
    id: NodeId,
    scale: f32,
    chunk: usize,
) -> Result<(), StreamError> {
    let n = node(ctx, id);
    let sd = node(ctx, n.inputs[0]).layout.shape.dims().to_vec();
    let qd = node(ctx, n.inputs[1]).layout.shape.dims().to_vec();
    let (slots, heads, dv, dk) = (sd[0], sd[1], sd[2], sd[3]);
    let key_heads = qd[1];
    let (q, k, v) = (ctx.f32s(n.inputs[1])?, ctx.f32s(n.inputs[2])?, ctx.f32s(n.inputs[3])?);
    let (g, beta) = (ctx.f32s(n.inputs[4])?, ctx.f32s(n.inputs[5])?);
    let rows = checked_slots(ctx, id, 6, slots)?;
    let positions = ctx.indices(n.inputs[7])?;
    // SAFETY: the state is taken once, here.
    let state = SharedPtr(unsafe { state_of(ctx, id)? }.as_mut_ptr());
    // SAFETY: the op takes its output once, here.
    let out = SharedPtr(unsafe { ctx.out_f32(id)? }.as_mut_ptr());
    let per_head = dv * dk;
    let kept = Kept::of(ctx, id, 8)?;
    // Kept states are those after each row: the rows are taken one by one.
    if chunk > 0 && kept.is_none() {
        let shape = HeadShape { heads, key_heads, dk, dv, scale, chunk };
        let inputs = TokenInputs { q, k, v, g, beta };
        for_rows(exec, heads, rows.len() * per_head * 3, &|range| {
            let mut scratch = RunScratch::default();
            for run in runs(&rows, positions) {
                for h in range.clone() {
                    // SAFETY: head `h` of slot `rows[run.start]` is `dv × dk`
                    // values inside the state (slot checked); head ranges of
                    // different threads are disjoint (split_range), so are
                    // their outputs.
                    unsafe {
                        chunked_run(&shape, &state, &out, &inputs, (&rows, positions), run.clone(), h, &mut scratch)
                    };
                }
            }
        });
        return Ok(());
    }
    for_rows(exec, heads, rows.len() * per_head * 4, &|range| {
        for (t, (&slot, &pos)) in rows.iter().zip(positions).enumerate() {
            for h in range.clone() {
                // SAFETY: head `h` of slot `slot` is `dv × dk` values inside
                // the state ([S, H, Dv, Dk]; slot checked); head ranges of
                // different threads are disjoint (split_range).
                let s =
                    unsafe { std::slice::from_raw_parts_mut(state.get().add((slot * heads + h) * per_head), per_head) };
                if pos == 0 {
                    s.fill(0.0);
                }
                let kh = h % key_heads;
                let qk = (t * key_heads + kh) * dk;
                let vh = (t * heads + h) * dv;
                let gh = t * heads + h;
                // SAFETY: row `t`, head `h` is `dv` values inside the output
                // [T, H, Dv]; disjoint heads per thread.
                let o = unsafe { std::slice::from_raw_parts_mut(out.get().add(vh), dv) };
                let decay = g[gh].exp();
                delta_rule_step(s, (&q[qk..qk + dk], &k[qk..qk + dk], &v[vh..vh + dv]), decay, beta[gh], scale, o);
                if let Some(kept) = &kept {
                    // SAFETY: head `h`'s values of a slot, this thread's
                    // alone (disjoint head ranges).
                    unsafe { kept.keep(t, h * per_head, s) };
                }
            }
        }
    });
    Ok(())
}

/// Runs of rows `start..end` of one slot at consecutive positions, in order.
fn runs<'a>(rows: &'a [usize], positions: &'a [i32]) -> impl Iterator<Item = std::ops::Range<usize>> + 'a {
    let mut start = 0;
    std::iter::from_fn(move || {
        if start >= rows.len() {
            return None;
        }
        let mut end = start + 1;
        while end < rows.len() && rows[end] == rows[start] && positions[end] == positions[end - 1].wrapping_add(1) {
            end += 1;
        }
        let run = start..end;
        start = end;
        Some(run)
    })
}

/// The sizes of a chunked delta rule's heads.
struct HeadShape {
    heads: usize,
    key_heads: usize,
    dk: usize,
    dv: usize,
    scale: f32,
    chunk: usize,
}

/// The op's per-token inputs, every head's (`q`, `k` `[T, Hk, Dk]`, `v [T,
/// H, Dv]`, `g` and `beta` `[T, H]`).
#[derive(Clone, Copy)]
struct TokenInputs<'a> {
    q: &'a [f32],
    k: &'a [f32],
    v: &'a [f32],
    g: &'a [f32],
    beta: &'a [f32],
}

/// One thread's buffers for [`chunked_run`]: a chunk's rows of one head
/// gathered contiguous, and the kernel's scratch.
#[derive(Default)]
struct RunScratch {
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    g: Vec<f32>,
    beta: Vec<f32>,
    out: Vec<f32>,
    kernel: ChunkScratch,
}

/// Head `h` over rows `run` (one slot, consecutive positions), `chunk`
/// rows at a time: each chunk's rows of the head gathered, the chunked
/// rule applied to the slot's state, the outputs scattered back.
///
/// # Safety
/// `state` holds every slot's `[H, Dv, Dk]` state and `out` the `[T, H,
/// Dv]` output; the run's slot is inside the state, and no other thread
/// accesses head `h`'s state or outputs during the call.
#[allow(clippy::too_many_arguments)]
unsafe fn chunked_run(
    shape: &HeadShape,
    state: &SharedPtr<f32>,
    out: &SharedPtr<f32>,
    inputs: &TokenInputs<'_>,
    (rows, positions): (&[usize], &[i32]),
    run: std::ops::Range<usize>,
    h: usize,
    scratch: &mut RunScratch,
) {
    let HeadShape { heads, key_heads, dk, dv, scale, chunk } = *shape;
    let TokenInputs { q, k, v, g, beta } = *inputs;
    let per_head = dv * dk;
    // SAFETY: the caller's guarantee (slot checked, head owned).
    let s =
        unsafe { std::slice::from_raw_parts_mut(state.get().add((rows[run.start] * heads + h) * per_head), per_head) };
    if positions[run.start] == 0 {
        s.fill(0.0);
    }
    let kh = h % key_heads;
    let mut t0 = run.start;
    while t0 < run.end {
        let t1 = (t0 + chunk).min(run.end);
        let c = t1 - t0;
        let RunScratch { q: qs, k: ks, v: vs, g: gs, beta: bs, out: os, kernel } = scratch;
        for buf in [&mut *qs, &mut *ks, &mut *vs, &mut *gs, &mut *bs] {
            buf.clear();
        }
        for t in t0..t1 {
            let qk = (t * key_heads + kh) * dk;
            qs.extend_from_slice(&q[qk..qk + dk]);
            ks.extend_from_slice(&k[qk..qk + dk]);
            let vh = (t * heads + h) * dv;
            vs.extend_from_slice(&v[vh..vh + dv]);
            gs.push(g[t * heads + h]);
            bs.push(beta[t * heads + h]);
        }
        os.resize(c * dv, 0.0);
        delta_rule_chunk(s, (qs, ks, vs), (gs, bs), scale, os, kernel);
        for (i, t) in (t0..t1).enumerate() {
            // SAFETY: row `t`, head `h` is `dv` values inside the output
            // [T, H, Dv], this thread's alone (the caller's guarantee).
            let o = unsafe { std::slice::from_raw_parts_mut(out.get().add((t * heads + h) * dv), dv) };
            o.copy_from_slice(&os[i * dv..(i + 1) * dv]);
        }
        t0 = t1;
    }
}
