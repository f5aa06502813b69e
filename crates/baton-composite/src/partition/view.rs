//! Views of split tensors: which dimension of a view carries the split, and
//! each device's layout of it.
//!
//! A root tensor of dimensions `D`, split along `axis`, is seen as
//! `[outer, A, inner]` elements; device `d` holds `[outer, c_d, inner]`. A
//! view (any reshape, permute or narrow, given by element strides) keeps the
//! split if exactly one of its dimensions steps over the whole split axis
//! (its stride times its extent is `A * inner`, the "top" dimension), every
//! dimension stepping within the axis lies below the top one, and it does
//! not narrow the split axis. The top dimension becomes the view's split
//! axis (a dimension that is the split axis itself, same extent and stride,
//! is the top one even of extent 1); on each device it is shorter, strides over `outer` shrink, and the
//! others stay.

use std::ops::Range;

use baton_core::shape::{Layout, Shape};
use baton_core::DType;

/// A view of a split root, per device.
pub struct SplitView {
    /// The view's dimension that carries the split.
    pub axis: usize,
    /// Per device, its segments of that dimension.
    pub parts: Vec<Vec<Range<usize>>>,
    /// Per device, the view's layout over its part of the root.
    pub layouts: Vec<Layout>,
}

/// The split of `view` (an absolute layout over the storage of a contiguous
/// root of `root_dims`, split along `axis` into `parts`), or `None` when the
/// view cuts across the split.
pub fn split_view(
    dtype: DType,
    root_dims: &[usize],
    axis: usize,
    parts: &[Vec<Range<usize>>],
    view: &Layout,
) -> Option<SplitView> {
    if dtype.is_quantized() {
        return quantized_rows(dtype, root_dims, axis, parts, view);
    }
    split_elements(dtype.block_bytes(), root_dims, axis, parts, view)
}

/// [`split_view`] of a root of block-quantized rows (a quantized KV cache):
/// a view that keeps every row whole and contiguous is a view of a root
/// whose elements are the rows' bytes; any other one is taken only whole.
fn quantized_rows(
    dtype: DType,
    root_dims: &[usize],
    axis: usize,
    parts: &[Vec<Range<usize>>],
    view: &Layout,
) -> Option<SplitView> {
    let whole = view.offset == 0 && view.shape.dims() == root_dims;
    let (rank, root_rank) = (view.shape.rank(), root_dims.len());
    let cols = root_dims[root_rank - 1];
    let rows_kept = axis + 1 < root_rank
        && view.shape.last() == cols
        && (cols == 1 || view.strides[rank - 1] == dtype.block_bytes());
    let row_bytes = dtype.row_bytes(cols)?;
    if !rows_kept {
        return whole.then(|| identity(dtype, root_dims, axis, parts));
    }
    let mut bytes_root = root_dims.to_vec();
    bytes_root[root_rank - 1] = row_bytes;
    let mut bytes_view = *view;
    let mut dims = view.shape.dims().to_vec();
    dims[rank - 1] = row_bytes;
    bytes_view.shape = Shape::new(&dims).ok()?;
    bytes_view.strides[rank - 1] = 1;
    let mut split = split_elements(1, &bytes_root, axis, parts, &bytes_view)?;
    for layout in &mut split.layouts {
        let mut local = layout.shape.dims().to_vec();
        local[rank - 1] = cols;
        layout.shape = Shape::new(&local).ok()?;
        layout.strides[rank - 1] = dtype.block_bytes();
    }
    Some(split)
}

/// [`split_view`] of a root of elements of `e` bytes.
fn split_elements(
    e: usize,
    root_dims: &[usize],
    axis: usize,
    parts: &[Vec<Range<usize>>],
    view: &Layout,
) -> Option<SplitView> {
    let a = root_dims[axis];
    let inner: usize = root_dims[axis + 1..].iter().product();
    let outer_stride = a * inner;
    let offset = view.offset / e;
    let (outer_index, rest) = (offset / outer_stride, offset % outer_stride);
    if rest / inner != 0 {
        return None;
    }
    let dims = view.shape.dims();
    let strides: Vec<usize> = view.strides().iter().map(|s| s / e).collect();
    // The split axis itself where the view keeps it whole, even of extent 1
    // (one key head held by every device: its permuted view's other
    // dimensions must not take the split), else the one stepping over it.
    let top = (0..dims.len()).find(|&i| dims[i] == a && strides[i] == inner).or_else(|| {
        (0..dims.len()).find(|&i| dims[i] > 1 && strides[i] < outer_stride && strides[i] * dims[i] == outer_stride)
    })?;
    let step = strides[top];
    // Units of the top dimension per index of the split axis, or the reverse.
    let scale = |i: usize| -> Option<usize> {
        if step <= inner {
            inner.is_multiple_of(step).then_some(i * (inner / step))
        } else {
            (step.is_multiple_of(inner) && i.is_multiple_of(step / inner)).then_some(i / (step / inner))
        }
    };
    for i in (0..dims.len()).filter(|&i| i != top && dims[i] > 1) {
        let (s, n) = (strides[i], dims[i]);
        // Over whole outer rows, or within one step of the top dimension.
        let fine = if s >= outer_stride { s % outer_stride == 0 } else { s * n <= step };
        if !fine {
            return None;
        }
    }
    let mut view_parts = Vec::with_capacity(parts.len());
    for segments in parts {
        let mapped: Option<Vec<Range<usize>>> = segments.iter().map(|r| Some(scale(r.start)?..scale(r.end)?)).collect();
        view_parts.push(mapped?);
    }
    let layouts = parts
        .iter()
        .enumerate()
        .map(|(d, segments)| {
            let local_a: usize = segments.iter().map(|r| r.len()).sum();
            let local_outer = local_a * inner;
            let mut local_dims = dims.to_vec();
            local_dims[top] = view_parts[d].iter().map(|r| r.len()).sum();
            let mut local = *view;
            for i in 0..dims.len() {
                if i != top && dims[i] > 1 && strides[i] >= outer_stride {
                    local.strides[i] = strides[i] / outer_stride * local_outer * e;
                }
            }
            local.shape = Shape::new(&local_dims).ok()?;
            local.offset = (outer_index * local_outer + rest % inner) * e;
            Some(local)
        })
        .collect::<Option<Vec<Layout>>>()?;
    Some(SplitView { axis: top, parts: view_parts, layouts })
}

