//! Gates: collectives over the inner streams, and the built-in butterfly.
//!
//! A gate is queued on every device's stream after the work that produced
//! its input there; the device's later work sees the output. Every wait on
//! another device's point uses the gate's wait policy (the edge's), so a
//! polling policy makes every gate a fast fence. A native library (NCCL on
//! GPUs, MPI across hosts) implements [`Collective`]; [`Butterfly`] needs
//! nothing but the copy contract (`C-ORDER`) and one-op graphs.

use baton_core::loom::Mutex;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use baton_core::backend::{Bindings, BoundGraph, Stream, TensorRef};
use baton_core::graph::{Flags, Graph, NodeId};
use baton_core::sync::{SyncPoint, WaitPolicy};
use baton_core::DType;

use crate::error::CompositeError;

/// What a gate computes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum GateKind {
    /// Every device gets the sum of every device's input (full shape).
    AllReduce,
    /// Device `d`'s input holds segments `parts[d]` of dimension `axis`;
    /// every device gets the whole tensor.
    AllGather {
        /// The split dimension.
        axis: usize,
        /// Per device, its segments.
        parts: Vec<Vec<Range<usize>>>,
    },
}

/// One gate: its kind and the full tensor's type and shape (f32).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GateSpec {
    /// What it computes.
    pub kind: GateKind,
    /// The full tensor's dimensions.
    pub dims: Vec<usize>,
}

impl GateSpec {
    /// Dimensions of device `d`'s input.
    pub fn input_dims(&self, d: usize) -> Vec<usize> {
        match &self.kind {
            GateKind::AllReduce => self.dims.clone(),
            GateKind::AllGather { axis, parts } => {
                let mut dims = self.dims.clone();
                dims[*axis] = parts[d].iter().map(|r| r.len()).sum();
                dims
            }
        }
    }
}

/// The memory of one run of a gate, per device.
pub struct GateIo<'a> {
    /// Device `d`'s input (not modified).
    pub inputs: &'a [TensorRef],
    /// Device `d`'s output (no byte shared with any input).
    pub outputs: &'a [TensorRef],
    /// Device `d`'s scratch, as [`Collective::scratch`] asked.
    pub scratch: &'a [Vec<TensorRef>],
    /// What the collective keeps for this gate and memory from one run to
    /// the next (empty at the first run).
    pub kept: &'a GateKept,
}

/// What a collective keeps for one gate and its memory between runs, such
/// as the graphs it binds once and submits again: any type of its own,
/// made by `Default` at the first run.
#[derive(Default)]
pub struct GateKept(Mutex<Option<Box<dyn std::any::Any + Send>>>);

impl GateKept {
    /// Runs `f` on the kept `T` (a new one if none, or another type, is
    /// kept).
    pub fn with<T: Default + Send + 'static, R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let mut slot = self.0.lock();
        if let Some(kept) = slot.as_mut().and_then(|b| b.downcast_mut::<T>()) {
            return f(kept);
        }
        let mut fresh = T::default();
        let out = f(&mut fresh);
        *slot = Some(Box::new(fresh));
        out
    }
}

/// Where a bound graph's tensors are and what they are (buffer, offset,
/// type and shape of each): equal places bind equally.
type Place = (u64, usize, DType, baton_core::shape::Shape);

fn place(t: &TensorRef) -> Place {
    (t.buffer().id(), t.offset(), t.dtype(), t.shape())
}

/// The butterfly's graphs of one gate, bound at its first run, in the order
/// it submits them (the same every run of the same memory).
#[derive(Default)]
struct BoundSteps {
    graphs: Vec<(Vec<Place>, BoundGraph)>,
    next: usize,
}

impl BoundSteps {
    /// Submits the next graph on `stream`: the kept one if its tensors are
    /// where `tensors` are, else `bind`'s (kept from then on).
    fn submit(
        &mut self,
        stream: &Stream,
        tensors: &[&TensorRef],
        bind: impl FnOnce() -> Result<BoundGraph, CompositeError>,
    ) -> Result<(), CompositeError> {
        let at = self.next;
        self.next += 1;
        let fits = self.graphs.get(at).is_some_and(|(p, _)| p.iter().copied().eq(tensors.iter().map(|t| place(t))));
        if !fits {
            self.graphs.truncate(at);
            self.graphs.push((tensors.iter().map(|t| place(t)).collect(), bind()?));
        }
        stream.compute_bound(&self.graphs[at].1)?;
        Ok(())
    }
}

