//! Bindings checked once per split and set of tensors: a decode loop binds
//! the same weights, cache and (rotating) input buffers every step, so the
//! runner submits the split's `BoundGraph` again instead of binding and
//! checking a few hundred tensors per token.

use std::collections::HashMap;
use std::sync::Arc;

use baton_core::backend::{Bindings, BoundGraph, TensorRef};
use baton_core::graph::{Graph, NodeId};
use baton_core::shape::Shape;
use baton_core::DType;

use crate::error::SchedError;

/// Sets of tensors kept per split graph (a model rotates its input buffers
/// over the runs in flight).
const KEPT: usize = 4;

/// Where a tensor is and what it is: equal places bind equally.
type Place = (u64, usize, DType, Shape);

fn place(t: &TensorRef) -> Place {
    (t.buffer().id(), t.offset(), t.dtype(), t.shape())
}

/// Bound graphs by split graph, newest first.
#[derive(Default)]
pub(crate) struct BoundCache {
    by_graph: HashMap<usize, Vec<(Vec<Place>, BoundGraph)>>,
}

impl BoundCache {
    /// `graph` with each `(node, tensor)` of `binds` bound: the kept bound
    /// graph when the tensors are where they were, else bound and checked
    /// now (and kept).
    pub(crate) fn bound(
        &mut self,
        graph: &Arc<Graph>,
        binds: Vec<(NodeId, TensorRef)>,
    ) -> Result<&BoundGraph, SchedError> {
        // The kept bound graphs hold their graph, so the address is not
        // reused while an entry names it.
        let at = Arc::as_ptr(graph) as usize;
        let kept = self.by_graph.entry(at).or_default();
        match kept.iter().position(|(places, _)| places.iter().copied().eq(binds.iter().map(|(_, t)| place(t)))) {
            Some(i) => {
                let entry = kept.remove(i);
                kept.insert(0, entry);
            }
            None => {
                let places = binds.iter().map(|(_, t)| place(t)).collect();
                let mut bindings = Bindings::new(graph);
                for (node, tensor) in binds {
                    bindings.bind(node, tensor)?;
                }
                let bound = BoundGraph::new(bindings)?;
                kept.truncate(KEPT - 1);
                kept.insert(0, (places, bound));
                // Graphs only this cache still holds (their plans were
                // dropped) are forgotten, with the memory their bindings
                // hold.
                self.by_graph.retain(|&g, kept| {
                    g == at || kept.first().is_some_and(|(_, b)| Arc::strong_count(b.graph()) > kept.len())
                });
            }
        }
        let kept = self.by_graph.get(&at).and_then(|k| k.first());
        kept.map(|(_, bound)| bound).ok_or(SchedError::Binding { node: "graph".into(), reason: "not kept".into() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::backend::Device;
    use baton_core::graph::Flags;

    fn graph() -> Arc<Graph> {
        let mut g = Graph::new();
        let x = g.leaf("x", DType::F32, &[4], Flags::INPUT).expect("x");
        let y = g.scale(x, 2.0).expect("y");
        g.mark(y, Flags::OUTPUT).expect("mark");
        Arc::new(g)
    }

    #[test]
    fn the_same_tensors_reuse_the_bound_graph_and_others_are_bound_and_checked_again() {
        let device = baton_cpu::open(&["cpu"]).expect("cpu").remove(0);
        let buffer = device.alloc(64).expect("buffer");
        let at = |offset: usize, dims: &[usize]| TensorRef::new(&buffer, offset, DType::F32, dims).expect("tensor");
        let g = graph();
        let mut cache = BoundCache::default();
        let binds = |x: TensorRef| vec![(NodeId(0), x), (NodeId(1), at(32, &[4]))];
        let first: *const Bindings = cache.bound(&g, binds(at(0, &[4]))).expect("bound").bindings();
        let again: *const Bindings = cache.bound(&g, binds(at(0, &[4]))).expect("bound").bindings();
        assert_eq!(first, again, "the same places reuse the checked bindings");
        let moved: *const Bindings = cache.bound(&g, binds(at(16, &[4]))).expect("bound").bindings();
        assert_ne!(first, moved, "an input elsewhere is bound anew");
        let back: *const Bindings = cache.bound(&g, binds(at(0, &[4]))).expect("bound").bindings();
        assert_eq!(first, back, "both stay kept");
        assert!(cache.bound(&g, binds(at(0, &[2, 2]))).is_err(), "a tensor of another shape is checked, and refused");
        // A graph whose plan is gone is forgotten at the next miss.
        let other = graph();
        cache.bound(&other, binds(at(0, &[4]))).expect("bound");
        assert_eq!(cache.by_graph.len(), 2);
        drop(g);
        cache.bound(&other, binds(at(16, &[4]))).expect("bound");
        assert_eq!(cache.by_graph.len(), 1, "only the cache held the first graph");
    }
}
