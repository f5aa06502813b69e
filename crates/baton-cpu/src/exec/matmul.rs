//! Batched `x · wᵀ` with broadcast weight batches (grouped-query attention).

use baton_core::backend::StreamError;
use baton_core::graph::NodeId;
use baton_core::Parallel;
use baton_kernels::{
    matmul, matmul_columns, matmul_packed, matmul_packed_many, MatMut, MatRef, PackedWeights, WeightMatrix,
};

use super::context::{node, node_error, Context, SharedPtr};
use super::workspace::Workspace;

pub(crate) fn run(exec: &mut Workspace, ctx: &Context<'_>, id: NodeId) -> Result<(), StreamError> {
    let n = node(ctx, id);
    let (x_id, w_id) = (n.inputs[0], n.inputs[1]);
    // The same input as the product just before (q, k, v; gate, up): its
    // quantized rows are still valid (see `Workspace::last_product_input`).
    let unchanged = exec.last_product_input.replace(x_id) == Some(x_id);
    let x = ctx.f32s(x_id)?;
    let w_node = node(ctx, w_id);
    let w_bytes = ctx.bytes(w_id)?;
    let x4 = node(ctx, x_id).layout.shape.dims4();
    let w4 = w_node.layout.shape.dims4();
    let ws4 = w_node.layout.strides4();
    let (m, k, nn) = (x4[2], x4[3], w4[2]);
    let batches = x4[0] * x4[1];
    let (g0, g1) = (x4[0] / w4[0], x4[1] / w4[1]);
    let row_bytes = w_node.dtype.row_bytes(k).unwrap_or(0);
    let w_extent = if nn == 0 { 0 } else { (nn - 1) * ws4[2] + row_bytes };
    let weight = |b: usize| -> Result<WeightMatrix<'_>, StreamError> {
        let (b0, b1) = (b / x4[1], b % x4[1]);
        let start = (b0 / g0) * ws4[0] + (b1 / g1) * ws4[1];
        let data = w_bytes
            .get(start..start + w_extent)
            .ok_or_else(|| node_error(ctx.graph, id, "weight batch outside its storage"))?;
        Ok(WeightMatrix { dtype: w_node.dtype, data, rows: nn, cols: k, row_stride_bytes: ws4[2] })
    };
    // SAFETY: the op takes its output once, here.
    let out = unsafe { ctx.out_f32(id)? };
    let kernel_err = |e: baton_kernels::KernelError| node_error(ctx.graph, id, e.to_string());
    if batches == 1 {
        let w = weight(0)?;
        let xm = MatRef::contiguous(x, m, k);
        let mut ym = MatMut::contiguous(out, m, nn);
        let packed = match ctx.packed_cache(w_id) {
            Some(cache) => cache.get_or_pack(&w, &exec.device).map_err(kernel_err)?,
            _ => None,
        };
        let mut scratch = exec.scratch[0].lock();
        scratch.reuse_next(unchanged);
        let result = match packed {
            Some(packed) => matmul_packed(&exec.device.pool, &packed, &xm, &mut ym, &mut scratch),
            None => matmul(&exec.device.pool, &w, &xm, &mut ym, &mut scratch),
        };
        // Spent, whether or not the product reached its activations.
        scratch.reuse_next(false);
        return result.map_err(kernel_err);
    }
    // Many small products (attention heads): one thread per batch range.
    let out_ptr = SharedPtr(out.as_mut_ptr());
    let threads = exec.device.pool_threads();
    let error = baton_core::loom::Mutex::new(None);
    let task = |t: usize| {
        let range = baton_core::parallel::split_range(batches, threads, t, 1);
        let mut scratch = exec.scratch[t].lock();
        for b in range {
            let result = weight(b).and_then(|w| {
                let xm = MatRef::contiguous(&x[b * m * k..(b + 1) * m * k], m, k);
                // SAFETY: batch `b`'s output block of `m * nn` elements lies
                // inside the output, and batch ranges of threads are disjoint.
                let y = unsafe { std::slice::from_raw_parts_mut(out_ptr.get().add(b * m * nn), m * nn) };
                let mut ym = MatMut::contiguous(y, m, nn);
                matmul_columns(&w, &xm, &mut ym, 0..nn, &mut scratch).map_err(kernel_err)
            });
            if let Err(e) = result {
                *error.lock() = Some(e);
                return;
            }
        }
    };
    if threads == 1 || batches * m * nn * k < 64 * 1024 {
        task_all(&task, threads);
    } else {
        exec.device.pool.run(&task);
    }
    match error.into_inner() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Products of one input by several weights (a layer's q, k and v; gate
/// and up: consecutive products of the same input): in one pass of the
/// pool when every weight is one packed matrix of a single type
/// (`matmul_packed_many`: the activations quantized once, the pool woken
/// once, small matrices sharing the threads with large ones; the same bits
/// as one product at a time), else one product at a time.
pub(crate) fn run_many(exec: &mut Workspace, ctx: &Context<'_>, ids: &[NodeId]) -> Result<(), StreamError> {
    let Some(packed) = packed_group(exec, ctx, ids)? else {
        for &id in ids {
            run(exec, ctx, id)?;
        }
        return Ok(());
    };
    let first = ids[0];
    let x_id = node(ctx, first).inputs[0];
    let unchanged = exec.last_product_input.replace(x_id) == Some(x_id);
    let x = ctx.f32s(x_id)?;
    let x4 = node(ctx, x_id).layout.shape.dims4();
    let (m, k) = (x4[2], x4[3]);
    let mut outs = Vec::with_capacity(ids.len());
    for (&id, w) in ids.iter().zip(&packed) {
        // SAFETY: each op of the group takes its own output once, here; the
        // outputs are distinct nodes' storage, all live until later ops read
        // them, so the plan places none over another or over `x`.
        let out = unsafe { ctx.out_f32(id)? };
        outs.push(MatMut::contiguous(out, m, w.rows()));
    }
    let weights: Vec<&PackedWeights> = packed.iter().map(|w| &**w).collect();
    let mut scratch = exec.scratch[0].lock();
    scratch.reuse_next(unchanged);
    let result = matmul_packed_many(&exec.device.pool, &weights, &MatRef::contiguous(x, m, k), &mut outs, &mut scratch);
    // Spent, whether or not the products reached their activations.
    scratch.reuse_next(false);
    result.map_err(|e| node_error(ctx.graph, first, e.to_string()))
}

/// The packed weights of each product of `ids`, if every one is a single
/// (unbatched) product of the first one's input by a packed matrix of one
/// type.
fn packed_group(
    exec: &Workspace,
    ctx: &Context<'_>,
    ids: &[NodeId],
) -> Result<Option<Vec<std::sync::Arc<PackedWeights>>>, StreamError> {
    let Some(&first) = ids.first() else { return Ok(None) };
    let x_id = node(ctx, first).inputs[0];
    let x4 = node(ctx, x_id).layout.shape.dims4();
    let mut packed: Vec<std::sync::Arc<PackedWeights>> = Vec::with_capacity(ids.len());
    for &id in ids {
        let n = node(ctx, id);
        let w_id = n.inputs[1];
        let w_node = node(ctx, w_id);
        let (w4, ws4) = (w_node.layout.shape.dims4(), w_node.layout.strides4());
        let Some(cache) = ctx.packed_cache(w_id) else { return Ok(None) };
        if n.inputs[0] != x_id || x4[0] * x4[1] != 1 || w4[0] * w4[1] != 1 {
            return Ok(None);
        }
        let (k, rows) = (x4[3], w4[2]);
        let row_bytes = w_node.dtype.row_bytes(k).unwrap_or(0);
        let extent = if rows == 0 { 0 } else { (rows - 1) * ws4[2] + row_bytes };
        let data =
            ctx.bytes(w_id)?.get(..extent).ok_or_else(|| node_error(ctx.graph, id, "weights outside their storage"))?;
        let w = WeightMatrix { dtype: w_node.dtype, data, rows, cols: k, row_stride_bytes: ws4[2] };
        match cache.get_or_pack(&w, &exec.device).map_err(|e| node_error(ctx.graph, id, e.to_string()))? {
            Some(p) if packed.first().is_none_or(|f| f.dtype() == p.dtype()) => packed.push(p),
            _ => return Ok(None),
        }
    }
    Ok(Some(packed))
}

/// Runs every thread's share on the calling thread, in order.
fn task_all(task: &(dyn Fn(usize) + Sync), threads: usize) {
    for t in 0..threads {
        task(t);
    }
}