/// The whole root, seen as itself.
fn identity(dtype: DType, root_dims: &[usize], axis: usize, parts: &[Vec<Range<usize>>]) -> SplitView {
    let layouts = parts
        .iter()
        .map(|segments| {
            let mut dims = root_dims.to_vec();
            dims[axis] = segments.iter().map(|r| r.len()).sum();
            Shape::new(&dims).ok().and_then(|s| Layout::contiguous(dtype, s).ok())
        })
        .collect::<Option<Vec<Layout>>>();
    SplitView { axis, parts: parts.to_vec(), layouts: layouts.unwrap_or_default() }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The f32 cache `[heads, ctx, hd]`, split by heads into `parts`, seen
    /// permuted as `[ctx, heads, hd]` (how the graph writes new rows).
    fn permuted_cache(heads: usize, ctx: usize, hd: usize, parts: &[Vec<Range<usize>>]) -> SplitView {
        let shape = Shape::new(&[ctx, heads, hd]).expect("shape");
        let mut view = Layout::contiguous(DType::F32, shape).expect("layout");
        view.strides[0] = hd * 4;
        view.strides[1] = ctx * hd * 4;
        view.strides[2] = 4;
        split_view(DType::F32, &[heads, ctx, hd], 0, parts, &view).expect("a split view")
    }

    /// A q8_0 cache `[heads, ctx, hd]` split by heads, seen permuted as
    /// `[ctx, heads, hd]` and narrowed to its first positions: the split
    /// stays on the heads, each device's view keeps whole rows of blocks.
    #[test]
    fn a_quantized_cache_keeps_its_split_through_whole_row_views() {
        let (heads, ctx, hd) = (4, 16, 64);
        let row = DType::Q8_0.row_bytes(hd).expect("row");
        let parts = vec![vec![0..1], vec![1..4]];
        let root = Layout::contiguous(DType::Q8_0, Shape::new(&[heads, ctx, hd]).expect("shape")).expect("root");
        let mut permuted = root;
        permuted.shape = Shape::new(&[ctx, heads, hd]).expect("shape");
        permuted.strides[0] = root.strides[1];
        permuted.strides[1] = root.strides[0];
        let split = split_view(DType::Q8_0, &[heads, ctx, hd], 0, &parts, &permuted).expect("a split view");
        assert_eq!(split.axis, 1);
        assert_eq!(split.layouts[1].shape.dims(), [ctx, 3, hd]);
        assert_eq!(split.layouts[1].strides(), [row, ctx * row, DType::Q8_0.block_bytes()]);
        let mut narrowed = root;
        narrowed.shape = Shape::new(&[heads, 5, hd]).expect("shape");
        let split = split_view(DType::Q8_0, &[heads, ctx, hd], 0, &parts, &narrowed).expect("a split view");
        assert_eq!((split.axis, split.layouts[0].shape.dims()), (0, &[1, 5, hd][..]));
        // A view inside a row is not a split of whole rows.
        let mut inside = root;
        inside.shape = Shape::new(&[heads, ctx, 32]).expect("shape");
        assert!(split_view(DType::Q8_0, &[heads, ctx, hd], 0, &parts, &inside).is_none());
    }

    /// A cache of one key head `[1, ctx, hd]` held whole by two devices,
    /// seen permuted as `[ctx, 1, hd]`: the split stays on the head
    /// dimension (it once moved to the positions, and a write of 13 rows
    /// was narrowed to 64 positions).
    #[test]
    fn a_split_axis_of_extent_one_stays_the_split_axis_through_a_permute() {
        let (ctx, hd) = (64, 32);
        let parts = vec![vec![0..1], vec![0..1]];
        let split = permuted_cache(1, ctx, hd, &parts);
        assert_eq!(split.axis, 1);
        assert_eq!(split.parts, parts);
        assert!(split.layouts.iter().all(|l| l.shape.dims() == [ctx, 1, hd]));
    }

    /// Two heads split one per device, seen permuted: the head dimension
    /// carries the split, as before.
    #[test]
    fn a_split_head_dimension_carries_the_split_through_a_permute() {
        let parts = vec![vec![0..1], vec![1..2]];
        let split = permuted_cache(2, 8, 4, &parts);
        assert_eq!(split.axis, 1);
        assert_eq!(split.parts, parts);
    }
}
