//! Running plans: every split on its device's stream, copies on the
//! consumer's stream after a wait on the producer's point, the host blocking
//! only where it asks (or under backpressure), and up to `copies` runs in
//! flight, each with its own crossing buffers.
//!
//! Slot `k = run % copies` owns one buffer per device for crossing tensors.
//! Before a split overwrites its slot's crossing outputs, its stream waits
//! for the copies of the run that used the slot last (they read those bytes
//! on other devices); inputs of the slot are rewritten only by the same
//! stream that read them, so stream order covers them.

use std::collections::VecDeque;
use std::sync::Arc;

use baton_core::backend::{into_devices, BoundGraph, Buffer, CopyPath, Device, IntoDevice, Stream, TensorRef};
use baton_core::graph::NodeId;
use baton_core::sync::SyncPoint;

use crate::error::SchedError;
use crate::plan::{EdgePath, Plan};
use crate::remote::RemoteEdges;
use crate::run::{Run, RunPoints};
use crate::split::LeafSource;
use crate::trace::Trace;

/// The caller's tensors for the original graph's leaves and outputs.
pub type CallerBindings<'a> = &'a dyn Fn(NodeId) -> Option<TensorRef>;

/// Counters of a runner's life.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunnerStats {
    /// Runs submitted.
    pub runs: u64,
    /// Times the host blocked inside the runner (backpressure, sync copies).
    pub host_waits: u64,
    /// Copies queued.
    pub copies: u64,
    /// Bytes those copies moved.
    pub bytes_copied: u64,
    /// Waits on other streams' points the runner queued in its last run.
    pub last_run_waits: u64,
}

struct Slot {
    buffers: Vec<Option<Buffer>>,
    /// Points of copies (on any stream) that read this slot's buffers, by the
    /// device whose buffer they read.
    readers: Vec<Vec<SyncPoint>>,
}

/// Runs plans over a fixed set of devices.
pub struct Runner {
    devices: Vec<Arc<dyn Device>>,
    streams: Vec<Stream>,
    slots: Vec<Slot>,
    in_flight: VecDeque<SyncPoint>,
    sync_copies: bool,
    stats: RunnerStats,
    trace: Option<Trace>,
    /// Runs in flight before `submit` blocks (at least the slots).
    max_in_flight: usize,
    /// Test-only mutation: the index of the wait to leave out of each run.
    mutation: Option<u64>,
    waits_this_run: u64,
    /// The splits' bound graphs by the tensors bound.
    bound: crate::bound::BoundCache,
    /// Devices of other processes, when the plan spans several.
    remote: Option<Arc<dyn RemoteEdges>>,
}

impl Runner {
    /// A runner over `devices` with one stream each and `copies` runs in
    /// flight at most (`--n-copies`).
    pub fn new(devices: impl IntoIterator<Item = impl IntoDevice>, copies: usize) -> Result<Runner, SchedError> {
        let devices = into_devices(devices);
        let streams = devices.iter().map(|d| d.new_stream()).collect::<Result<Vec<_>, _>>()?;
        let n = devices.len();
        let slots = (0..copies.max(1)).map(|_| Slot { buffers: vec![None; n], readers: vec![Vec::new(); n] }).collect();
        Ok(Runner {
            devices,
            streams,
            slots,
            in_flight: VecDeque::new(),
            sync_copies: false,
            stats: RunnerStats::default(),
            trace: None,
            max_in_flight: copies.max(1),
            mutation: None,
            waits_this_run: 0,
            bound: crate::bound::BoundCache::default(),
            remote: None,
        })
    }

    /// Lets up to `runs` runs be in flight before `submit` blocks (never
    /// fewer than the slots). With more runs than slots, a slot's next run
    /// waits, on the devices, for the copies of its previous one.
    pub fn set_max_in_flight(&mut self, runs: usize) {
        self.max_in_flight = runs.max(self.slots.len());
    }

    /// Keeps the old, fully synchronous behaviour: the host waits for each
    /// split before it submits the next (`--sync-copies`).
    pub fn set_sync_copies(&mut self, on: bool) {
        self.sync_copies = on;
    }

    /// For the mutation check of the hazard tracking: leave out wait number
    /// `index` (counting from 0 in each run: the slot-reuse waits and the
    /// producer waits of copies, in submission order). Never use it outside
    /// tests: the streams' hazard tracking then has to insert the wait.
    pub fn leave_out_wait(&mut self, index: Option<u64>) {
        self.mutation = index;
    }

    /// Whether the next wait is the one left out (and counts it).
    fn keep_next_wait(&mut self) -> bool {
        let index = self.waits_this_run;
        self.waits_this_run += 1;
        self.mutation != Some(index)
    }