/// A collective: all-reduce and all-gather over one stream per device.
pub trait Collective: Send + Sync {
    /// Short name for plans (`butterfly`, `nccl`).
    fn name(&self) -> &'static str;

    /// The f32 scratch tensors (their dimensions) each device needs for
    /// `spec`; the caller allocates them once and passes them to every run.
    fn scratch(&self, spec: &GateSpec, devices: usize) -> Vec<Vec<Vec<usize>>>;

    /// Queues the gate on `streams` (stream `d` on device `d`), after the
    /// work queued there before; every wait on another device's point uses
    /// `policy`. Returns without blocking the host.
    fn run(
        &self,
        streams: &[Stream],
        spec: &GateSpec,
        io: &GateIo<'_>,
        policy: WaitPolicy,
    ) -> Result<(), CompositeError>;

    /// Whether the partitioner may leave an all-reduce's sum to its
    /// consumers between devices that address each other's memory: each
    /// device waits for the others, then adds every device's partial in
    /// device order at the start of the segment that reads the sum, and
    /// this collective runs nothing for it. The built-in butterfly allows
    /// it (it would read the peers' sums in place there too); a native
    /// library with its own transport should not.
    fn sums_in_consumers(&self) -> bool {
        false
    }
}

/// Exchanges two tensors between two devices as one operation: `a.recv`
/// (on `a`'s device) receives `b.offer`, and `b.recv` receives `a.offer`.
/// Each copy runs on the receiver's stream after the sender's last queued
/// work (the points are taken before either copy is queued, so neither side
/// waits for the other's copy), waiting with `policy`. Returns the points of
/// the two copies: a side may overwrite its `offer` only after the other's
/// point (the butterfly writes its next sum elsewhere, so the next exchange's
/// wait covers it).
pub fn exchange(
    a: (&Stream, &TensorRef, &TensorRef),
    b: (&Stream, &TensorRef, &TensorRef),
    policy: WaitPolicy,
) -> Result<(SyncPoint, SyncPoint), CompositeError> {
    let (a_ready, b_ready) = (a.0.last_point(), b.0.last_point());
    a.0.wait_or_relay(&b_ready, policy)?;
    let into_a = a.0.copy(b.1, a.2, None)?;
    b.0.wait_or_relay(&a_ready, policy)?;
    let into_b = b.0.copy(a.1, b.2, None)?;
    Ok((into_a, into_b))
}

/// The built-in collective: all-reduce by a butterfly (recursive doubling)
/// of exchanges and adds, with devices beyond the largest power of two
/// folded in before and served after; all-gather by copies of every peer's
/// slice and one graph of `copy_into`s per device.
#[derive(Default)]
pub struct Butterfly {
    graphs: Mutex<HashMap<String, Arc<Graph>>>,
    /// The add graphs by shape.
    adds: Mutex<HashMap<Vec<usize>, Arc<Graph>>>,
}

impl Butterfly {
    /// A butterfly collective.
    pub fn new() -> Butterfly {
        Butterfly::default()
    }

    fn graph(
        &self,
        key: String,
        build: impl FnOnce() -> Result<Graph, CompositeError>,
    ) -> Result<Arc<Graph>, CompositeError> {
        let mut graphs = self.graphs.lock();
        if let Some(g) = graphs.get(&key) {
            return Ok(g.clone());
        }
        let g = Arc::new(build()?);
        graphs.insert(key, g.clone());
        Ok(g)
    }

    /// The add graph of tensors of `dims`: leaves 0 and 1, the sum 2.
    fn add_graph(&self, dims: &[usize]) -> Result<Arc<Graph>, CompositeError> {
        let mut adds = self.adds.lock();
        if let Some(g) = adds.get(dims) {
            return Ok(g.clone());
        }
        let mut g = Graph::new();
        let x = g.leaf("a", DType::F32, dims, Flags::INPUT)?;
        let y = g.leaf("b", DType::F32, dims, Flags::INPUT)?;
        let sum = g.add(x, y)?;
        g.mark(sum, Flags::OUTPUT)?;
        let g = Arc::new(g);
        adds.insert(dims.to_vec(), g.clone());
        Ok(g)
    }

