//! Every op but matmul: row-wise kernels over contiguous f32 tensors, row
//! lookup, and strided copies.

use baton_core::graph::{NodeId, Op, RopeMode};
use baton_kernels::ops as k;
use baton_kernels::recurrent;
use baton_kernels::{dequantize_row, quantize_row, WeightMatrix};

use super::context::{node, node_error, Context, SharedPtr};
use super::workspace::{for_rows, Workspace};
use baton_core::backend::StreamError;

pub(crate) fn run(exec: &mut Workspace, ctx: &Context<'_>, id: NodeId) -> Result<(), StreamError> {
    let n = node(ctx, id);
    match n.op.clone() {
        Op::GetRows => get_rows(exec, ctx, id),
        Op::Add | Op::Mul => broadcast(exec, ctx, id),
        Op::Scale(factor) => unary(exec, ctx, id, &|x, out| k::scale(x, factor, out)),
        Op::Silu => unary(exec, ctx, id, &|x, out| k::silu(x, out)),
        Op::Gelu => unary(exec, ctx, id, &|x, out| k::gelu(x, out)),
        Op::RmsNorm { eps } => unary(exec, ctx, id, &|x, out| k::rms_norm(x, eps, out)),
        Op::Sigmoid => unary(exec, ctx, id, &|x, out| recurrent::sigmoid(x, out)),
        Op::Softplus => unary(exec, ctx, id, &|x, out| recurrent::softplus(x, out)),
        Op::L2Norm { eps } => unary(exec, ctx, id, &|x, out| recurrent::l2_norm(x, eps, out)),
        Op::Softmax { scale, causal, window } => softmax(exec, ctx, id, scale, causal, window),
        Op::Rope { mode, dims, freq_base, freq_scale, yarn, rotated_pairs } => {
            rope(exec, ctx, id, mode, (dims, rotated_pairs), (freq_base, freq_scale), yarn)
        }
        Op::SwiGluClamped { alpha, limit } => swiglu_clamped(exec, ctx, id, alpha, limit),
        Op::CopyInto => copy_into(exec, ctx, id),
        Op::ScatterRows => scatter_rows(exec, ctx, id),
        Op::Contiguous => contiguous(exec, ctx, id),
        Op::Leaf | Op::View | Op::MatMul | Op::Attention { .. } => Ok(()),
        Op::MatMulId | Op::MatMulIdShare { .. } | Op::TopK { .. } | Op::TakeColumns | Op::SumRows => Ok(()),
        Op::SsmConv | Op::GatedDeltaNet { .. } => Ok(()),
    }
}

/// Runs `f(input_row, output_row)` over the rows of a unary op.
fn unary(
    exec: &Workspace,
    ctx: &Context<'_>,
    id: NodeId,
    f: &(dyn Fn(&[f32], &mut [f32]) + Sync),
) -> Result<(), StreamError> {
    let x = ctx.f32s(node(ctx, id).inputs[0])?;
    let cols = node(ctx, id).layout.shape.last();
    // SAFETY: the op takes its output once, here.
    let out = SharedPtr(unsafe { ctx.out_f32(id)? }.as_mut_ptr());
    let rows = x.len() / cols.max(1);
    for_rows(exec, rows, cols, &|range| {
        for r in range {
            // SAFETY: row ranges of different threads are disjoint
            // (split_range), each row is `cols` elements inside the output.
            let o = unsafe { std::slice::from_raw_parts_mut(out.get().add(r * cols), cols) };
            f(&x[r * cols..(r + 1) * cols], o);
        }
    });
    Ok(())
}

/// gpt-oss's clamped SwiGLU of two tensors of one shape (see
/// [`Op::SwiGluClamped`]).
fn swiglu_clamped(exec: &Workspace, ctx: &Context<'_>, id: NodeId, alpha: f32, limit: f32) -> Result<(), StreamError> {
    let n = node(ctx, id);
    let (gate, up) = (ctx.f32s(n.inputs[0])?, ctx.f32s(n.inputs[1])?);
    let cols = n.layout.shape.last().max(1);
    // SAFETY: the op takes its output once, here.
    let out = SharedPtr(unsafe { ctx.out_f32(id)? }.as_mut_ptr());
    for_rows(exec, gate.len() / cols, cols, &|range| {
        for r in range {
            // SAFETY: disjoint rows per thread, inside the output.
            let o = unsafe { std::slice::from_raw_parts_mut(out.get().add(r * cols), cols) };
            k::swiglu_clamped(&gate[r * cols..(r + 1) * cols], &up[r * cols..(r + 1) * cols], alpha, limit, o);
        }
    });
    Ok(())
}