    /// Runs plans that span several processes (ranks): only the splits of
    /// the devices `remote` calls local run here, and a crossing between a
    /// local and a remote device is a send or a receive through `remote`
    /// (see [`RemoteEdges`]). Every process builds the same plan and submits
    /// the same runs in the same order. `None`: every device is local.
    pub fn set_remote(&mut self, remote: Option<Arc<dyn RemoteEdges>>) {
        self.remote = remote;
    }

    /// The devices of other processes, when the plan spans several.
    pub fn remote(&self) -> Option<&Arc<dyn RemoteEdges>> {
        self.remote.as_ref()
    }

    /// Whether device `d` runs its work in this process.
    pub fn is_local(&self, d: usize) -> bool {
        self.remote.as_ref().is_none_or(|r| r.is_local(d))
    }

    /// Records a Chrome trace of every stream from now on.
    pub fn set_trace(&mut self, trace: Option<Trace>) {
        self.trace = trace;
    }

    /// The trace being recorded.
    pub fn trace(&self) -> Option<&Trace> {
        self.trace.as_ref()
    }

    /// The stream of device `d` (callers queue their input writes and output
    /// reads there, so stream order covers them).
    pub fn stream(&self, d: usize) -> &Stream {
        &self.streams[d]
    }

    /// The devices.
    pub fn devices(&self) -> &[Arc<dyn Device>] {
        &self.devices
    }

    /// How an edge from device `from` to device `to` goes, decided by the
    /// calls [`submit`](Self::submit) makes: the consumer's stream waits on
    /// the producer's point by [`Stream::wait_path`] (through
    /// `Stream::wait_or_relay`) and copies by [`Stream::copy_path`], asked
    /// of a buffer allocated on `from` as the crossing buffers are.
    pub fn edge_path(&self, from: usize, to: usize) -> Result<EdgePath, SchedError> {
        let (Some(producer), Some(consumer)) = (self.streams.get(from), self.streams.get(to)) else {
            return Err(SchedError::Binding {
                node: "edge".into(),
                reason: format!("no device {from} or {to} among {}", self.streams.len()),
            });
        };
        let probe = self.devices[from].alloc(64)?;
        Ok(EdgePath { wait: consumer.wait_path(&producer.last_point()), copy: consumer.copy_path(&probe.all()) })
    }

    /// Counters so far.
    pub fn stats(&self) -> RunnerStats {
        self.stats
    }

    fn host_wait(&mut self, point: &SyncPoint) -> Result<(), SchedError> {
        if !point.is_reached() {
            self.stats.host_waits += 1;
            point.wait().map_err(baton_core::backend::StreamError::from)?;
        }
        Ok(())
    }

    fn slot_buffer(&mut self, k: usize, d: usize, bytes: usize) -> Result<Buffer, SchedError> {
        match &self.slots[k].buffers[d] {
            Some(b) if b.len() >= bytes => Ok(b.clone()),
            _ => {
                // Work still using an old, smaller buffer holds its own handle.
                let b = self.devices[d].alloc(bytes.max(64))?;
                self.slots[k].buffers[d] = Some(b.clone());
                Ok(b)
            }
        }
    }

    /// As [`submit`](Self::submit), returning a [`Run`] the
    /// caller can wait on or cancel.
    pub fn submit_run(
        &mut self,
        plan: &Plan,
        bind: CallerBindings<'_>,
        inputs_ready: Option<&SyncPoint>,
    ) -> Result<Run, SchedError> {
        let points = self.submit(plan, bind, inputs_ready)?;
        let last = plan.splits.last().map_or(0, |s| s.device);
        let outputs = plan
            .splits
            .iter()
            .flat_map(|split| {
                split.outputs.iter().filter_map(|&(original, _)| {
                    let name = plan.graph.node(original).name.clone()?;
                    Some((name, points.splits[split.index].clone()))
                })
            })
            .collect();
        Ok(Run::new(points, outputs, &self.streams[last])?)
    }

