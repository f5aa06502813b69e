//! Weights read straight from a file's pages, each inner device mapping
//! only its own share.
//!
//! A tensor-parallel weight is held split: device `d` holds the indices
//! `parts[d]` of one dimension. When that dimension is the outermost one
//! that is not 1 and a device holds one segment of it (a matrix cut by
//! rows, a bias cut in two, any mirrored tensor), the device's share is one
//! contiguous byte range of the file, and a device that can map files
//! ([`Device::map_file`]) reads it there: nothing is copied, and what its
//! kernels derive from it (the CPU's packed matrices) replaces it in memory,
//! as on one device.
//!
//! A matrix cut along its rows' length (the inner dimension of a product)
//! has shares strided through the file. There each device maps the whole
//! tensor's range and reads its share as a strided view (a *windowed*
//! tensor, [`SplitTensor::windowed`]): its kernels pack the share from the
//! file's pages and give them back, so each device still holds only its
//! share, packed, and nothing is copied. An MPI rank's stand-in for another
//! rank's device maps nothing. Every share of a device that cannot map
//! (Vulkan) is copied as before.

use std::ops::Range;

use baton_core::backend::{Buffer, Device, FileRange, TensorRef};
use baton_core::DType;

use crate::buffer::{CompositeBuffer, SplitTensor};
use crate::device::CompositeDevice;
use crate::error::CompositeError;
use crate::split::TensorSplit;

/// The bytes device `d`'s share of a tensor of `dtype` and `dims` (stored
/// contiguously, rows of whole blocks) occupies in the whole tensor's
/// bytes, when they are one range: `None` for a partial tensor, a device
/// holding several segments, or a cut that is not the outermost dimension
/// larger than 1.
pub(crate) fn share_bytes(dtype: DType, dims: &[usize], split: &TensorSplit, d: usize) -> Option<Range<usize>> {
    let (&last, outer) = dims.split_last()?;
    let row_bytes = dtype.row_bytes(last)?;
    let whole = row_bytes.checked_mul(outer.iter().product())?;
    match split {
        TensorSplit::Mirror => Some(0..whole),
        TensorSplit::Partial => None,
        TensorSplit::Split { axis, parts } => {
            let [segment] = parts.get(d)?.as_slice() else { return None };
            if dims[..*axis].iter().any(|&n| n != 1) {
                return None;
            }
            if *axis + 1 == dims.len() {
                // The last dimension: whole blocks of one row.
                return Some(dtype.row_bytes(segment.start)?..dtype.row_bytes(segment.end)?);
            }
            let index_bytes = row_bytes.checked_mul(dims[*axis + 1..dims.len() - 1].iter().product())?;
            Some(segment.start * index_bytes..segment.end * index_bytes)
        }
    }
}

/// Bytes of a whole tensor of `dtype` and `dims` (rows of whole blocks).
fn whole_bytes(dtype: DType, dims: &[usize]) -> Option<usize> {
    let (&last, outer) = dims.split_last()?;
    dtype.row_bytes(last)?.checked_mul(outer.iter().product())
}

/// Whether each device's share of a `split` tensor is one strided view of
/// the whole (one segment of the cut dimension per device), so that a
/// device holding the whole tensor's bytes can read its share in place.
fn windowable(split: &TensorSplit) -> bool {
    matches!(split, TensorSplit::Split { parts, .. } if parts.iter().all(|p| p.len() == 1))
}