fn broadcast(exec: &Workspace, ctx: &Context<'_>, id: NodeId) -> Result<(), StreamError> {
    let n = node(ctx, id);
    let is_add = matches!(n.op, Op::Add);
    let (a, b) = (ctx.f32s(n.inputs[0])?, ctx.f32s(n.inputs[1])?);
    let a4 = n.layout.shape.dims4();
    let b4 = node(ctx, n.inputs[1]).layout.shape.dims4();
    let cols = a4[3];
    // SAFETY: the op takes its output once, here.
    let out = SharedPtr(unsafe { ctx.out_f32(id)? }.as_mut_ptr());
    let rows = a.len() / cols.max(1);
    for_rows(exec, rows, cols, &|range| {
        for r in range {
            let (i2, rest) = (r % a4[2], r / a4[2]);
            let (i1, i0) = (rest % a4[1], rest / a4[1]);
            let br = ((i0 % b4[0]) * b4[1] + (i1 % b4[1])) * b4[2] + (i2 % b4[2]);
            // SAFETY: disjoint rows per thread, inside the output.
            let o = unsafe { std::slice::from_raw_parts_mut(out.get().add(r * cols), cols) };
            let x = &a[r * cols..(r + 1) * cols];
            if b4[3] == cols {
                let y = &b[br * cols..(br + 1) * cols];
                if is_add {
                    k::add(x, y, o)
                } else {
                    k::mul(x, y, o)
                }
            } else {
                let y = b[br];
                for (o, &x) in o.iter_mut().zip(x) {
                    *o = if is_add { x + y } else { x * y };
                }
            }
        }
    });
    Ok(())
}

fn softmax(
    exec: &Workspace,
    ctx: &Context<'_>,
    id: NodeId,
    scale: f32,
    causal: bool,
    window: Option<usize>,
) -> Result<(), StreamError> {
    let n = node(ctx, id);
    let x = ctx.f32s(n.inputs[0])?;
    let positions = match n.inputs.get(1) {
        Some(&p) => Some(ctx.indices(p)?),
        None => None,
    };
    let d4 = n.layout.shape.dims4();
    let (t_len, s_len) = (d4[2], d4[3]);
    // SAFETY: the op takes its output once, here.
    let out = SharedPtr(unsafe { ctx.out_f32(id)? }.as_mut_ptr());
    let rows = x.len() / s_len.max(1);
    for_rows(exec, rows, s_len, &|range| {
        for r in range {
            // SAFETY: disjoint rows per thread, inside the output.
            let o = unsafe { std::slice::from_raw_parts_mut(out.get().add(r * s_len), s_len) };
            k::scale(&x[r * s_len..(r + 1) * s_len], scale, o);
            if causal {
                // Query t sits at positions[t], or else at t + (S - T); later
                // keys are masked.
                let t = r % t_len;
                let visible = match positions {
                    Some(p) => usize::try_from(p[t]).map_or(0, |p| p + 1).min(s_len),
                    None => (t + 1 + s_len).saturating_sub(t_len).min(s_len),
                };
                o[visible..].fill(f32::NEG_INFINITY);
                // A sliding window hides the keys before its start too.
                if let Some(w) = window {
                    o[..visible.saturating_sub(w)].fill(f32::NEG_INFINITY);
                }
            }
            k::softmax_in_place(o);
        }
    });
    Ok(())
}

