//! A mixture of experts' ops: the router's top-k picks and the values at
//! them, each token's product by its chosen experts only, and the sum of
//! their weighted outputs.
//!
//! [`matmul_id`] gathers the rows routed to each expert (a counting sort of
//! the ids, rows kept in order within an expert), multiplies every expert's
//! rows by its matrix in one pass of the pool (`matmul_packed_each`: an
//! expert's packed weights are read once for all its rows, and a decode
//! step reads only the chosen experts'), then puts each result row back in
//! its place. A row's result depends on its own input and expert only (the
//! kernels' row invariance), so batched steps stay batch-invariant.

use baton_core::backend::StreamError;
use baton_core::graph::NodeId;
use baton_kernels::{matmul, matmul_packed_each, MatMut, MatRef, PackedWeights, Scratch, WeightMatrix};

use super::context::{node, node_error, Context, SharedPtr};
use super::workspace::{for_rows, Workspace};

/// Whether value `a` at index `ia` ranks above `b` at `ib` (see
/// [`Op::TopK`](baton_core::graph::Op::TopK)): the larger first, equal
/// values by index, NaN below every number.
fn ranks_above(a: f32, ia: usize, b: f32, ib: usize) -> bool {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => ia < ib,
        (true, false) => false,
        (false, true) => true,
        (false, false) => a > b || (a == b && ia < ib),
    }
}

/// The indices of the `k` largest values of `row`, largest first.
fn top_k_row(row: &[f32], out: &mut [i32]) {
    let k = out.len();
    let mut len = 0;
    for (i, &v) in row.iter().enumerate() {
        // Where `v` goes among those kept (each kept one came earlier).
        let at = (0..len).find(|&p| ranks_above(v, i, row[out[p] as usize], out[p] as usize)).unwrap_or(len);
        if at == k {
            continue;
        }
        let end = len.min(k - 1);
        out.copy_within(at..end, at + 1);
        out[at] = i as i32;
        len = (len + 1).min(k);
    }
}

pub(crate) fn top_k(exec: &Workspace, ctx: &Context<'_>, id: NodeId, k: usize) -> Result<(), StreamError> {
    let x_id = node(ctx, id).inputs[0];
    let x = ctx.f32s(x_id)?;
    let n = node(ctx, x_id).layout.shape.last();
    if n > i32::MAX as usize || k == 0 || k > n {
        return Err(node_error(ctx.graph, id, format!("top {k} of rows of {n}")));
    }
    // SAFETY: the op takes its output once, here.
    let out = SharedPtr(unsafe { ctx.out_i32(id)? }.as_mut_ptr());
    let rows = x.len() / n;
    for_rows(exec, rows, n, &|range| {
        for r in range {
            // SAFETY: row ranges of different threads are disjoint, and
            // row `r`'s `k` indices lie inside the output of `rows × k`.
            let o = unsafe { std::slice::from_raw_parts_mut(out.get().add(r * k), k) };
            top_k_row(&x[r * n..(r + 1) * n], o);
        }
    });
    Ok(())
}

pub(crate) fn take_columns(ctx: &Context<'_>, id: NodeId) -> Result<(), StreamError> {
    let n = node(ctx, id);
    let (x, ids) = (ctx.f32s(n.inputs[0])?, ctx.indices(n.inputs[1])?);
    let (cols, k) = (node(ctx, n.inputs[0]).layout.shape.last(), n.layout.shape.last());
    // SAFETY: the op takes its output once, here.
    let out = unsafe { ctx.out_f32(id)? };
    for (i, (o, &c)) in out.iter_mut().zip(ids).enumerate() {
        let c = usize::try_from(c)
            .ok()
            .filter(|&c| c < cols)
            .ok_or_else(|| node_error(ctx.graph, id, format!("column {c} outside 0..{cols}")))?;
        *o = x[(i / k) * cols + c];
    }
    Ok(())
}

