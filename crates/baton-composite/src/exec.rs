//! Running a partition on the inner streams, and the partitions kept per
//! graph.

use std::sync::Arc;

use baton_core::backend::{Bindings, BoundGraph, Device, Stream, TensorRef};
use baton_core::graph::Graph;
use baton_core::sync::{SyncPoint, WaitPolicy};

use crate::buffer::CompositeBuffer;
use crate::collective::{Collective, GateIo, GateKept};
use crate::error::CompositeError;
use crate::partition::{Partition, Source, Step};
use crate::prepared::{GateMemory, Prepared};
use crate::profile::GateProfile;
use crate::split::TensorSplit;

/// Prepared memory kept per partition: one per set of bound tensors in use
/// (a model rotates its input buffers over the runs in flight).
const PREPARED_KEPT: usize = 4;

/// Partitions kept per stream (the graphs of recent shapes).
const KEPT: usize = 16;

/// Binding sets remembered for the fast hit: a model rotates its input
/// buffers over the runs it keeps in flight (two, by default).
const RECENT: usize = 4;

/// A partition handed out, its graph and the buffer bound to each bound
/// node then.
type Recent = (Arc<Graph>, Vec<u64>, Arc<Partition>);

/// The partitions of recent graphs, keyed by the graph and the splits of
/// its bindings: a graph whose shape does not change is partitioned once.
#[derive(Default)]
pub(crate) struct PartitionCache {
    entries: Vec<(Arc<Graph>, Vec<u64>, Arc<Partition>)>,
    /// The last partitions handed out, newest first: a decode step binds
    /// the buffers of a recent step again, and a buffer's split never
    /// changes, so matching them is a hit without building a key.
    recent: std::collections::VecDeque<Recent>,
    /// Whether all-reduces are left to their consumers
    /// ([`Partition::build_with`]).
    fold: bool,
}

/// The buffer bound to each bound node of `graph` (0 where none is).
fn bound_buffers<'a>(graph: &'a Graph, bindings: &'a Bindings) -> impl Iterator<Item = u64> + 'a {
    graph.bound_nodes().map(|id| bindings.get(id).map_or(0, |t| t.buffer().id()))
}

/// What a binding's split contributes to the key: 0 for mirrored memory,
/// the buffer for a split or partial tensor.
fn key(graph: &Graph, bindings: &Bindings) -> Vec<u64> {
    graph
        .bound_nodes()
        .map(|id| {
            bindings
                .get(id)
                .filter(|t| {
                    CompositeBuffer::of(t.buffer())
                        .and_then(|b| b.tensor())
                        .is_some_and(|t| t.split != TensorSplit::Mirror)
                })
                .map_or(0, |t| t.buffer().id())
        })
        .collect()
}

impl PartitionCache {
    /// Whether its partitions fold their all-reduces.
    pub(crate) fn folds(&self) -> bool {
        self.fold
    }

    /// An empty cache whose partitions fold their all-reduces if `fold`.
    pub(crate) fn new(fold: bool) -> PartitionCache {
        PartitionCache { fold, ..Default::default() }
    }

    pub(crate) fn get(
        &mut self,
        graph: &Arc<Graph>,
        bindings: &Bindings,
        devices: &[Arc<dyn Device>],
        collective: &dyn Collective,
    ) -> Result<Arc<Partition>, CompositeError> {
        let seen = self.recent.iter().find(|(g, buffers, _)| {
            Arc::ptr_eq(g, graph) && bound_buffers(graph, bindings).eq(buffers.iter().copied())
        });
        if let Some((_, _, p)) = seen {
            return Ok(p.clone());
        }
        let key = key(graph, bindings);
        let partition = match self.entries.iter().find(|(g, k, _)| Arc::ptr_eq(g, graph) && *k == key) {
            Some((_, _, p)) => p.clone(),
            None => {
                let bound = Partition::bound_splits(graph, bindings);
                let windows = Partition::bound_windows(graph, bindings);
                let mut partition =
                    Partition::build_windowed(graph, bound, windows, devices.len(), collective, self.fold)?;
                partition.allocate(devices)?;
                let partition = Arc::new(partition);
                if self.entries.len() == KEPT {
                    self.entries.remove(0);
                }
                self.entries.push((graph.clone(), key, partition.clone()));
                partition
            }
        };
        if self.recent.len() == RECENT {
            self.recent.pop_back();
        }
        self.recent.push_front((graph.clone(), bound_buffers(graph, bindings).collect(), partition.clone()));
        Ok(partition)
    }
}

