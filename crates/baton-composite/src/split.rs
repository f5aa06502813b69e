//! How one tensor is held by the devices of a composite device.

use std::ops::Range;

use baton_core::DType;

use crate::error::CompositeError;

/// How the N devices of a composite device hold one tensor.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TensorSplit {
    /// Every device holds all of it (norms, embeddings, activations).
    Mirror,
    /// Device `d` holds the indices `parts[d]` of dimension `axis`: one or
    /// more segments (a fused tensor gives each device a piece of each),
    /// concatenated in order. Shares may be uneven (9 heads over 2 devices)
    /// and may overlap: an index held by several devices is replicated, each
    /// copy holding the same value (written from the same host data, or
    /// computed by each device from the same inputs, like the key head of a
    /// query-head group that two devices share).
    Split {
        /// The dimension cut.
        axis: usize,
        /// Per device, its segments of that dimension.
        parts: Vec<Vec<Range<usize>>>,
    },
    /// Every device holds a tensor of the full shape; the value is their sum
    /// (the output of a product whose inner dimension is split).
    Partial,
}

impl TensorSplit {
    /// `extent` indices of `axis` shared in proportion to `weights` (one per
    /// device; empty or invalid = even), each boundary a multiple of
    /// `granule` (a head, a quantization block). Every device gets at least
    /// one granule.
    pub fn proportional(
        axis: usize,
        extent: usize,
        devices: usize,
        weights: &[f32],
        granule: usize,
    ) -> Result<TensorSplit, CompositeError> {
        let granule = granule.max(1);
        let bad = |reason: String| CompositeError::BadSplit { dims: vec![extent], reason };
        if !extent.is_multiple_of(granule) {
            return Err(bad(format!("{extent} is not a multiple of the granule {granule}")));
        }
        let units = extent / granule;
        if units < devices {
            return Err(bad(format!("{units} units of {granule} cannot be shared by {devices} devices")));
        }
        let weights: Vec<f64> = if weights.len() == devices && weights.iter().all(|w| *w > 0.0) {
            weights.iter().map(|&w| f64::from(w)).collect()
        } else {
            vec![1.0; devices]
        };
        let total: f64 = weights.iter().sum();
        let mut bounds = vec![0usize];
        let mut acc = 0.0;
        for (d, w) in weights.iter().enumerate() {
            acc += w;
            let ideal = (acc / total * units as f64).round() as usize;
            // At least one unit for this device and each later one.
            let lo = bounds[d] + 1;
            let hi = units - (devices - 1 - d);
            bounds.push(ideal.clamp(lo, hi));
        }
        let parts = bounds.windows(2).map(|b| std::iter::once(b[0] * granule..b[1] * granule).collect()).collect();
        Ok(TensorSplit::Split { axis, parts })
    }

    /// Indices of the split dimension device `d` holds (its full extent for
    /// mirrored and partial tensors is not asked for).
    pub fn local_extent(parts: &[Vec<Range<usize>>], d: usize) -> usize {
        parts[d].iter().map(|r| r.len()).sum()
    }

    /// The dimensions device `d` holds of a tensor of `dims`.
    pub fn local_dims(&self, dims: &[usize], d: usize) -> Vec<usize> {
        let mut local = dims.to_vec();
        if let TensorSplit::Split { axis, parts } = self {
            local[*axis] = Self::local_extent(parts, d);
        }
        local
    }

    /// Whether no index is held by two devices (`parts` of a split).
    pub fn disjoint(parts: &[Vec<Range<usize>>]) -> bool {
        let mut all: Vec<&Range<usize>> = parts.iter().flatten().filter(|r| !r.is_empty()).collect();
        all.sort_by_key(|r| r.start);
        all.windows(2).all(|w| w[0].end <= w[1].start)
    }

