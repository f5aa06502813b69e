//! Where each rank's part of an uneven all-gather goes in the whole
//! tensor: rank `r` holds segments `parts[r]` of one axis (a tensor split
//! over devices of unequal shares, several segments each when a split
//! follows heads), and MPI gathers the parts one after the other. Parts
//! may overlap (a key head that two ranks' query heads share): each holds
//! the same values, and an index is taken from the first rank that holds
//! it.

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
    /// Per index of the axis, the first rank holding it (whose value is
    /// placed).
    owner: Vec<usize>,
}

impl Segments {
    /// The layout of `dims` split along `axis` as `parts` says (one list per
    /// rank, `ranks` of them): checked to cover the axis, in bounds, each
    /// rank holding an index at most once (ranks may share indices).
    pub fn new(dims: &[usize], axis: usize, parts: &[Vec<Range<usize>>], ranks: usize) -> Result<Segments, MpiError> {
        let bad = |what: String| MpiError::BadBuffers { op: "all-gather", what };
        if axis >= dims.len() {
            return Err(bad(format!("axis {axis} of a {}-dimensional tensor", dims.len())));
        }
        if parts.len() != ranks {
            return Err(bad(format!("{} parts for {ranks} ranks", parts.len())));
        }
        let extent = dims[axis];
        let mut owner = vec![usize::MAX; extent];
        for (rank, segments) in parts.iter().enumerate() {
            let mut mine = vec![false; extent];
            for r in segments {
                if r.end > extent || r.start > r.end {
                    return Err(bad(format!("segment {r:?} of an axis of {extent}")));
                }
                for a in r.clone() {
                    if std::mem::replace(&mut mine[a], true) {
                        return Err(bad(format!("segment {r:?} of rank {rank} overlaps another of its own")));
                    }
                    if owner[a] == usize::MAX {
                        owner[a] = rank;
                    }
                }
            }
        }
        if owner.contains(&usize::MAX) {
            return Err(bad(format!("parts {parts:?} leave some of the axis of {extent} out")));
        }
        Ok(Segments {
            outer: dims[..axis].iter().product(),
            extent,
            inner: dims[axis + 1..].iter().product(),
            parts: parts.to_vec(),
            owner,
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

    /// Values of the whole tensor (fewer than the counts' sum where ranks
    /// share indices).
    pub fn total(&self) -> usize {
        self.outer * self.extent * self.inner
    }

    fn local_extent(&self, r: usize) -> usize {
        self.parts[r].iter().map(|s| s.len()).sum()
    }

    /// Puts `gathered` (every rank's part, one after the other in rank
    /// order) in place in `whole`; an index several ranks hold is taken
    /// from the first of them.
    pub fn place<T: Copy>(&self, gathered: &[T], whole: &mut [T]) {
        let mut from = 0;
        for (r, segments) in self.parts.iter().enumerate() {
            let local = self.local_extent(r);
            for o in 0..self.outer {
                let mut at = 0;
                for s in segments {
                    for run in self.owned_runs(r, s.clone()) {
                        let n = run.len() * self.inner;
                        let src = from + (o * local + at + run.start - s.start) * self.inner;
                        let dst = (o * self.extent + run.start) * self.inner;
                        whole[dst..dst + n].copy_from_slice(&gathered[src..src + n]);
                    }
                    at += s.len();
                }
            }
            from += self.count(r);
        }
    }

    /// The runs of `segment` whose indices rank `r` is the first to hold.
    fn owned_runs(&self, r: usize, segment: Range<usize>) -> impl Iterator<Item = Range<usize>> + '_ {
        let mut a = segment.start;
        std::iter::from_fn(move || {
            while a < segment.end && self.owner[a] != r {
                a += 1;
            }
            let start = a;
            while a < segment.end && self.owner[a] == r {
                a += 1;
            }
            (start < a).then_some(start..a)
        })
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

    /// A key head two ranks share (Gemma 3's one key head under heads
    /// split over 2 ranks): each index placed once, from its first holder.
    #[test]
    fn segments_that_ranks_share_are_placed_from_their_first_holder() {
        let dims = [2, 7, 3];
        let parts = vec![vec![0..4], vec![2..7], vec![1..3, 5..6]];
        let whole: Vec<u32> = (0..42).collect();
        let layout = Segments::new(&dims, 1, &parts, 3).expect("shared segments");
        let mut gathered: Vec<u32> = parts.iter().flat_map(|p| cut(&dims, 1, p, &whole)).collect();
        assert_eq!(gathered.len(), layout.counts().iter().sum::<usize>());
        // Later holders' copies are never read: mark them.
        let first = layout.count(0);
        for v in &mut gathered[first..] {
            let index = (*v as usize / 3) % 7;
            if index < 4 {
                *v = u32::MAX;
            }
        }
        let mut back = vec![0; whole.len()];
        layout.place(&gathered, &mut back);
        assert_eq!(back, whole);
    }

    #[test]
    fn a_layout_that_misses_the_axis_or_holds_an_index_twice_in_a_rank_is_refused() {
        // One segment per rank.
        let one = |r: Range<usize>| -> Vec<Range<usize>> { std::iter::once(r).collect() };
        let missing = Segments::new(&[4, 6], 1, &[one(0..3), one(4..6)], 2);
        assert!(matches!(missing, Err(MpiError::BadBuffers { .. })), "{missing:?}");
        let twice = Segments::new(&[4, 6], 1, &[vec![0..4, 3..5], one(4..6)], 2);
        assert!(matches!(twice, Err(MpiError::BadBuffers { .. })), "{twice:?}");
        let ranks = Segments::new(&[4, 6], 1, &[one(0..6)], 2);
        assert!(matches!(ranks, Err(MpiError::BadBuffers { .. })), "{ranks:?}");
    }
}