impl CompositeDevice {
    /// A tensor of `dtype` and `dims` held as `split`, each inner device's
    /// share mapped from `file`, where the whole tensor lies at byte
    /// `offset`: the share's own range where it is one, else the whole
    /// tensor, read as a view (windowed). `None` (nothing mapped) for
    /// partial sums, a device holding several segments, or an inner device
    /// that cannot map files: the caller then allocates with
    /// [`alloc_split`](Self::alloc_split) and uploads.
    ///
    /// Mapped shares are sealed weights from the start, as a device's own
    /// mapping ([`Device::map_file`]).
    ///
    /// # Errors
    /// A split that does not fit the tensor, or a device's mapping failing.
    pub fn map_split(
        &self,
        file: &std::fs::File,
        offset: u64,
        (dtype, dims): (DType, &[usize]),
        split: TensorSplit,
    ) -> Result<Option<TensorRef>, CompositeError> {
        let inner = self.inner();
        split.check(dtype, dims, inner.len())?;
        let shares = (0..inner.len()).map(|d| share_bytes(dtype, dims, &split, d)).collect::<Option<Vec<_>>>();
        let windowed = shares.is_none();
        let ranges = match shares {
            Some(ranges) => ranges,
            // Each device maps the whole tensor and reads its share as a
            // view, which needs one segment per device.
            None if windowable(&split) => {
                let whole = whole_bytes(dtype, dims).ok_or_else(|| CompositeError::BadSplit {
                    dims: dims.to_vec(),
                    reason: format!("rows are not whole blocks of {dtype}"),
                })?;
                vec![0..whole; inner.len()]
            }
            None => return Ok(None),
        };
        if ranges.iter().any(|r| r.is_empty()) {
            return Ok(None);
        }
        let mut parts: Vec<Buffer> = Vec::with_capacity(inner.len());
        for (device, range) in inner.iter().zip(&ranges) {
            let range = FileRange { file, offset: offset + range.start as u64, len: range.len() };
            match device.map_file(range)? {
                Some(buffer) => parts.push(buffer),
                None => return Ok(None),
            }
        }
        let len = ranges.iter().map(|r| r.end).max().unwrap_or(0);
        let tensor = SplitTensor { dtype, dims: dims.to_vec(), split, windowed };
        let raw = CompositeBuffer::new(self.info().name.clone(), len, parts, Some(tensor));
        let buffer = Buffer::new_sealed_weights(Box::new(raw));
        Ok(Some(TensorRef::new(&buffer, 0, dtype, dims)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(parts: &[Range<usize>]) -> TensorSplit {
        TensorSplit::Split { axis: 0, parts: parts.iter().map(|r| vec![r.clone()]).collect() }
    }

    #[test]
    fn a_matrix_cut_by_rows_has_one_range_per_device() {
        // 6 rows of 64 q8_0 values (2 blocks of 34 bytes each).
        let split = rows(&[0..2, 2..6]);
        assert_eq!(share_bytes(DType::Q8_0, &[6, 64], &split, 0), Some(0..136));
        assert_eq!(share_bytes(DType::Q8_0, &[6, 64], &split, 1), Some(136..408));
        // A leading 1 does not matter; a mirror is the whole tensor.
        let split = TensorSplit::Split { axis: 1, parts: vec![vec![0..2], vec![2..6]] };
        assert_eq!(share_bytes(DType::F32, &[1, 6, 4], &split, 1), Some(32..96));
        assert_eq!(share_bytes(DType::F16, &[6, 4], &TensorSplit::Mirror, 1), Some(0..48));
    }

    #[test]
    fn a_cut_of_the_rows_length_is_one_range_only_for_a_single_row() {
        let split = TensorSplit::Split { axis: 1, parts: vec![vec![0..32], vec![32..64]] };
        assert_eq!(share_bytes(DType::Q8_0, &[64], &rows(&[0..32, 32..64]), 1), Some(34..68));
        assert_eq!(share_bytes(DType::Q8_0, &[1, 64], &split, 1), Some(34..68));
        assert_eq!(share_bytes(DType::Q8_0, &[2, 64], &split, 1), None, "strided through the rows");
    }

    #[test]
    fn several_segments_and_partial_sums_are_not_one_range() {
        let fused = TensorSplit::Split { axis: 0, parts: vec![vec![0..1, 2..3], vec![1..2, 3..4]] };
        assert_eq!(share_bytes(DType::F32, &[4, 8], &fused, 0), None);
        assert_eq!(share_bytes(DType::F32, &[4, 8], &TensorSplit::Partial, 0), None);
    }
}
