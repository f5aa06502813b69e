//! Running a partition on the inner streams, and the partitions kept per
//! graph.

use std::sync::Arc;

use baton_core::backend::{Bindings, Device, Stream, TensorRef};
use baton_core::graph::Graph;
use baton_core::sync::WaitPolicy;

use crate::buffer::CompositeBuffer;
use crate::collective::{Collective, GateIo};
use crate::error::CompositeError;
use crate::partition::{Partition, Source, Step};
use crate::profile::GateProfile;
use crate::split::TensorSplit;

/// Partitions kept per stream (the graphs of recent shapes).
const KEPT: usize = 16;

/// The partitions of recent graphs, keyed by the graph and the splits of
/// its bindings: a graph whose shape does not change is partitioned once.
#[derive(Default)]
pub(crate) struct PartitionCache {
    entries: Vec<(Arc<Graph>, Vec<u64>, Arc<Partition>)>,
}

/// What a binding's split contributes to the key: 0 for mirrored memory,
/// the buffer for a split or partial tensor.
fn key(graph: &Graph, bindings: &Bindings) -> Vec<u64> {
    graph
        .bound_nodes()
        .map(|id| {
            bindings
                .get(id)
                .and_then(|t| CompositeBuffer::of(t.buffer()).map(|b| (t, b)))
                .filter(|(_, b)| b.split() != TensorSplit::Mirror)
                .map_or(0, |(t, _)| t.buffer().id())
        })
        .collect()
}

impl PartitionCache {
    pub(crate) fn get(
        &mut self,
        graph: &Arc<Graph>,
        bindings: &Bindings,
        devices: &[Arc<dyn Device>],
        collective: &dyn Collective,
    ) -> Result<Arc<Partition>, CompositeError> {
        let key = key(graph, bindings);
        if let Some((_, _, p)) = self.entries.iter().find(|(g, k, _)| Arc::ptr_eq(g, graph) && *k == key) {
            return Ok(p.clone());
        }
        let bound = Partition::bound_splits(graph, bindings);
        let mut partition = Partition::build(graph, bound, devices.len(), collective)?;
        partition.allocate(devices)?;
        let partition = Arc::new(partition);
        if self.entries.len() == KEPT {
            self.entries.remove(0);
        }
        self.entries.push((graph.clone(), key, partition.clone()));
        Ok(partition)
    }
}

impl Partition {
    fn resolve(&self, source: &Source, d: usize, bindings: &Bindings) -> Result<TensorRef, CompositeError> {
        match source {
            Source::Scratch(k) => Ok(self.scratch[d][*k].clone()),
            Source::Bound(id) => {
                let t = bindings.get(*id).ok_or_else(|| CompositeError::Unsupported {
                    op: "compute",
                    reason: format!("node {} is not bound", id.0),
                })?;
                let buffer = CompositeBuffer::of(t.buffer()).ok_or_else(|| CompositeError::Unsupported {
                    op: "compute",
                    reason: format!("node {} is bound to {:?}, not composite memory", id.0, t.buffer()),
                })?;
                Ok(buffer.part_tensor(t, d)?)
            }
        }
    }

    /// Where each bound node's tensor is (buffer and offset): while it does
    /// not change, the segments' bindings are reused.
    fn signature(bindings: &Bindings, steps: &[Step]) -> Vec<(u64, usize)> {
        let mut out = Vec::new();
        for step in steps {
            if let Step::Segment(seg) = step {
                for (_, source) in seg.binds.iter().flatten() {
                    if let Source::Bound(id) = source {
                        out.push(bindings.get(*id).map_or((0, 0), |t| (t.buffer().id(), t.offset())));
                    }
                }
            }
        }
        out
    }

    /// Every segment's bindings on every device.
    fn segment_bindings(&self, bindings: &Bindings) -> Result<Vec<Vec<Bindings>>, CompositeError> {
        let mut out = Vec::new();
        for step in &self.steps {
            let Step::Segment(seg) = step else { continue };
            let mut per_device = Vec::with_capacity(seg.graphs.len());
            for (d, graph) in seg.graphs.iter().enumerate() {
                let mut local = Bindings::new(graph);
                for (node, source) in &seg.binds[d] {
                    local.bind(graph, *node, self.resolve(source, d, bindings)?)?;
                }
                per_device.push(local);
            }
            out.push(per_device);
        }
        Ok(out)
    }

    /// Queues every step on `streams` (one per inner device); returns at
    /// once.
    pub(crate) fn run(
        &self,
        streams: &[Stream],
        bindings: &Bindings,
        collective: &dyn Collective,
        policy: WaitPolicy,
        profile: &Arc<GateProfile>,
    ) -> Result<(), CompositeError> {
        let signature = Self::signature(bindings, &self.steps);
        let prepared = {
            let mut cached = self.bindings.lock().unwrap_or_else(|p| p.into_inner());
            match cached.as_ref() {
                Some((s, b)) if *s == signature => b.clone(),
                _ => {
                    let b = Arc::new(self.segment_bindings(bindings)?);
                    *cached = Some((signature, b.clone()));
                    b
                }
            }
        };
        let mut segments = prepared.iter();
        for step in &self.steps {
            match step {
                Step::Segment(seg) => {
                    let locals = segments.next().ok_or_else(|| CompositeError::Unsupported {
                        op: "compute",
                        reason: "fewer prepared bindings than segments".into(),
                    })?;
                    for (d, stream) in streams.iter().enumerate() {
                        stream.compute(&seg.graphs[d], locals[d].clone())?;
                    }
                }
                Step::Gate(gate) => {
                    let n = streams.len();
                    let mut inputs = Vec::with_capacity(n);
                    let mut outputs = Vec::with_capacity(n);
                    for d in 0..n {
                        inputs.push(self.resolve(&gate.inputs[d], d, bindings)?);
                        outputs.push(self.resolve(&gate.outputs[d], d, bindings)?);
                    }
                    let scratch: Vec<Vec<TensorRef>> =
                        (0..n).map(|d| gate.scratch[d].iter().map(|&k| self.scratch[d][k].clone()).collect()).collect();
                    let io = GateIo { inputs: &inputs, outputs: &outputs, scratch: &scratch };
                    let profiled = profile.enabled();
                    if profiled {
                        for (d, s) in streams.iter().enumerate() {
                            s.host_fn(profile.enter(d))?;
                        }
                    }
                    collective.run(streams, &gate.spec, &io, policy)?;
                    if profiled {
                        for (d, s) in streams.iter().enumerate() {
                            s.host_fn(profile.leave(d))?;
                        }
                    }
                }
            }
        }
        Ok(())
    }
}