fn rope(
    exec: &Workspace,
    ctx: &Context<'_>,
    id: NodeId,
    mode: RopeMode,
    (dims, rotated_pairs): (usize, Option<usize>),
    frequencies: (f32, f32),
    yarn: Option<baton_core::graph::Yarn>,
) -> Result<(), StreamError> {
    let n = node(ctx, id);
    let x = ctx.f32s(n.inputs[0])?;
    let positions = ctx.indices(n.inputs[1])?;
    let d3 = n.layout.shape.dims();
    let (tokens, heads, head_dim) = (d3[0], d3[1], d3[2]);
    if let Some(&bad) = positions.iter().find(|&&p| p < 0) {
        return Err(node_error(ctx.graph, id, format!("negative position {bad}")));
    }
    let mode = match mode {
        RopeMode::Normal => baton_kernels::RopeMode::Normal,
        RopeMode::Neox => baton_kernels::RopeMode::NeoX,
    };
    // SAFETY: the op takes its output once, here.
    let out = SharedPtr(unsafe { ctx.out_f32(id)? }.as_mut_ptr());
    let row = heads * head_dim;
    let angles = {
        let mut cache = exec.rope.lock();
        cache.angles(positions.iter().map(|&p| p as usize), dims, frequencies, yarn.as_ref())
    };
    for_rows(exec, tokens, row, &|range| {
        for t in range {
            // SAFETY: disjoint token rows per thread, inside the output.
            let o = unsafe { std::slice::from_raw_parts_mut(out.get().add(t * row), row) };
            o.copy_from_slice(&x[t * row..(t + 1) * row]);
            for head in o.chunks_exact_mut(head_dim) {
                angles[t].apply_pairs(head, mode, rotated_pairs.unwrap_or(dims / 2));
            }
        }
    });
    Ok(())
}

fn get_rows(_exec: &Workspace, ctx: &Context<'_>, id: NodeId) -> Result<(), StreamError> {
    let n = node(ctx, id);
    let table = node(ctx, n.inputs[0]);
    let ids = ctx.indices(n.inputs[1])?;
    let bytes = ctx.bytes(n.inputs[0])?;
    let (vocab, width) = (table.layout.shape.dims()[0], table.layout.shape.dims()[1]);
    let stride = table.layout.strides[0];
    let row_bytes = table.dtype.row_bytes(width).unwrap_or(0);
    // A table packed for a matmul (a tied output projection) is read from
    // its packed form, whose rows unpack to the same bytes: the original
    // pages of a mapped file stay given back.
    let packed = ctx.packed_cache(n.inputs[0]).and_then(|cache| {
        let extent = if vocab == 0 { 0 } else { (vocab - 1) * stride + row_bytes };
        let data = bytes.get(..extent)?;
        cache.get(&WeightMatrix { dtype: table.dtype, data, rows: vocab, cols: width, row_stride_bytes: stride })
    });
    let mut unpacked = vec![0u8; if packed.is_some() { row_bytes } else { 0 }];
    let kernel_err = |e: baton_kernels::KernelError| node_error(ctx.graph, id, e.to_string());
    // SAFETY: the op takes its output once, here.
    let out = unsafe { ctx.out_f32(id)? };
    for (t, &row) in ids.iter().enumerate() {
        let row = usize::try_from(row)
            .ok()
            .filter(|&r| r < vocab)
            .ok_or_else(|| node_error(ctx.graph, id, format!("token id {row} outside 0..{vocab}")))?;
        let src = match &packed {
            Some(packed) => {
                packed.unpack_row(row, &mut unpacked).map_err(kernel_err)?;
                &unpacked[..]
            }
            None => &bytes[row * stride..row * stride + row_bytes],
        };
        dequantize_row(table.dtype, src, &mut out[t * width..(t + 1) * width]).map_err(kernel_err)?;
    }
    Ok(())
}

/// Element offsets (in bytes) of the outer rows of a layout, in row-major
/// order of its shape.
fn row_offsets(layout: &baton_core::Layout) -> impl Iterator<Item = usize> + '_ {
    let d4 = layout.shape.dims4();
    let s4 = layout.strides4();
    (0..d4[0])
        .flat_map(move |a| (0..d4[1]).flat_map(move |b| (0..d4[2]).map(move |c| a * s4[0] + b * s4[1] + c * s4[2])))
}

/// The byte offset of outer row `r` (row-major order of its shape), or
/// `None` past the last row: [`row_offsets`] without walking the rows.
fn row_offset(layout: &baton_core::Layout, r: usize) -> Option<usize> {
    let d4 = layout.shape.dims4();
    let s4 = layout.strides4();
    if r >= d4[0] * d4[1] * d4[2] {
        return None;
    }
    let (c, rest) = (r % d4[2], r / d4[2]);
    let (b, a) = (rest % d4[1], rest / d4[1]);
    Some(a * s4[0] + b * s4[1] + c * s4[2])
}

fn copy_into(exec: &mut Workspace, ctx: &Context<'_>, id: NodeId) -> Result<(), StreamError> {
    let n = node(ctx, id);
    let d4 = n.layout.shape.dims4();
    let rows = d4[0] * d4[1] * d4[2];
    write_rows(exec, ctx, id, &mut (0..rows).map(Ok))
}