pub(crate) fn sum_rows(exec: &Workspace, ctx: &Context<'_>, id: NodeId) -> Result<(), StreamError> {
    let x_id = node(ctx, id).inputs[0];
    let x = ctx.f32s(x_id)?;
    let d = node(ctx, x_id).layout.shape.dims();
    let (rows, cols) = (d[d.len() - 2], d[d.len() - 1]);
    let matrices = x.len().checked_div(rows * cols).unwrap_or(0);
    // SAFETY: the op takes its output once, here.
    let out = SharedPtr(unsafe { ctx.out_f32(id)? }.as_mut_ptr());
    for_rows(exec, matrices, rows * cols, &|range| {
        for m in range {
            // SAFETY: matrix ranges of different threads are disjoint, and
            // matrix `m`'s sum is `cols` elements inside the output.
            let o = unsafe { std::slice::from_raw_parts_mut(out.get().add(m * cols), cols) };
            let x = &x[m * rows * cols..(m + 1) * rows * cols];
            o.fill(0.0);
            for (r, row) in x.chunks_exact(cols).enumerate() {
                if r == 0 {
                    o.copy_from_slice(row);
                } else {
                    o.iter_mut().zip(row).for_each(|(o, &v)| *o += v);
                }
            }
        }
    });
    Ok(())
}