    /// `out = a + b` on `stream`, bound at the gate's first run.
    fn add(
        &self,
        steps: &mut BoundSteps,
        stream: &Stream,
        a: &TensorRef,
        b: &TensorRef,
        out: &TensorRef,
    ) -> Result<(), CompositeError> {
        steps.submit(stream, &[a, b, out], || {
            let graph = self.add_graph(a.shape().dims())?;
            let mut bindings = Bindings::new(&graph);
            bindings.bind(NodeId(0), a.clone())?;
            bindings.bind(NodeId(1), b.clone())?;
            bindings.bind(NodeId(2), out.clone())?;
            Ok(BoundGraph::new(bindings)?)
        })
    }

    fn all_reduce(
        &self,
        streams: &[Stream],
        io: &GateIo<'_>,
        policy: WaitPolicy,
        bound: &mut BoundSteps,
    ) -> Result<(), CompositeError> {
        bound.next = 0;
        let n = streams.len();
        let p = 1usize << (usize::BITS - 1 - n.leading_zeros());
        let steps = p.trailing_zeros() as usize;
        let mut cur: Vec<TensorRef> = io.inputs.to_vec();
        let mut writes = vec![0usize; n];
        let total = |d: usize| steps + usize::from(d + p < n);
        // Write k of device d: ping, pong, ping, ..., its output last.
        let mut next = |d: usize| -> TensorRef {
            let k = writes[d];
            writes[d] += 1;
            if k + 1 == total(d) {
                io.outputs[d].clone()
            } else {
                io.scratch[d][1 + k % 2].clone()
            }
        };
        if n == 1 {
            streams[0].copy(&io.inputs[0], &io.outputs[0], None)?;
            return Ok(());
        }
        // Fold devices p.. into 0..n-p.
        for i in 0..n - p {
            streams[i].wait_or_relay(&streams[p + i].last_point(), policy)?;
            streams[i].copy(&io.inputs[p + i], &io.scratch[i][0], None)?;
            let out = next(i);
            self.add(bound, &streams[i], &cur[i], &io.scratch[i][0], &out)?;
            cur[i] = out;
        }
        let mut mask = 1;
        while mask < p {
            // Per device, where its peer's sum is read from.
            let mut theirs: Vec<TensorRef> = Vec::with_capacity(p);
            for d in 0..p {
                let peer = d ^ mask;
                let direct = streams[d].raw().can_compute_on(&cur[peer].byte_range())
                    && streams[peer].raw().can_compute_on(&cur[d].byte_range());
                if d < peer && direct {
                    // Each side reads the other's sum in place (memory both
                    // address, such as CPU devices'), after the other's
                    // last work. The peer writes that sum's memory again
                    // only after a later gate's wait on this side's
                    // points, which come after this add.
                    let (a_ready, b_ready) = (streams[d].last_point(), streams[peer].last_point());
                    streams[d].wait_or_relay(&b_ready, policy)?;
                    streams[peer].wait_or_relay(&a_ready, policy)?;
                } else if d < peer {
                    let (a, b) = (&io.scratch[d][0], &io.scratch[peer][0]);
                    exchange((&streams[d], &cur[d], a), (&streams[peer], &cur[peer], b), policy)?;
                }
                theirs.push(if direct { cur[peer].clone() } else { io.scratch[d][0].clone() });
            }
            for d in 0..p {
                let out = next(d);
                self.add(bound, &streams[d], &cur[d], &theirs[d], &out)?;
                cur[d] = out;
            }
            mask <<= 1;
        }
        // Serve devices p.. from the ones they were folded into.
        for i in 0..n - p {
            streams[p + i].wait_or_relay(&streams[i].last_point(), policy)?;
            streams[p + i].copy(&io.outputs[i], &io.outputs[p + i], None)?;
        }
        Ok(())
    }