impl Partition {
    fn resolve(&self, source: &Source, d: usize, bindings: &Bindings) -> Result<TensorRef, CompositeError> {
        match source {
            Source::Scratch(k) => Ok(self.scratch[d][*k].clone()),
            Source::Peer { device, index } => Ok(self.scratch[*device][*index].clone()),
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
    fn signature<'a>(&'a self, bindings: &'a Bindings) -> impl Iterator<Item = (u64, usize)> + 'a {
        self.bound_sources.iter().map(|id| bindings.get(*id).map_or((0, 0), |t| (t.buffer().id(), t.offset())))
    }

    /// Every step's memory on every device: a segment's bindings, a gate's
    /// inputs, outputs and scratch.
    fn prepare(&self, bindings: &Bindings) -> Result<Vec<Prepared>, CompositeError> {
        let mut out = Vec::with_capacity(self.steps.len());
        for step in &self.steps {
            match step {
                Step::Segment(seg) => {
                    let mut per_device = Vec::with_capacity(seg.graphs.len());
                    for (d, graph) in seg.graphs.iter().enumerate() {
                        let mut local = Bindings::new(graph);
                        for (node, source) in &seg.binds[d] {
                            local.bind(*node, self.resolve(source, d, bindings)?)?;
                        }
                        per_device.push(BoundGraph::new(local)?);
                    }
                    out.push(Prepared::Segment(per_device));
                }
                Step::Gate(gate) if gate.folded => {
                    let (inputs, outputs, scratch) = (Vec::new(), Vec::new(), Vec::new());
                    out.push(Prepared::Gate(GateMemory { inputs, outputs, scratch, kept: GateKept::default() }));
                }
                Step::Gate(gate) => {
                    let n = gate.inputs.len();
                    let mut io = GateMemory {
                        inputs: Vec::new(),
                        outputs: Vec::new(),
                        scratch: Vec::new(),
                        kept: GateKept::default(),
                    };
                    for d in 0..n {
                        io.inputs.push(self.resolve(&gate.inputs[d], d, bindings)?);
                        io.outputs.push(self.resolve(&gate.outputs[d], d, bindings)?);
                        io.scratch.push(gate.scratch[d].iter().map(|&k| self.scratch[d][k].clone()).collect());
                    }
                    out.push(Prepared::Gate(io));
                }
            }
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
        let prepared = {
            let mut cached = self.bindings.lock();
            // Compared in place (no key is built on a hit).
            let hit = cached.iter().rev().find(|(s, _)| self.signature(bindings).eq(s.iter().copied()));
            match hit {
                Some((_, b)) => b.clone(),
                None => {
                    let signature: Vec<(u64, usize)> = self.signature(bindings).collect();
                    let b = Arc::new(self.prepare(bindings)?);
                    if cached.len() == PREPARED_KEPT {
                        cached.remove(0);
                    }
                    cached.push((signature, b.clone()));
                    b
                }
            }
        };
        for (step, memory) in self.steps.iter().zip(prepared.iter()) {
            match (step, memory) {
                (Step::Segment(_), Prepared::Segment(locals)) => {
                    for (stream, bound) in streams.iter().zip(locals) {
                        stream.compute_bound(bound)?;
                    }
                }
                (Step::Gate(gate), Prepared::Gate(m)) => {
                    let io = GateIo { inputs: &m.inputs, outputs: &m.outputs, scratch: &m.scratch, kept: &m.kept };
                    let profiled = profile.enabled();
                    if profiled {
                        for (d, s) in streams.iter().enumerate() {
                            s.host_fn(profile.enter(d))?;
                        }
                    }
                    if gate.folded {
                        // Each device waits for every other's partial; the
                        // next segment adds them (points taken first, so
                        // no wait follows another's wait).
                        let points: Vec<SyncPoint> = streams.iter().map(Stream::last_point).collect();
                        for (d, stream) in streams.iter().enumerate() {
                            for (_, point) in points.iter().enumerate().filter(|&(peer, _)| peer != d) {
                                stream.wait_or_relay(point, policy)?;
                            }
                        }
                    } else {
                        collective.run(streams, &gate.spec, &io, policy)?;
                    }
                    if profiled {
                        for (d, s) in streams.iter().enumerate() {
                            s.host_fn(profile.leave(d))?;
                        }
                    }
                }
                _ => {
                    return Err(CompositeError::Unsupported {
                        op: "compute",
                        reason: "prepared memory does not match the steps".into(),
                    })
                }
            }
        }
        Ok(())
    }
}