/// Each token's rows times its chosen experts ([`Op::MatMulId`]); with
/// `share` (the layer's index of the weights' first expert,
/// [`Op::MatMulIdShare`]), only the rows whose expert the weights hold, the
/// others `-0.0`.
///
/// [`Op::MatMulId`]: baton_core::graph::Op::MatMulId
/// [`Op::MatMulIdShare`]: baton_core::graph::Op::MatMulIdShare
pub(crate) fn matmul_id(
    exec: &mut Workspace,
    ctx: &Context<'_>,
    id: NodeId,
    share: Option<usize>,
) -> Result<(), StreamError> {
    let n = node(ctx, id);
    let (x_id, w_id, ids_id) = (n.inputs[0], n.inputs[1], n.inputs[2]);
    let (x, ids) = (ctx.f32s(x_id)?, ctx.indices(ids_id)?);
    let xd = node(ctx, x_id).layout.shape.dims();
    let w_node = node(ctx, w_id);
    let (wd, ws) = (w_node.layout.shape.dims(), w_node.layout.strides);
    let (s, k_dim) = (xd[1], xd[2]);
    let (experts, nn) = (wd[0], wd[1]);
    let picks = n.layout.shape.dims()[1];
    let err = |m: String| node_error(ctx.graph, id, m);
    let rows = ids.len();
    let scratch = &mut exec.experts;
    // The same rows and ids as the product just before (gate, then up):
    // gathered, and quantized, once.
    let first = share.unwrap_or(0);
    let unchanged =
        scratch.last == Some((x_id, ids_id)) && scratch.starts.len() == experts + 1 && scratch.first == first;
    scratch.last = None;
    if !unchanged {
        // Each row's expert among the weights' (`None`: another share's).
        let local = |e: i32| -> Result<Option<usize>, StreamError> {
            let outside = || err(format!("expert {e} outside 0..{experts}"));
            let global = usize::try_from(e).map_err(|_| outside())?;
            match global.checked_sub(first).filter(|&l| l < experts) {
                Some(l) => Ok(Some(l)),
                None if share.is_some() => Ok(None),
                None => Err(outside()),
            }
        };
        // Rows per expert, then each gathered row's output row (a counting
        // sort: rows stay in order within an expert).
        scratch.starts.clear();
        scratch.starts.resize(experts + 1, 0);
        for &e in ids {
            if let Some(l) = local(e)? {
                scratch.starts[l + 1] += 1;
            }
        }
        for e in 0..experts {
            scratch.starts[e + 1] += scratch.starts[e];
        }
        let held = scratch.starts[experts];
        scratch.order.clear();
        scratch.order.resize(held, 0);
        scratch.next.clone_from(&scratch.starts);
        for (r, &e) in ids.iter().enumerate() {
            if let Some(l) = local(e)? {
                scratch.order[scratch.next[l]] = r;
                scratch.next[l] += 1;
            }
        }
        scratch.first = first;
        scratch.x.resize(held * k_dim, 0.0);
        for (g, &r) in scratch.order.iter().enumerate() {
            // Output row r = t·picks + j reads input row t·S + j (or t·S).
            let (t, j) = (r / picks, r % picks);
            let src = (t * s + if s == 1 { 0 } else { j }) * k_dim;
            scratch.x[g * k_dim..(g + 1) * k_dim].copy_from_slice(&x[src..src + k_dim]);
        }
    }
    scratch.y.resize(scratch.order.len() * nn, 0.0);
    let starts = &scratch.starts;
    let w_bytes = ctx.bytes(w_id)?;
    let row_bytes = w_node.dtype.row_bytes(k_dim).unwrap_or(0);
    let extent = if nn == 0 { 0 } else { (nn - 1) * ws[1] + row_bytes };
    let matrix = |e: usize| -> Result<WeightMatrix<'_>, StreamError> {
        let data =
            w_bytes.get(e * ws[0]..e * ws[0] + extent).ok_or_else(|| err("expert outside its storage".into()))?;
        Ok(WeightMatrix { dtype: w_node.dtype, data, rows: nn, cols: k_dim, row_stride_bytes: ws[1] })
    };
    let chosen: Vec<usize> = (0..experts).filter(|&e| starts[e + 1] > starts[e]).collect();
    let kernel_err = |e: baton_kernels::KernelError| err(e.to_string());
    let mut packed: Vec<std::sync::Arc<PackedWeights>> = Vec::with_capacity(chosen.len());
    if let Some(cache) = ctx.packed_cache(w_id) {
        // The first step that reads these experts packs them all, so no
        // later step stops to pack an expert chosen for the first time
        // (a model's warm-up step packs every expert of every layer).
        let packs = baton_kernels::packed::packable(w_node.dtype) && crate::packed_cache::enabled();
        if packs && chosen.iter().any(|&e| matrix(e).map_or(true, |m| cache.get(&m).is_none())) {
            for e in 0..experts {
                cache.get_or_pack(&matrix(e)?, &exec.device).map_err(kernel_err)?;
            }
        }
        for &e in &chosen {
            match cache.get_or_pack(&matrix(e)?, &exec.device).map_err(kernel_err)? {
                Some(p) => packed.push(p),
                None => break,
            }
        }
    }
    let xs: Vec<MatRef<'_>> = chosen
        .iter()
        .map(|&e| {
            let (a, b) = (starts[e], starts[e + 1]);
            MatRef::contiguous(&scratch.x[a * k_dim..b * k_dim], b - a, k_dim)
        })
        .collect();
    let mut ys: Vec<MatMut<'_>> = Vec::with_capacity(chosen.len());
    let mut rest = &mut scratch.y[..];
    for &e in &chosen {
        let count = starts[e + 1] - starts[e];
        let (mine, later) = std::mem::take(&mut rest).split_at_mut(count * nn);
        ys.push(MatMut::contiguous(mine, count, nn));
        rest = later;
    }
    let through_scratches = !chosen.is_empty() && packed.len() == chosen.len();
    if through_scratches {
        if scratch.scratches.len() < chosen.len() {
            scratch.scratches.resize_with(chosen.len(), Scratch::new);
        }
        // The rows each scratch quantized last are these, where nothing
        // has run since the product of the same rows and ids.
        scratch.scratches.iter_mut().for_each(|s| s.reuse_next(unchanged));
        let ws: Vec<&PackedWeights> = packed.iter().map(|p| &**p).collect();
        matmul_packed_each(&exec.device.pool, &ws, &xs, &mut ys, &mut scratch.scratches).map_err(kernel_err)?;
    } else {
        let mut one = exec.scratch[0].lock();
        for ((&e, xm), ym) in chosen.iter().zip(&xs).zip(ys.iter_mut()) {
            one.reuse_next(false);
            matmul(&exec.device.pool, &matrix(e)?, xm, ym, &mut one).map_err(kernel_err)?;
        }
    }
    drop((xs, ys));
    // SAFETY: the op takes its output once, here.
    let out = unsafe { ctx.out_f32(id)? };
    if scratch.order.len() < rows {
        // Rows of another share's experts.
        out.fill(-0.0);
    }
    for (g, &r) in scratch.order.iter().enumerate() {
        out[r * nn..(r + 1) * nn].copy_from_slice(&scratch.y[g * nn..(g + 1) * nn]);
    }
    // Only where the expert scratches quantized these rows may the next
    // product take them (the other path quantizes elsewhere).
    scratch.last = through_scratches.then_some((x_id, ids_id));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_takes_the_largest_first_ties_by_index_and_nan_last() {
        let mut out = [0; 3];
        top_k_row(&[0.5, 2.0, -1.0, 2.0, 1.0], &mut out);
        assert_eq!(out, [1, 3, 4]);
        top_k_row(&[f32::NAN, -5.0, f32::NAN, -7.0], &mut out);
        assert_eq!(out, [1, 3, 0]);
        let mut one = [0];
        top_k_row(&[3.0, 3.0, 3.0], &mut one);
        assert_eq!(one, [0]);
        let mut all = [0; 4];
        top_k_row(&[1.0, 4.0, 2.0, 3.0], &mut all);
        assert_eq!(all, [1, 3, 2, 0]);
    }
}