    /// Checks that the split fits a tensor of `dtype` and `dims` over
    /// `devices` devices: segments inside the dimension, disjoint within
    /// each device (devices may share indices), together covering it, and
    /// whole quantization blocks when the last dimension is cut.
    pub fn check(&self, dtype: DType, dims: &[usize], devices: usize) -> Result<(), CompositeError> {
        let bad = |reason: String| CompositeError::BadSplit { dims: dims.to_vec(), reason };
        let TensorSplit::Split { axis, parts } = self else { return Ok(()) };
        if *axis >= dims.len() || parts.len() != devices {
            return Err(bad(format!("axis {axis} and {} parts for {devices} devices", parts.len())));
        }
        let mut covered = vec![false; dims[*axis]];
        for (d, segments) in parts.iter().enumerate() {
            // Overlaps between devices are replicas; within one device an
            // index would be held twice.
            let mut mine = vec![false; dims[*axis]];
            if segments.is_empty() || segments.iter().all(|r| r.is_empty()) {
                return Err(bad(format!("device {d} holds nothing")));
            }
            for r in segments {
                if r.end > dims[*axis] || r.start > r.end {
                    return Err(bad(format!("segment {r:?} outside 0..{}", dims[*axis])));
                }
                if *axis + 1 == dims.len() && dtype.row_bytes(r.start).zip(dtype.row_bytes(r.len())).is_none() {
                    return Err(bad(format!("segment {r:?} cuts a block of {}", dtype)));
                }
                for c in &mut mine[r.clone()] {
                    if std::mem::replace(c, true) {
                        return Err(bad(format!("segment {r:?} of device {d} overlaps another of its own")));
                    }
                }
                covered[r.clone()].fill(true);
            }
        }
        if covered.iter().any(|c| !c) {
            return Err(bad("the segments leave indices out".into()));
        }
        Ok(())
    }
}

/// A tensor seen as `[outer, axis, unit]`: bytes of each index of the split
/// dimension, so that a segment of it is a byte range of every outer row.
struct Strips {
    outer: usize,
    row_bytes: usize,
    offset: Box<dyn Fn(usize) -> usize>,
}

fn strips(dtype: DType, dims: &[usize], axis: usize) -> Strips {
    let outer: usize = dims[..axis].iter().product();
    let offset: Box<dyn Fn(usize) -> usize> = if axis + 1 == dims.len() {
        // Checked by `TensorSplit::check`: segment bounds are whole blocks.
        Box::new(move |e| dtype.row_bytes(e).unwrap_or(0))
    } else {
        let unit = dims[axis + 1..dims.len() - 1].iter().product::<usize>()
            * dtype.row_bytes(dims[dims.len() - 1]).unwrap_or(0);
        Box::new(move |e| e * unit)
    };
    Strips { outer, row_bytes: offset(dims[axis]), offset }
}

/// Device `d`'s bytes of the full tensor `full` (row-major bytes of `dtype`
/// and `dims`) under `split`: the whole tensor for mirrors, the first device
/// only for partial sums (the others hold zeros), its segments for splits.
pub fn scatter_bytes(split: &TensorSplit, dtype: DType, dims: &[usize], d: usize, full: &[u8]) -> Vec<u8> {
    match split {
        TensorSplit::Mirror => full.to_vec(),
        TensorSplit::Partial if d == 0 => full.to_vec(),
        TensorSplit::Partial => vec![0; full.len()],
        TensorSplit::Split { axis, parts } => {
            let s = strips(dtype, dims, *axis);
            let mut out = Vec::new();
            for o in 0..s.outer {
                let row = &full[o * s.row_bytes..(o + 1) * s.row_bytes];
                for r in &parts[d] {
                    out.extend_from_slice(&row[(s.offset)(r.start)..(s.offset)(r.end)]);
                }
            }
            out
        }
    }
}

/// The full tensor from every device's bytes: device 0's for mirrors, the
/// f32 sum for partial sums, the segments put back for splits.
pub fn gather_bytes(split: &TensorSplit, dtype: DType, dims: &[usize], locals: &[Vec<u8>], full: &mut [u8]) {
    match split {
        TensorSplit::Mirror => full.copy_from_slice(&locals[0]),
        TensorSplit::Partial => {
            full.fill(0);
            for local in locals {
                for (acc, v) in full.chunks_exact_mut(4).zip(local.chunks_exact(4)) {
                    let sum = f32::from_ne_bytes([acc[0], acc[1], acc[2], acc[3]])
                        + f32::from_ne_bytes([v[0], v[1], v[2], v[3]]);
                    acc.copy_from_slice(&sum.to_ne_bytes());
                }
            }
        }
        TensorSplit::Split { axis, parts } => {
            let s = strips(dtype, dims, *axis);
            for (d, local) in locals.iter().enumerate() {
                let mut at = 0;
                for o in 0..s.outer {
                    let row = o * s.row_bytes;
                    for r in &parts[d] {
                        let (a, b) = ((s.offset)(r.start), (s.offset)(r.end));
                        full[row + a..row + b].copy_from_slice(&local[at..at + b - a]);
                        at += b - a;
                    }
                }
            }
        }
    }
}