fn scatter_rows(exec: &mut Workspace, ctx: &Context<'_>, id: NodeId) -> Result<(), StreamError> {
    let n = node(ctx, id);
    let indices = ctx.indices(n.inputs[2])?;
    let d4 = n.layout.shape.dims4();
    // Destination row `i` of the outer dimension spans `per` inner rows.
    let (outer, per) =
        (n.layout.shape.dims()[0], d4.iter().product::<usize>() / d4[3] / n.layout.shape.dims()[0].max(1));
    let mut rows = indices.iter().flat_map(|&i| {
        let ok = usize::try_from(i).ok().filter(|&i| i < outer);
        (0..per).map(move |j| {
            ok.map(|i| i * per + j)
                .ok_or_else(|| node_error(ctx.graph, id, format!("row index {i} outside 0..{outer}")))
        })
    });
    write_rows(exec, ctx, id, &mut rows)
}

/// Writes the source's inner rows, in order, to the destination's inner
/// rows `targets` (indices into the destination's rows in row-major order),
/// converting f32 to the destination's type.
fn write_rows(
    exec: &mut Workspace,
    ctx: &Context<'_>,
    id: NodeId,
    targets: &mut dyn Iterator<Item = Result<usize, StreamError>>,
) -> Result<(), StreamError> {
    let n = node(ctx, id);
    let src = ctx.f32s(n.inputs[1])?;
    let dst = ctx.raw(id)?;
    let (dtype, layout) = (n.dtype, n.layout);
    let extent = layout.end_byte(dtype) - layout.offset;
    let (s0, s1) = (src.as_ptr() as usize, src.as_ptr() as usize + std::mem::size_of_val(src));
    let (d0, d1) = (dst.ptr() as usize, dst.ptr() as usize + extent);
    if s0 < d1 && d0 < s1 {
        return Err(node_error(ctx.graph, id, "source and target overlap"));
    }
    let cols = layout.shape.last();
    let row_bytes = dtype.row_bytes(cols).ok_or_else(|| node_error(ctx.graph, id, "rows of partial blocks"))?;
    // A quantized target's rows are whole blocks, contiguous (the builder
    // checks): each is written as one element of `row_bytes`.
    let (elems, elem, inner) = if dtype.is_quantized() {
        (1, row_bytes, row_bytes)
    } else {
        (cols, dtype.block_bytes(), layout.strides4()[3])
    };
    // Every target row first: a bad index or a short source fails before
    // any row is written.
    let offsets = targets
        .map(|t| row_offset(&layout, t?).ok_or_else(|| node_error(ctx.graph, id, "row outside the target")))
        .collect::<Result<Vec<usize>, _>>()?;
    if offsets.len() * cols > src.len() {
        return Err(node_error(ctx.graph, id, "more rows than the source"));
    }
    // The rows are scattered (a KV cache row per sequence and head, pages
    // apart) and seldom in cache: asking for the lines of the rows ahead
    // keeps several misses in flight instead of one (the 24 rows of a
    // batched decode step's keys took 8 us one miss after another).
    let span = elems.saturating_sub(1) * inner + elem;
    let prefetch = |r: usize| {
        if let Some(&offset) = offsets.get(r) {
            prefetch_lines(dst.ptr().wrapping_add(offset), span);
        }
    };
    (0..PREFETCH_ROWS).for_each(prefetch);
    exec.convert.resize(row_bytes, 0);
    for (r, (&offset, row)) in offsets.iter().zip(src.chunks_exact(cols.max(1))).enumerate() {
        prefetch(r + PREFETCH_ROWS);
        quantize_row(dtype, row, &mut exec.convert).map_err(|e| node_error(ctx.graph, id, e.to_string()))?;
        // SAFETY: `offset` is one of the layout's row offsets and
        // `offset + c * inner + elem <= extent` for every element `c` because
        // the layout's end byte bounds every element (a quantized row's
        // blocks are contiguous, so its end bounds the whole row), and
        // `storage` checked the extent; the source does not overlap
        // (checked above); the converted row is a separate host vector of
        // `row_bytes = elems * elem` bytes.
        unsafe { scatter_elems(exec.convert.as_ptr(), dst.ptr().add(offset), elems, elem, inner) };
    }
    Ok(())
}

/// Rows of a scatter whose lines are asked for ahead of writing them.
const PREFETCH_ROWS: usize = 16;

