//! Where each rank's part of an uneven all-gather goes in the whole
//! tensor: rank `r` holds segments `parts[r]` of one axis (a tensor split
//! over devices of unequal shares, several segments each when a split
//! follows heads), and MPI gathers the parts one after the other.

use std::ops::Range;

use crate::MpiError;

/// The layout of an all-gather of segments of one axis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segments {
    /// Product of the dimensions before the axis.
    outer: usize,
    /// The axis's extent in the whole tensor.
    extent: usize,
    /// Product of the dimensions after the axis.
    inner: usize,
    /// Per rank, its segments of the axis, in its input's order.
    parts: Vec<Vec<Range<usize>>>,
}

impl Segments {
    /// The layout of `dims` split along `axis` as `parts` says (one list per
    /// rank, `ranks` of them): checked to cover the axis once, in bounds.
    pub fn new(dims: &[usize], axis: usize, parts: &[Vec<Range<usize>>], ranks: usize) -> Result<Segments, MpiError> {
        let bad = |what: String| MpiError::BadBuffers { op: "all-gather", what };
        if axis >= dims.len() {
            return Err(bad(format!("axis {axis} of a {}-dimensional tensor", dims.len())));
        }
        if parts.len() != ranks {
            return Err(bad(format!("{} parts for {ranks} ranks", parts.len())));
        }
        let extent = dims[axis];
        let mut covered = vec![false; extent];
        for r in parts.iter().flatten() {
            if r.end > extent || r.start > r.end {
                return Err(bad(format!("segment {r:?} of an axis of {extent}")));
            }
            for c in &mut covered[r.clone()] {
                if std::mem::replace(c, true) {
                    return Err(bad(format!("segment {r:?} overlaps another")));
                }
            }
        }
        if covered.iter().any(|c| !c) {
            return Err(bad(format!("parts {parts:?} leave some of the axis of {extent} out")));
        }
        Ok(Segments {
            outer: dims[..axis].iter().product(),
            extent,
            inner: dims[axis + 1..].iter().product(),
            parts: parts.to_vec(),
        })
    }

    /// Values rank `r` sends.
    pub fn count(&self, r: usize) -> usize {
        self.outer * self.local_extent(r) * self.inner
    }

    /// Values per rank, in rank order.
    pub fn counts(&self) -> Vec<usize> {
        (0..self.parts.len()).map(|r| self.count(r)).collect()
    }

    /// Values of the whole tensor.
    pub fn total(&self) -> usize {
        self.outer * self.extent * self.inner
    }

    fn local_extent(&self, r: usize) -> usize {
        self.parts[r].iter().map(|s| s.len()).sum()
    }

    /// Puts `gathered` (every rank's part, one after the other in rank
    /// order) in place in `whole`.
    pub fn place<T: Copy>(&self, gathered: &[T], whole: &mut [T]) {
        let mut from = 0;
        for (r, segments) in self.parts.iter().enumerate() {
            let local = self.local_extent(r);
            for o in 0..self.outer {
                let mut at = 0;
                for s in segments {
                    let n = s.len() * self.inner;
                    let src = from + (o * local + at) * self.inner;
                    let dst = (o * self.extent + s.start) * self.inner;
                    whole[dst..dst + n].copy_from_slice(&gathered[src..src + n]);
                    at += s.len();
                }
            }
            from += self.count(r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rank `r`'s input: the values of `whole` in its segments.
    fn cut(dims: &[usize], axis: usize, segments: &[Range<usize>], whole: &[u32]) -> Vec<u32> {
        let outer: usize = dims[..axis].iter().product();
        let inner: usize = dims[axis + 1..].iter().product();
        let mut out = Vec::new();
        for o in 0..outer {
            for s in segments {
                for a in s.clone() {
                    let at = (o * dims[axis] + a) * inner;
                    out.extend_from_slice(&whole[at..at + inner]);
                }
            }
        }
        out
    }

    #[test]
    fn uneven_segments_of_an_inner_axis_go_back_in_place() {
        let dims = [3, 9, 2];
        let parts = vec![vec![0..2, 5..7], vec![2..5, 7..9]];
        let whole: Vec<u32> = (0..54).collect();
        let layout = Segments::new(&dims, 1, &parts, 2).expect("a valid layout");
        let gathered: Vec<u32> = parts.iter().flat_map(|p| cut(&dims, 1, p, &whole)).collect();
        assert_eq!(layout.counts(), vec![24, 30]);
        assert_eq!(gathered.len(), layout.total());
        let mut back = vec![0; whole.len()];
        layout.place(&gathered, &mut back);
        assert_eq!(back, whole);
    }

    #[test]
    fn a_layout_that_misses_or_overlaps_the_axis_is_refused() {
        // One segment per rank.
        let one = |r: Range<usize>| -> Vec<Range<usize>> { std::iter::once(r).collect() };
        let missing = Segments::new(&[4, 6], 1, &[one(0..3), one(4..6)], 2);
        assert!(matches!(missing, Err(MpiError::BadBuffers { .. })), "{missing:?}");
        let overlap = Segments::new(&[4, 6], 1, &[one(0..4), one(3..6)], 2);
        assert!(matches!(overlap, Err(MpiError::BadBuffers { .. })), "{overlap:?}");
        let ranks = Segments::new(&[4, 6], 1, &[one(0..6)], 2);
        assert!(matches!(ranks, Err(MpiError::BadBuffers { .. })), "{ranks:?}");
    }
}