    /// Submits one run of `plan` and returns at once with its points (unless
    /// `copies` runs are in flight: then the host waits for the oldest).
    /// `inputs_ready` is the point after which the caller's input tensors
    /// hold this run's data (when it wrote them on another stream).
    pub fn submit(
        &mut self,
        plan: &Plan,
        bind: CallerBindings<'_>,
        inputs_ready: Option<&SyncPoint>,
    ) -> Result<RunPoints, SchedError> {
        if self.in_flight.len() >= self.max_in_flight {
            if let Some(oldest) = self.in_flight.pop_front() {
                self.host_wait(&oldest)?;
            }
        }
        let k = (self.stats.runs % self.slots.len() as u64) as usize;
        self.stats.runs += 1;
        self.waits_this_run = 0;
        let mut buffers = Vec::with_capacity(plan.devices.len());
        for d in 0..plan.devices.len() {
            buffers.push(self.slot_buffer(k, d, plan.arenas[d].bytes)?);
        }
        let previous_readers: Vec<Vec<SyncPoint>> = std::mem::take(&mut self.slots[k].readers);
        self.slots[k].readers = vec![Vec::new(); plan.devices.len()];
        let mut waited_readers = vec![false; plan.devices.len()];
        let mut split_points: Vec<SyncPoint> = Vec::with_capacity(plan.splits.len());
        let mut inputs_read: Vec<SyncPoint> = Vec::new();
        // The crossing's index in the run: the tag of a send and its receive.
        let mut crossing: u32 = 0;
        // The last point of this process's own work (the run's end here).
        let mut last_local: Option<SyncPoint> = None;
        for split in &plan.splits {
            let d = split.device;
            let local = self.is_local(d);
            let stream = self.streams[d].clone();
            let region = |dev: usize, s: usize, original: NodeId| -> Result<TensorRef, SchedError> {
                let node = plan.graph.node(original);
                let offset = plan.arenas[dev].offsets.get(&(s, original)).copied().ok_or_else(|| {
                    SchedError::Binding { node: format!("node {}", original.0), reason: "no region in the plan".into() }
                })?;
                Ok(TensorRef::new(&buffers[dev], offset, node.dtype, node.layout.shape.dims())?)
            };
            // Outputs of this slot on device d are read by other devices'
            // copies of the previous run that used the slot.
            if local && !waited_readers[d] {
                waited_readers[d] = true;
                for p in &previous_readers[d] {
                    if self.keep_next_wait() {
                        self.traced_wait(&stream, p)?;
                    }
                }
            }
            let mut binds: Vec<(NodeId, TensorRef)> = Vec::with_capacity(split.leaves.len() + split.outputs.len());
            for leaf in &split.leaves {
                if let (Some(remote), LeafSource::Crossing { original, from }) = (self.remote.clone(), &leaf.source) {
                    let (original, from) = (*original, *from);
                    let from_device = match from {
                        Some(f) => plan.splits[f].device,
                        None => plan
                            .copies
                            .iter()
                            .find(|c| c.to_split == split.index && c.original == original)
                            .map_or(d, |c| c.from_device),
                    };
                    if from.is_none() || from_device != d {
                        crossing += 1;
                    }
                    let (tag, from_local) = (crossing, remote.is_local(from_device));
                    if !local && from_local && (from.is_none() || from_device != d) {
                        // This process holds the source: it sends.
                        let (src, producer) = match from {
                            Some(f) => (region(from_device, f, original)?, None),
                            None => (caller_leaf(bind, plan, original)?, inputs_ready),
                        };
                        let point = remote.send(&self.streams[from_device], &src, from_device, d, tag, producer)?;
                        match from {
                            Some(_) => self.slots[k].readers[from_device].push(point.clone()),
                            None => inputs_read.push(point.clone()),
                        }
                        self.stats.copies += 1;
                        self.stats.bytes_copied += src.bytes() as u64;
                        last_local = Some(point);
                    } else if local && !from_local {
                        // The source is elsewhere: this process receives.
                        let dst = region(d, split.index, original)?;
                        last_local = Some(remote.recv(&stream, &dst, from_device, d, tag)?);
                        binds.push((leaf.sub, dst));
                        continue;
                    }
                }
                if !local {
                    continue;
                }
                let tensor = match leaf.source {
                    LeafSource::Bound(original) => bind(original).ok_or_else(|| SchedError::Binding {
                        node: plan.graph.node(original).name.clone().unwrap_or_else(|| format!("node {}", original.0)),
                        reason: "not bound".into(),
                    })?,
                    LeafSource::Crossing { original, from: Some(from) } if plan.splits[from].device == d => {
                        region(d, from, original)?
                    }
                    LeafSource::Crossing { original, from } => {
                        let dst = region(d, split.index, original)?;
                        let (src, mut producer) = match from {
                            Some(f) => (region(plan.splits[f].device, f, original)?, Some(split_points[f].clone())),
                            None => (
                                bind(original).ok_or_else(|| SchedError::Binding {
                                    node: format!("node {}", original.0),
                                    reason: "a crossing leaf is not bound".into(),
                                })?,
                                inputs_ready.cloned(),
                            ),
                        };
                        if producer.is_some() && !self.keep_next_wait() {
                            producer = None;
                        }
                        let src_device = from.map(|f| plan.splits[f].device);
                        let point = self.traced_copy(&stream, &src, &dst, producer.as_ref())?;
                        match src_device {
                            Some(sd) => self.slots[k].readers[sd].push(point),
                            None => inputs_read.push(point),
                        }
                        self.stats.copies += 1;
                        self.stats.bytes_copied += dst.bytes() as u64;
                        dst
                    }
                };
                binds.push((leaf.sub, tensor));
            }
            if !local {
                // Another process runs it; its stand-in's point orders nothing.
                split_points.push(stream.last_point());
                continue;
            }
            for &(original, sub) in &split.crossings_out {
                if !split.outputs.iter().any(|&(o, _)| o == original) {
                    binds.push((sub, region(d, split.index, original)?));
                }
            }
            for &(original, sub) in &split.outputs {
                let t = bind(original).ok_or_else(|| SchedError::Binding {
                    node: plan.graph.node(original).name.clone().unwrap_or_else(|| format!("node {}", original.0)),
                    reason: "an output is not bound".into(),
                })?;
                if t.buffer().device() != self.devices[d].info().name {
                    return Err(SchedError::Binding {
                        node: format!("node {}", original.0),
                        reason: format!(
                            "bound on {}, but computed on {}",
                            t.buffer().device(),
                            self.devices[d].info().name
                        ),
                    });
                }
                binds.push((sub, t));
            }
            let bound = self.bound.bound(&split.graph, binds)?;
            let point = traced_compute(&self.trace, &stream, split, bound)?;
            if split.leaves.iter().any(|l| matches!(l.source, LeafSource::Bound(_))) {
                inputs_read.push(point.clone());
            }
            if self.sync_copies {
                self.host_wait(&point)?;
            }
            last_local = Some(point.clone());
            split_points.push(point);
        }
        let done = last_local
            .or_else(|| split_points.last().cloned())
            .ok_or_else(|| SchedError::Binding { node: "graph".into(), reason: "the plan has no split".into() })?;
        self.in_flight.push_back(done.clone());
        self.stats.last_run_waits = self.waits_this_run;
        // One point per stream is enough: the last one covers the earlier.
        inputs_read.sort_by_key(|p| (p.timeline().id(), std::cmp::Reverse(p.value())));
        inputs_read.dedup_by(|a, b| a.timeline().same_as(b.timeline()));
        Ok(RunPoints { splits: split_points, done, inputs_read })
    }