/// Asks the CPU to bring the cache lines of `bytes` bytes from `at` into
/// L1 (a hint: only `wrapping_add` arithmetic, and a prefetch never faults
/// whatever the address).
fn prefetch_lines(at: *const u8, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    for line in (0..bytes).step_by(64) {
        // SAFETY: SSE, the one feature `_mm_prefetch` needs, is part of
        // every x86_64 CPU; a prefetch never faults and changes nothing a
        // program can see.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at.wrapping_add(line).cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (at, bytes);
}

/// Copies `cols` elements of `elem` bytes, packed at `src`, to `dst` at a
/// stride of `inner` bytes: one copy when the target is packed too, and
/// fixed-size moves for the common element sizes (a KV cache row of f16 or
/// f32), not a `memcpy` call per element.
///
/// # Safety
/// `src` is readable for `cols * elem` bytes; `dst + c * inner` is writable
/// for `elem` bytes for every `c < cols`; the two do not overlap.
unsafe fn scatter_elems(src: *const u8, dst: *mut u8, cols: usize, elem: usize, inner: usize) {
    /// # Safety
    /// As [`scatter_elems`] with `elem == N`.
    unsafe fn fixed<const N: usize>(src: *const u8, dst: *mut u8, cols: usize, inner: usize) {
        for c in 0..cols {
            // SAFETY: element `c` of the packed source and of the strided
            // target (the caller's contract).
            unsafe {
                dst.add(c * inner).cast::<[u8; N]>().write_unaligned(src.add(c * N).cast::<[u8; N]>().read_unaligned())
            };
        }
    }
    // SAFETY: every arm reads `cols` packed elements at `src` and writes
    // them `inner` bytes apart at `dst`, which this function's contract
    // makes valid.
    unsafe {
        match elem {
            _ if inner == elem => std::ptr::copy_nonoverlapping(src, dst, cols * elem),
            2 => fixed::<2>(src, dst, cols, inner),
            4 => fixed::<4>(src, dst, cols, inner),
            _ => {
                for c in 0..cols {
                    std::ptr::copy_nonoverlapping(src.add(c * elem), dst.add(c * inner), elem);
                }
            }
        }
    }
}

fn contiguous(_exec: &Workspace, ctx: &Context<'_>, id: NodeId) -> Result<(), StreamError> {
    let n = node(ctx, id);
    let src_node = node(ctx, n.inputs[0]);
    let src = ctx.bytes(n.inputs[0])?;
    let dst = ctx.raw(id)?;
    let (dtype, layout) = (src_node.dtype, src_node.layout);
    let cols = layout.shape.last();
    let row_bytes = dtype.row_bytes(cols).unwrap_or(0);
    let inner = layout.strides4()[3];
    for (r, at) in row_offsets(&layout).enumerate() {
        // `at` is relative to the view's first byte, where `src` starts.
        if inner == dtype.block_bytes() || dtype.is_quantized() {
            let row = &src[at..at + row_bytes];
            // SAFETY: the output is contiguous, row `r` of `row_bytes` lies
            // inside it, and it does not overlap the input (module doc).
            unsafe { std::ptr::copy_nonoverlapping(row.as_ptr(), dst.ptr().add(r * row_bytes), row_bytes) };
        } else {
            let elem = dtype.block_bytes();
            for c in 0..cols {
                let e = &src[at + c * inner..at + c * inner + elem];
                // SAFETY: as above, element `c` of row `r`.
                unsafe { std::ptr::copy_nonoverlapping(e.as_ptr(), dst.ptr().add(r * row_bytes + c * elem), elem) };
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::{DType, Layout, Shape};

    #[test]
    fn row_offset_agrees_with_walking_the_rows() {
        for dims in [&[7][..], &[3, 5], &[2, 3, 4], &[2, 3, 4, 8]] {
            let mut layout = Layout::contiguous(DType::F16, Shape::new(dims).unwrap()).unwrap();
            // A permuted, padded view: strides that are not row-major.
            let rank = dims.len();
            if rank > 2 {
                layout.strides.swap(0, 1);
                layout.strides[0] += 6;
            }
            let walked: Vec<usize> = row_offsets(&layout).collect();
            let direct: Vec<usize> = (0..walked.len()).map(|r| row_offset(&layout, r).unwrap()).collect();
            assert_eq!(walked, direct, "{dims:?}");
            assert_eq!(row_offset(&layout, walked.len()), None);
        }
    }
}
