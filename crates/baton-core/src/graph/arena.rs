//! Memory plan of a graph's intermediates for a backend's executor: offsets
//! in one arena per stream, reused once a tensor's last reader has run
//! (first fit). Every backend that keeps intermediates in an arena (the CPU
//! and Vulkan executors) plans with this.
//!
//! A node's block is allocated before its inputs' blocks are freed, so an
//! op's output never overlaps the inputs it reads.

use super::{Flags, Graph, Op};

/// Where a node's data lives during a computation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// In memory the caller bound (leaves, outputs).
    Bound,
    /// At this byte offset of the stream's arena.
    Arena(usize),
    /// In the storage of another node (views, copy targets).
    Alias,
}

/// The places of every node and the arena size they need.
#[derive(Clone, Debug)]
pub struct ArenaPlan {
    /// The place of each node, by node index.
    pub places: Vec<Place>,
    /// Bytes of arena the plan needs.
    pub arena_bytes: usize,
}

/// First-fit allocator over a growing arena.
struct FreeList {
    free: Vec<(usize, usize)>,
    end: usize,
    align: usize,
}

impl FreeList {
    fn alloc(&mut self, bytes: usize) -> usize {
        let bytes = bytes.div_ceil(self.align).max(1) * self.align;
        if let Some(i) = self.free.iter().position(|&(_, len)| len >= bytes) {
            let (offset, len) = self.free[i];
            if len == bytes {
                self.free.remove(i);
            } else {
                self.free[i] = (offset + bytes, len - bytes);
            }
            return offset;
        }
        let offset = self.end;
        self.end += bytes;
        offset
    }

    fn release(&mut self, offset: usize, bytes: usize) {
        let bytes = bytes.div_ceil(self.align).max(1) * self.align;
        let at = self.free.partition_point(|&(o, _)| o < offset);
        self.free.insert(at, (offset, bytes));
        // Merge with the neighbours.
        if at + 1 < self.free.len() && self.free[at].0 + self.free[at].1 == self.free[at + 1].0 {
            self.free[at].1 += self.free[at + 1].1;
            self.free.remove(at + 1);
        }
        if at > 0 && self.free[at - 1].0 + self.free[at - 1].1 == self.free[at].0 {
            self.free[at - 1].1 += self.free[at].1;
            self.free.remove(at);
        }
    }
}

/// Plans `graph`, every arena block aligned to `align` bytes (at least 1).
pub fn plan_arena(graph: &Graph, align: usize) -> ArenaPlan {
    let nodes = graph.nodes();
    let mut last_use: Vec<usize> = (0..nodes.len()).collect();
    for (j, node) in nodes.iter().enumerate() {
        for &input in &node.inputs {
            let root = graph.storage_root(input).0;
            last_use[root] = last_use[root].max(j);
        }
    }
    let mut places = vec![Place::Alias; nodes.len()];
    let mut sizes = vec![0usize; nodes.len()];
    let mut dying: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    let mut list = FreeList { free: Vec::new(), end: 0, align: align.max(1) };
    for (j, node) in nodes.iter().enumerate() {
        places[j] = if matches!(node.op, Op::Leaf) || (node.flags.contains(Flags::OUTPUT) && !node.op.aliases_input()) {
            Place::Bound
        } else if node.op.aliases_input() {
            Place::Alias
        } else {
            let bytes = node.layout.end_byte(node.dtype);
            sizes[j] = bytes;
            dying[last_use[j]].push(j);
            Place::Arena(list.alloc(bytes))
        };
        for &dead in &dying[j] {
            if let Place::Arena(offset) = places[dead] {
                list.release(offset, sizes[dead]);
            }
        }
    }
    ArenaPlan { places, arena_bytes: list.end }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    const ALIGN: usize = 64;

    #[test]
    fn dead_intermediates_are_reused_but_never_overlap_live_inputs() {
        let mut g = Graph::new();
        let x = g.leaf("x", DType::F32, &[16], Flags::INPUT).unwrap();
        let a = g.scale(x, 2.0).unwrap();
        let b = g.scale(a, 2.0).unwrap();
        let c = g.scale(b, 2.0).unwrap();
        let d = g.add(c, b).unwrap();
        g.mark(d, Flags::OUTPUT).unwrap();
        let p = plan_arena(&g, ALIGN);
        let at = |n: crate::graph::NodeId| match p.places[n.0] {
            Place::Arena(o) => o,
            other => panic!("{other:?}"),
        };
        assert_ne!(at(a), at(b));
        assert_ne!(at(b), at(c));
        assert_eq!(at(c), at(a), "a is dead once b is computed");
        assert_eq!(p.places[d.0], Place::Bound);
        assert_eq!(p.arena_bytes, 2 * ALIGN);
    }
}