    fn all_gather(
        &self,
        streams: &[Stream],
        spec: &GateSpec,
        io: &GateIo<'_>,
        policy: WaitPolicy,
        bound: &mut BoundSteps,
    ) -> Result<(), CompositeError> {
        let GateKind::AllGather { axis, parts } = &spec.kind else {
            return Err(CompositeError::Unsupported { op: "all-gather", reason: "the gate is an all-reduce".into() });
        };
        let axis = *axis;
        bound.next = 0;
        let n = streams.len();
        let ready: Vec<SyncPoint> = streams.iter().map(|s| s.last_point()).collect();
        for (d, stream) in streams.iter().enumerate() {
            let mut slices: Vec<&TensorRef> = Vec::with_capacity(n + 1);
            for (peer, peer_ready) in ready.iter().enumerate() {
                if peer == d {
                    slices.push(&io.inputs[d]);
                    continue;
                }
                let recv = &io.scratch[d][peer - usize::from(peer > d)];
                stream.wait_or_relay(peer_ready, policy)?;
                stream.copy(&io.inputs[peer], recv, None)?;
                slices.push(recv);
            }
            slices.push(&io.outputs[d]);
            bound.submit(stream, &slices, || {
                let graph = self.graph(format!("gather{d}:{:?}:{axis}:{parts:?}", spec.dims), || {
                    let mut g = Graph::new();
                    let out = g.leaf("out", DType::F32, &spec.dims, Flags::OUTPUT)?;
                    for (peer, segments) in parts.iter().enumerate() {
                        let input = g.leaf(&format!("in{peer}"), DType::F32, &spec.input_dims(peer), Flags::INPUT)?;
                        let mut at = 0;
                        for r in segments {
                            let src = g.narrow(input, axis, at, r.len())?;
                            let dst = g.narrow(out, axis, r.start, r.len())?;
                            g.copy_into(dst, src)?;
                            at += r.len();
                        }
                    }
                    Ok(g)
                })?;
                let mut bindings = Bindings::new(&graph);
                bindings.bind_name("out", io.outputs[d].clone())?;
                for (peer, slice) in slices[..n].iter().enumerate() {
                    bindings.bind_name(&format!("in{peer}"), (*slice).clone())?;
                }
                Ok(BoundGraph::new(bindings)?)
            })?;
        }
        Ok(())
    }
}

impl Collective for Butterfly {
    fn name(&self) -> &'static str {
        "butterfly"
    }

    fn sums_in_consumers(&self) -> bool {
        true
    }

    fn scratch(&self, spec: &GateSpec, devices: usize) -> Vec<Vec<Vec<usize>>> {
        (0..devices)
            .map(|d| match &spec.kind {
                // A receive buffer, then the ping and pong of the sums
                // that are not the last.
                GateKind::AllReduce => {
                    let p = 1usize << (usize::BITS - 1 - devices.leading_zeros());
                    let writes = p.trailing_zeros() as usize + usize::from(devices > p);
                    vec![spec.dims.clone(); 1 + writes.saturating_sub(1).min(2)]
                }
                GateKind::AllGather { .. } => (0..devices).filter(|&p| p != d).map(|p| spec.input_dims(p)).collect(),
            })
            .collect()
    }

    fn run(
        &self,
        streams: &[Stream],
        spec: &GateSpec,
        io: &GateIo<'_>,
        policy: WaitPolicy,
    ) -> Result<(), CompositeError> {
        match &spec.kind {
            GateKind::AllReduce => io.kept.with(|bound| self.all_reduce(streams, io, policy, bound)),
            GateKind::AllGather { .. } => io.kept.with(|bound| self.all_gather(streams, spec, io, policy, bound)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::GateKept;

    #[test]
    fn a_gate_keeps_its_value_from_run_to_run_and_starts_over_for_another_type() {
        let kept = GateKept::default();
        for run in 1..=3 {
            assert_eq!(
                kept.with(|v: &mut Vec<u32>| {
                    v.push(run);
                    v.len()
                }),
                run as usize
            );
        }
        assert_eq!(kept.with(|s: &mut String| s.len()), 0, "another type starts from its default");
        assert_eq!(kept.with(|v: &mut Vec<u32>| v.len()), 0, "and replaced the first");
    }
}