    fn traced_wait(&self, stream: &Stream, point: &SyncPoint) -> Result<(), SchedError> {
        let policy = stream.wait_policy();
        let wait = || stream.wait_or_relay(point, policy).map(|_| ()).map_err(SchedError::from);
        match &self.trace {
            Some(t) => t.around(stream, "wait", wait),
            None => wait(),
        }
    }

    /// The stream of the device that owns `tensor`'s memory.
    fn owner(&self, tensor: &TensorRef) -> Option<&Stream> {
        self.devices.iter().position(|d| d.info().name == tensor.buffer().device()).map(|i| &self.streams[i])
    }

    fn traced_copy(
        &self,
        stream: &Stream,
        src: &TensorRef,
        dst: &TensorRef,
        producer: Option<&SyncPoint>,
    ) -> Result<SyncPoint, SchedError> {
        if stream.copy_path(&src.byte_range()) == CopyPath::HostStaged {
            // Host-staged fallback: the source's own stream reads it.
            let src_stream = self.owner(src).ok_or_else(|| SchedError::Binding {
                node: "copy".into(),
                reason: format!("no stream of this runner owns {}", src.buffer().device()),
            })?;
            let copy = || stream.copy_staged(src_stream, src, dst, producer).map_err(SchedError::from);
            return match &self.trace {
                Some(t) => t.around(stream, "staged copy", copy),
                None => copy(),
            };
        }
        if let (Some(t), Some(p)) = (&self.trace, producer) {
            let policy = stream.wait_policy();
            t.around(stream, "wait", || stream.wait_or_relay(p, policy).map(|_| ()).map_err(SchedError::from))?;
        }
        match &self.trace {
            Some(t) => t.around(stream, "copy", || stream.copy(src, dst, producer).map_err(SchedError::from)),
            None => Ok(stream.copy(src, dst, producer)?),
        }
    }
}

/// The caller's tensor of a leaf that crosses devices.
fn caller_leaf(bind: CallerBindings<'_>, plan: &Plan, original: NodeId) -> Result<TensorRef, SchedError> {
    bind(original).ok_or_else(|| SchedError::Binding {
        node: plan.graph.node(original).name.clone().unwrap_or_else(|| format!("node {}", original.0)),
        reason: "a crossing leaf is not bound".into(),
    })
}

/// Computes `bound` on `stream` (traced as split `split.index` when
/// tracing).
fn traced_compute(
    trace: &Option<Trace>,
    stream: &Stream,
    split: &crate::split::Split,
    bound: &BoundGraph,
) -> Result<SyncPoint, SchedError> {
    match trace {
        Some(t) => t.around(stream, &format!("split {}", split.index), || {
            stream.compute_bound(bound).map_err(SchedError::from)
        }),
        None => Ok(stream.compute_bound(bound)?),
    }
}
