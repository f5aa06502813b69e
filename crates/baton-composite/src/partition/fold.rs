//! Folded all-reduces: between devices that address each other's memory,
//! an all-reduce needs no items of its own. At the gate each device only
//! waits for the others' points; the segment that reads the sum then adds
//! every device's partial (its own, and its peers' in place) at its start,
//! in device order, so every device gets the same bits. Between such
//! devices the butterfly queues a wait and an add graph per device and
//! gate; folded, the gate is the waits (one per peer) and the adds run
//! inside the consumer's graph, which also keeps the sum in scratch for
//! later segments.
//!
//! Ordering: a device reads a peer's partial only after the gate's wait on
//! that peer's point, which follows the peer's write of it. The peer writes
//! that memory again only in a later run (each partial has its own
//! scratch), after the composite stream's join between items, which waits
//! for every inner stream's share of this one, the read included. The
//! inner streams' hazard tracking checks both (the tests assert it inserts
//! no wait).

use baton_core::graph::{Flags, NodeId};
use baton_core::DType;

use super::{Builder, Gate, Source, StepBuild};
use crate::collective::{GateKind, GateSpec};
use crate::error::CompositeError;
use crate::split::TensorSplit;

impl Builder<'_> {
    /// Ends the gate of `id` as a folded all-reduce, if the partition folds
    /// and the partials are in the partition's memory; false otherwise.
    pub(super) fn fold_gate(&mut self, id: NodeId, spec: &GateSpec, inputs: &[Source]) -> bool {
        if !self.fold || spec.kind != GateKind::AllReduce {
            return false;
        }
        let partials: Option<Vec<usize>> = inputs
            .iter()
            .map(|s| match s {
                Source::Scratch(k) => Some(*k),
                _ => None,
            })
            .collect();
        let Some(partials) = partials else { return false };
        self.steps.push(StepBuild::Gate(Gate {
            spec: spec.clone(),
            node: id,
            inputs: inputs.to_vec(),
            outputs: Vec::new(),
            scratch: vec![Vec::new(); self.n],
            folded: true,
        }));
        self.folded.insert(id, partials);
        true
    }

    /// `id`'s sum in the current segment when its all-reduce was folded:
    /// the partials added in device order, also kept in scratch for later
    /// segments (which import it). `None` when `id` was not folded.
    pub(super) fn folded_sum(&mut self, id: NodeId) -> Result<Option<Vec<NodeId>>, CompositeError> {
        let Some(partials) = self.folded.get(&id).cloned() else { return Ok(None) };
        if let Some(sources) = self.gathered.get(&id).cloned() {
            return Ok(Some(self.import(id, &sources, &TensorSplit::Mirror)?));
        }
        let dims = self.dims(id);
        let mut sums = Vec::with_capacity(self.n);
        let mut homes = Vec::with_capacity(self.n);
        for d in 0..self.n {
            self.leaves += 1;
            let kept = self.new_scratch(d, DType::F32, dims.clone());
            let g = &mut self.cur.graphs[d];
            let mut sum: Option<NodeId> = None;
            for (peer, &index) in partials.iter().enumerate() {
                let name = format!("partial.{}.{}.{peer}", id.0, self.leaves);
                let leaf = g.leaf(&name, DType::F32, &dims, Flags::INPUT)?;
                let source = if peer == d { Source::Scratch(index) } else { Source::Peer { device: peer, index } };
                self.cur.binds[d].push((leaf, source));
                sum = Some(match sum {
                    None => leaf,
                    Some(acc) => g.add(acc, leaf)?,
                });
            }
            let sum = sum.ok_or_else(|| self.fail(id, "an all-reduce over no device"))?;
            let g = &mut self.cur.graphs[d];
            g.mark(sum, Flags::OUTPUT)?;
            self.cur.binds[d].push((sum, Source::Scratch(kept)));
            homes.push(Source::Scratch(kept));
            sums.push(sum);
        }
        self.cur.computed += 1;
        self.gathered.insert(id, homes);
        Ok(Some(sums))
    }
}
