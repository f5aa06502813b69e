//! The arena plans an executor keeps for the graphs it runs again (every
//! decode step runs the same graph; a tensor-parallel step runs a few
//! hundred segment and gate graphs per stream), looked up by the graph's
//! address in a hash map and handed out as `Arc`s, so a hit costs one hash
//! lookup and no allocation.
//!
//! A key cannot be stale: each entry holds a `Weak` of its graph, and a
//! `Weak` keeps the graph's allocation (not the graph) alive, so no other
//! graph can live at that address while the entry exists. Entries of
//! dropped graphs are purged when the cache is full, before the oldest
//! live entry is evicted.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use super::arena::{plan_arena, ArenaPlan};
use super::Graph;

/// Plans by graph, at most `capacity` of them.
#[derive(Debug)]
pub struct PlanCache {
    align: usize,
    capacity: usize,
    /// By the graph's address: the graph, when the plan was made (for
    /// eviction), and the plan.
    plans: HashMap<usize, (Weak<Graph>, u64, Arc<ArenaPlan>)>,
    made: u64,
}

impl PlanCache {
    /// An empty cache of plans with arena blocks aligned to `align` bytes,
    /// holding at most `capacity` (at least 1) plans.
    pub fn new(align: usize, capacity: usize) -> Self {
        PlanCache { align, capacity: capacity.max(1), plans: HashMap::new(), made: 0 }
    }

    /// The plan of `graph`, made on the first call for it.
    pub fn plan(&mut self, graph: &Arc<Graph>) -> Arc<ArenaPlan> {
        let key = Arc::as_ptr(graph) as usize;
        if let Some((_, _, plan)) = self.plans.get(&key) {
            return plan.clone();
        }
        if self.plans.len() >= self.capacity {
            self.plans.retain(|_, (weak, _, _)| weak.strong_count() > 0);
        }
        if self.plans.len() >= self.capacity {
            let oldest = self.plans.iter().min_by_key(|(_, (_, made, _))| *made).map(|(&k, _)| k);
            if let Some(oldest) = oldest {
                self.plans.remove(&oldest);
            }
        }
        let plan = Arc::new(plan_arena(graph, self.align));
        self.made += 1;
        self.plans.insert(key, (Arc::downgrade(graph), self.made, plan.clone()));
        plan
    }

    /// Plans held.
    pub fn len(&self) -> usize {
        self.plans.len()
    }

    /// Whether no plan is held.
    pub fn is_empty(&self) -> bool {
        self.plans.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Flags;
    use crate::DType;

    fn graph(len: usize) -> Arc<Graph> {
        let mut g = Graph::new();
        let x = g.leaf("x", DType::F32, &[len], Flags::INPUT).unwrap();
        let a = g.scale(x, 2.0).unwrap();
        let b = g.scale(a, 2.0).unwrap();
        g.mark(b, Flags::OUTPUT).unwrap();
        Arc::new(g)
    }

    #[test]
    fn a_graph_run_again_gets_the_same_plan() {
        let mut cache = PlanCache::new(64, 4);
        let g = graph(16);
        let first = cache.plan(&g);
        assert!(Arc::ptr_eq(&first, &cache.plan(&g)));
        assert_eq!(first.arena_bytes, plan_arena(&g, 64).arena_bytes);
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn a_new_graph_never_gets_a_dropped_graphs_plan() {
        let mut cache = PlanCache::new(64, 4);
        for len in [16, 1024, 16, 4096] {
            let g = graph(len);
            // Each graph is dropped before the next is made, so the
            // allocator may offer the same address; the entry's `Weak`
            // keeps it from doing so.
            assert_eq!(cache.plan(&g).arena_bytes, plan_arena(&g, 64).arena_bytes, "graph of {len}");
        }
    }

    #[test]
    fn a_full_cache_drops_dead_graphs_first_then_the_oldest() {
        let mut cache = PlanCache::new(64, 2);
        let oldest = graph(16);
        let oldest_plan = cache.plan(&oldest);
        cache.plan(&graph(32));
        let third = graph(64);
        let third_plan = cache.plan(&third);
        assert_eq!(cache.len(), 2);
        assert!(Arc::ptr_eq(&oldest_plan, &cache.plan(&oldest)), "the dropped graph's plan went, not the oldest");
        let fourth = graph(128);
        cache.plan(&fourth);
        assert_eq!(cache.len(), 2);
        assert!(Arc::ptr_eq(&third_plan, &cache.plan(&third)), "the third is still held");
        assert!(!Arc::ptr_eq(&oldest_plan, &cache.plan(&oldest)), "the oldest live plan was evicted");
    }
}
