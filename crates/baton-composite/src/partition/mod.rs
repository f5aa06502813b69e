//! Partitioning a graph over the devices of a composite device.
//!
//! Every node gets a state (mirrored, split along an axis, or partial sums):
//! leaves take their binding's, computed nodes derive theirs from their
//! inputs by the op's rule ([`rules`]), views by mapping the split through
//! their strides ([`view`]). Each device gets a subgraph of its share of
//! every node ([`local`]). Where an input must change state, a mirrored
//! value is sliced locally (free), while a partial sum or a split value
//! needed whole ends the current segment: the value becomes a segment
//! output, a gate (all-reduce or all-gather) follows, and the next segment
//! reads the gate's result. The result is a list of steps, segments and
//! gates, built once per graph and bindings' splits, and run again for
//! every computation of that graph.

mod fold;
mod grouped;
pub(crate) mod local;
mod rules;
pub mod view;

use std::collections::HashMap;
use std::sync::Arc;

use baton_core::backend::{Bindings, Device, TensorRef};
use baton_core::graph::{Flags, Graph, NodeId, Op};
use baton_core::shape::{Layout, Shape};
use baton_core::DType;

use crate::buffer::CompositeBuffer;
use crate::collective::{Collective, GateKind, GateSpec};
use crate::error::CompositeError;
use crate::prepared::Prepared;
use crate::split::TensorSplit;

/// Where a subgraph's leaf or output lives on one device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// That device's part of the tensor bound to this node of the original
    /// graph.
    Bound(NodeId),
    /// The partition's own memory on that device (an index into it).
    Scratch(usize),
    /// The partition's memory on another device, which this one addresses
    /// directly: a peer's partial sum that a folded all-reduce leaves to
    /// its consumers.
    Peer {
        /// The device whose memory it is.
        device: usize,
        /// The index into that device's scratch.
        index: usize,
    },
}

/// A run of nodes that needs nothing from other devices: one subgraph per
/// device.
pub struct Segment {
    /// Per device, the subgraph.
    pub graphs: Vec<Arc<Graph>>,
    /// Per device, the memory of each leaf and output of the subgraph.
    pub binds: Vec<Vec<(NodeId, Source)>>,
}

/// A gate: every device waits for the others.
pub struct Gate {
    /// What it computes.
    pub spec: GateSpec,
    /// The node of the original graph whose value it brings together.
    pub node: NodeId,
    /// Per device, its input.
    pub inputs: Vec<Source>,
    /// Per device, its output.
    pub outputs: Vec<Source>,
    /// Per device, the collective's scratch (indices into the partition's).
    pub scratch: Vec<Vec<usize>>,
    /// An all-reduce whose sum is left to its consumers (devices that
    /// address each other's memory, a collective that allows it): here each
    /// device only waits for the others, and the segment that reads the sum
    /// adds every device's partial itself, in device order, so every device
    /// gets the same bits. No outputs, no scratch, no items of the
    /// collective.
    pub folded: bool,
}

/// One step of a partition.
pub enum Step {
    /// Computation on every device.
    Segment(Segment),
    /// A collective.
    Gate(Gate),
}

/// A graph partitioned over N devices.
pub struct Partition {
    /// Segments and gates, in order.
    pub steps: Vec<Step>,
    /// Per device, the type and dimensions of each scratch tensor.
    pub scratch_specs: Vec<Vec<(DType, Vec<usize>)>>,
    /// Per node of the original graph, its state (mirrored, split, partial).
    pub states: Vec<TensorSplit>,
    pub(crate) scratch: Vec<Vec<TensorRef>>,
    /// The bound nodes the steps read or write, each once: where their
    /// tensors are decides whether prepared memory can be reused.
    pub(crate) bound_sources: Vec<NodeId>,
    /// The memory of recent runs' steps, by where their bound tensors were
    /// (reused while they stay).
    pub(crate) bindings: BindingsCache,
}

/// Prepared per-device bindings of every segment, keyed by where the bound
/// tensors are.
pub(crate) type BindingsCache = baton_core::loom::Mutex<Vec<(Vec<(u64, usize)>, Arc<Vec<Prepared>>)>>;

impl Partition {
    /// Builds the partition of `graph` over `devices` devices whose bound
    /// nodes are held as `bound` says (`None`: mirrored), every gate run by
    /// `collective`.
    pub fn build(
        graph: &Graph,
        bound: Vec<Option<TensorSplit>>,
        devices: usize,
        collective: &dyn Collective,
    ) -> Result<Partition, CompositeError> {
        Self::build_with(graph, bound, devices, collective, false)
    }

    /// As [`build`](Self::build); with `fold`, all-reduces are left to
    /// their consumers ([`Gate::folded`]): for devices that address each
    /// other's memory, under a collective that
    /// [allows it](Collective::sums_in_consumers).
    pub fn build_with(
        graph: &Graph,
        bound: Vec<Option<TensorSplit>>,
        devices: usize,
        collective: &dyn Collective,
        fold: bool,
    ) -> Result<Partition, CompositeError> {
        Self::build_windowed(graph, bound, Vec::new(), devices, collective, fold)
    }

    /// As [`build_with`](Self::build_with), where `windows[i]` says that the
    /// split tensor bound to node `i` is windowed ([`bound_windows`](Self::bound_windows)):
    /// each device's part holds the whole tensor, and the device reads its
    /// share as a strided view of it (missing entries: not windowed).
    pub fn build_windowed(
        graph: &Graph,
        bound: Vec<Option<TensorSplit>>,
        windows: Vec<bool>,
        devices: usize,
        collective: &dyn Collective,
        fold: bool,
    ) -> Result<Partition, CompositeError> {
        let mut builder = Builder::new(graph, bound, devices, collective);
        builder.windows = windows;
        builder.fold = fold && devices > 1;
        builder.run()
    }

    /// Which of `bindings`' nodes are bound to windowed split tensors
    /// ([`SplitTensor::windowed`](crate::SplitTensor::windowed), for
    /// [`build_windowed`](Self::build_windowed)).
    pub fn bound_windows(graph: &Graph, bindings: &Bindings) -> Vec<bool> {
        let mut out = vec![false; graph.nodes().len()];
        for id in graph.bound_nodes() {
            out[id.0] = bindings.get(id).and_then(|t| CompositeBuffer::of(t.buffer())).is_some_and(|b| b.windowed());
        }
        out
    }

    /// The splits of the tensors bound to `bindings`' nodes (for
    /// [`build`](Self::build)).
    pub fn bound_splits(graph: &Graph, bindings: &Bindings) -> Vec<Option<TensorSplit>> {
        let mut out = vec![None; graph.nodes().len()];
        for id in graph.bound_nodes() {
            out[id.0] = bindings.get(id).and_then(|t| CompositeBuffer::of(t.buffer())).map(|b| b.split());
        }
        out
    }

    /// Allocates the scratch memory on the inner devices.
    pub fn allocate(&mut self, devices: &[Arc<dyn Device>]) -> Result<(), CompositeError> {
        self.scratch = Vec::with_capacity(devices.len());
        for (device, specs) in devices.iter().zip(&self.scratch_specs) {
            let mut tensors = Vec::with_capacity(specs.len());
            for (dtype, dims) in specs {
                tensors.push(device.alloc_tensor(*dtype, dims)?);
            }
            self.scratch.push(tensors);
        }
        Ok(())
    }

    /// Gates per computation.
    pub fn gates(&self) -> impl Iterator<Item = &Gate> {
        self.steps.iter().filter_map(|s| match s {
            Step::Gate(g) => Some(g),
            Step::Segment(_) => None,
        })
    }

    /// Segments per computation.
    pub fn segments(&self) -> usize {
        self.steps.len() - self.gates().count()
    }

    /// Bytes of scratch memory on each device.
    pub fn scratch_bytes(&self) -> Vec<usize> {
        let bytes = |(t, d): &(DType, Vec<usize>)| d.iter().product::<usize>() * t.block_bytes();
        self.scratch_specs.iter().map(|s| s.iter().map(bytes).sum()).collect()
    }
}

/// What the builder knows of a view node.
struct ViewPlan {
    /// Per device, its absolute layout.
    layouts: Vec<Layout>,
    /// When the view could not keep the split: the root, gathered first.
    on_gathered: Option<NodeId>,
}

#[derive(Default)]
struct SegmentBuild {
    graphs: Vec<Graph>,
    binds: Vec<Vec<(NodeId, Source)>>,
    /// Original node -> per device local node, in its natural state.
    local: HashMap<NodeId, Vec<NodeId>>,
    /// Converted values (gathered, sliced) imported or built here.
    converted: HashMap<(NodeId, TensorSplit), Vec<NodeId>>,
    computed: usize,
}

enum StepBuild {
    Segment(SegmentBuild),
    Gate(Gate),
}

struct Builder<'a> {
    graph: &'a Graph,
    n: usize,
    collective: &'a dyn Collective,
    bound: Vec<Option<TensorSplit>>,
    /// Per bound node, whether its split tensor is windowed (each part the
    /// whole tensor; see `import`).
    windows: Vec<bool>,
    state: Vec<TensorSplit>,
    views: HashMap<NodeId, ViewPlan>,
    steps: Vec<StepBuild>,
    cur: SegmentBuild,
    /// Computed node -> index in `steps` of its segment, or `None` while it
    /// is the current one.
    produced: HashMap<NodeId, Option<usize>>,
    /// Per node, its value in memory in its natural state.
    homes: HashMap<NodeId, Vec<Source>>,
    /// Per node, its gathered (mirrored) value in memory.
    gathered: HashMap<NodeId, Vec<Source>>,
    scratch: Vec<Vec<(DType, Vec<usize>)>>,
    /// Leaves made so far (their names).
    leaves: usize,
    /// Whether all-reduces are left to their consumers.
    fold: bool,
    /// Per folded all-reduce, each device's partial (a scratch index).
    folded: HashMap<NodeId, Vec<usize>>,
}

impl<'a> Builder<'a> {
    fn new(graph: &'a Graph, bound: Vec<Option<TensorSplit>>, n: usize, collective: &'a dyn Collective) -> Self {
        Builder {
            graph,
            n,
            collective,
            bound,
            windows: Vec::new(),
            state: vec![TensorSplit::Mirror; graph.nodes().len()],
            views: HashMap::new(),
            steps: Vec::new(),
            cur: Self::segment(n),
            produced: HashMap::new(),
            homes: HashMap::new(),
            gathered: HashMap::new(),
            scratch: vec![Vec::new(); n],
            leaves: 0,
            fold: false,
            folded: HashMap::new(),
        }
    }

    fn segment(n: usize) -> SegmentBuild {
        SegmentBuild { graphs: vec![Graph::new(); n], binds: vec![Vec::new(); n], ..Default::default() }
    }

    fn fail(&self, id: NodeId, reason: impl Into<String>) -> CompositeError {
        let node = self.graph.node(id);
        CompositeError::Partition {
            node: node.name.clone().unwrap_or_else(|| format!("#{}", id.0)),
            op: node.op.name(),
            reason: reason.into(),
        }
    }

    fn dims(&self, id: NodeId) -> Vec<usize> {
        self.graph.node(id).layout.shape.dims().to_vec()
    }

    fn new_scratch(&mut self, d: usize, dtype: DType, dims: Vec<usize>) -> usize {
        self.scratch[d].push((dtype, dims));
        self.scratch[d].len() - 1
    }

    /// Ends the current segment (dropped if it computes nothing).
    fn close(&mut self) {
        let done = std::mem::replace(&mut self.cur, Self::segment(self.n));
        if done.computed > 0 {
            let index = self.steps.len();
            for slot in self.produced.values_mut().filter(|s| s.is_none()) {
                *slot = Some(index);
            }
            self.steps.push(StepBuild::Segment(done));
        }
    }

    /// New leaves in the current segment over `sources` (one per device).
    fn import(&mut self, id: NodeId, sources: &[Source], state: &TensorSplit) -> Result<Vec<NodeId>, CompositeError> {
        if sources.len() != self.n {
            // A folded gate has no memory: its sum comes from `folded_sum`.
            return Err(self.fail(id, "no memory to import (a folded all-reduce)"));
        }
        let node = self.graph.node(id);
        let full = self.dims(id);
        self.leaves += 1;
        let name = format!("in.{}.{}", id.0, self.leaves);
        let flags = if matches!(node.op, Op::Leaf) { node.flags } else { Flags::INPUT };
        let flags = if flags.contains(Flags::OUTPUT) { Flags::INPUT } else { flags };
        let windowed = matches!(node.op, Op::Leaf) && self.windowed(id);
        let mut out = Vec::with_capacity(self.n);
        for (d, source) in sources.iter().enumerate() {
            let local = state.local_dims(&full, d);
            let g = &mut self.cur.graphs[d];
            let leaf = g.leaf(&name, node.dtype, if windowed { &full } else { &local }, flags)?;
            self.cur.binds[d].push((leaf, source.clone()));
            out.push(if windowed { Self::window(g, leaf, node.dtype, &full, state, d)? } else { leaf });
        }
        Ok(out)
    }

    /// Whether node `id` is bound to a windowed split tensor.
    fn windowed(&self, id: NodeId) -> bool {
        self.windows.get(id.0).copied().unwrap_or(false)
    }

    /// Device `d`'s share of a windowed leaf (the whole tensor of `full`
    /// dims): a view of its segment of the split dimension, strided as the
    /// whole tensor (rows of a quantized type stay whole blocks: the split
    /// checked that its segments cut none).
    fn window(
        g: &mut Graph,
        leaf: NodeId,
        dtype: DType,
        full: &[usize],
        state: &TensorSplit,
        d: usize,
    ) -> Result<NodeId, CompositeError> {
        let TensorSplit::Split { axis, parts } = state else { return Ok(leaf) };
        let [segment] = parts[d].as_slice() else {
            return Err(CompositeError::Unsupported { op: "partition", reason: "a window of several segments".into() });
        };
        let bad = |reason: String| CompositeError::BadSplit { dims: full.to_vec(), reason };
        let whole =
            Shape::new(full).and_then(|shape| Layout::contiguous(dtype, shape)).map_err(|e| bad(e.to_string()))?;
        let offset = if *axis + 1 == full.len() {
            dtype.row_bytes(segment.start).ok_or_else(|| bad(format!("segment {segment:?} cuts a block of {dtype}")))?
        } else {
            segment.start * whole.strides()[*axis]
        };
        Ok(g.view(leaf, &state.local_dims(full, d), whole.strides(), offset)?)
    }

    /// `id`'s value in the current segment, in its natural state.
    fn local(&mut self, id: NodeId) -> Result<Vec<NodeId>, CompositeError> {
        if let Some(v) = self.cur.local.get(&id) {
            return Ok(v.clone());
        }
        let node = self.graph.node(id);
        let state = self.state[id.0].clone();
        let v = match node.op {
            Op::Leaf => self.import(id, &vec![Source::Bound(id); self.n], &state)?,
            Op::View => {
                let plan_root = self.views.get(&id).and_then(|p| p.on_gathered);
                let input = match plan_root {
                    Some(root) => self.gathered_local(root)?,
                    None => self.local(node.inputs[0])?,
                };
                let layouts =
                    self.views.get(&id).map(|p| p.layouts.clone()).ok_or_else(|| self.fail(id, "view not planned"))?;
                let mut out = Vec::with_capacity(self.n);
                for d in 0..self.n {
                    out.push(local::apply(&mut self.cur.graphs[d], node, &[input[d]], &layouts[d])?);
                }
                out
            }
            Op::ScatterRows | Op::CopyInto => self.local(node.inputs[0])?,
            _ => {
                let sources = self.home(id)?;
                self.import(id, &sources, &state)?
            }
        };
        self.cur.local.insert(id, v.clone());
        Ok(v)
    }

    /// Marks `id`'s local nodes in segment `seg` as outputs in new scratch
    /// (or returns where they are already bound).
    fn home(&mut self, id: NodeId) -> Result<Vec<Source>, CompositeError> {
        if let Some(h) = self.homes.get(&id) {
            return Ok(h.clone());
        }
        let (dtype, full, state) = (self.graph.node(id).dtype, self.dims(id), self.state[id.0].clone());
        let mut sources = Vec::with_capacity(self.n);
        for d in 0..self.n {
            let k = self.new_scratch(d, dtype, state.local_dims(&full, d));
            sources.push(Source::Scratch(k));
        }
        let seg = match self.produced.get(&id) {
            Some(Some(index)) => match &mut self.steps[*index] {
                StepBuild::Segment(s) => s,
                StepBuild::Gate(_) => return Err(self.fail(id, "produced by a gate")),
            },
            Some(None) => &mut self.cur,
            None => return Err(self.fail(id, "used before it is computed")),
        };
        let locals = seg.local.get(&id).cloned().ok_or(CompositeError::Partition {
            node: format!("#{}", id.0),
            op: "home",
            reason: "not in its segment".into(),
        })?;
        for d in 0..self.n {
            seg.graphs[d].mark(locals[d], Flags::OUTPUT)?;
            seg.binds[d].push((locals[d], sources[d].clone()));
        }
        self.homes.insert(id, sources.clone());
        Ok(sources)
    }

    /// Where `id`'s current-segment value is in memory, for a gate's input.
    fn gate_input(&mut self, id: NodeId) -> Result<Vec<Source>, CompositeError> {
        let node = self.graph.node(id);
        if !matches!(node.op, Op::Leaf | Op::View | Op::ScatterRows | Op::CopyInto) {
            return self.home(id);
        }
        let locals = self.local(id)?;
        if matches!(node.op, Op::Leaf) {
            return Ok(vec![Source::Bound(id); self.n]);
        }
        // A view: made contiguous into scratch.
        let (dtype, full, state) = (node.dtype, self.dims(id), self.state[id.0].clone());
        let mut sources = Vec::with_capacity(self.n);
        for (d, &l) in locals.iter().enumerate() {
            let c = self.cur.graphs[d].contiguous(l)?;
            self.cur.graphs[d].mark(c, Flags::OUTPUT)?;
            let k = self.new_scratch(d, dtype, state.local_dims(&full, d));
            self.cur.binds[d].push((c, Source::Scratch(k)));
            sources.push(Source::Scratch(k));
        }
        self.cur.computed += 1;
        Ok(sources)
    }

    /// Brings `id` together on every device with a gate (once per node),
    /// into `outputs` (new scratch when `None`), and returns where. A folded
    /// all-reduce has no such memory: the list is empty, and its consumers
    /// add the partials (`folded_sum`; `import` refuses an empty list).
    fn gather(&mut self, id: NodeId, outputs: Option<Vec<Source>>) -> Result<Vec<Source>, CompositeError> {
        if let (Some(g), None) = (self.gathered.get(&id), &outputs) {
            return Ok(g.clone());
        }
        if outputs.is_none() && self.folded.contains_key(&id) {
            // Summed by its consumers (`folded_sum`).
            return Ok(Vec::new());
        }
        let node = self.graph.node(id);
        if outputs.is_none() && matches!(node.op, Op::Leaf) && self.windowed(id) {
            // Every device's part holds the whole tensor: it is gathered as
            // bound, without a gate.
            let whole = vec![Source::Bound(id); self.n];
            self.gathered.insert(id, whole.clone());
            return Ok(whole);
        }
        if node.dtype != DType::F32 {
            return Err(self.fail(id, format!("a gate needs f32, not {}", node.dtype)));
        }
        let kind = match &self.state[id.0] {
            TensorSplit::Partial => GateKind::AllReduce,
            TensorSplit::Split { axis, parts } => GateKind::AllGather { axis: *axis, parts: parts.clone() },
            TensorSplit::Mirror => return Err(self.fail(id, "a mirrored value needs no gate")),
        };
        let inputs = self.gate_input(id)?;
        self.close();
        let spec = GateSpec { kind, dims: self.dims(id) };
        if outputs.is_none() && self.fold_gate(id, &spec, &inputs) {
            return Ok(Vec::new());
        }
        let outputs = match outputs {
            Some(o) => o,
            None => (0..self.n).map(|d| Source::Scratch(self.new_scratch(d, DType::F32, spec.dims.clone()))).collect(),
        };
        let needs = self.collective.scratch(&spec, self.n);
        let scratch = needs
            .into_iter()
            .enumerate()
            .map(|(d, list)| list.into_iter().map(|dims| self.new_scratch(d, DType::F32, dims)).collect())
            .collect();
        self.steps.push(StepBuild::Gate(Gate {
            spec,
            node: id,
            inputs,
            outputs: outputs.clone(),
            scratch,
            folded: false,
        }));
        self.gathered.entry(id).or_insert(outputs.clone());
        Ok(outputs)
    }

    /// `id` gathered, as leaves of the current segment.
    fn gathered_local(&mut self, id: NodeId) -> Result<Vec<NodeId>, CompositeError> {
        let key = (id, TensorSplit::Mirror);
        if let Some(v) = self.cur.converted.get(&key) {
            return Ok(v.clone());
        }
        if let Some(v) = self.folded_sum(id)? {
            self.cur.converted.insert(key, v.clone());
            return Ok(v);
        }
        let sources = self.gather(id, None)?;
        let v = self.import(id, &sources, &TensorSplit::Mirror)?;
        self.cur.converted.insert(key, v.clone());
        Ok(v)
    }

    /// `id` in state `want` in the current segment (gates already done).
    fn value_in(&mut self, id: NodeId, want: &TensorSplit) -> Result<Vec<NodeId>, CompositeError> {
        let have = self.state[id.0].clone();
        if have == *want {
            return self.local(id);
        }
        let key = (id, want.clone());
        if let Some(v) = self.cur.converted.get(&key) {
            return Ok(v.clone());
        }
        let whole = if have == TensorSplit::Mirror { self.local(id)? } else { self.gathered_local(id)? };
        let v = match want {
            TensorSplit::Mirror => whole,
            TensorSplit::Split { axis, parts } => {
                let mut out = Vec::with_capacity(self.n);
                for (d, segments) in parts.iter().enumerate() {
                    let [r] = segments.as_slice() else {
                        return Err(self.fail(id, "slicing into several segments"));
                    };
                    let g = &mut self.cur.graphs[d];
                    let narrow = g.narrow(whole[d], *axis, r.start, r.len())?;
                    out.push(g.contiguous(narrow)?);
                }
                self.cur.computed += 1;
                out
            }
            TensorSplit::Partial => return Err(self.fail(id, "no op asks for partial sums of a whole value")),
        };
        self.cur.converted.insert(key, v.clone());
        Ok(v)
    }

    fn plan_view(&mut self, id: NodeId) -> Result<(), CompositeError> {
        let node = self.graph.node(id);
        let root = self.graph.storage_root(id);
        if self.windowed(root) {
            // Its local value is already a view of the whole tensor, which
            // the layouts below (over a part stored alone) do not describe.
            return Err(self.fail(id, "a view of a windowed tensor (use it whole)"));
        }
        let plan = match &self.state[root.0] {
            TensorSplit::Split { axis, parts } => {
                let root_dims = self.dims(root);
                match view::split_view(node.dtype, &root_dims, *axis, parts, &node.layout) {
                    Some(sv) => {
                        self.state[id.0] = TensorSplit::Split { axis: sv.axis, parts: sv.parts };
                        ViewPlan { layouts: sv.layouts, on_gathered: None }
                    }
                    None if matches!(self.graph.node(root).op, Op::Leaf) => {
                        return Err(self.fail(id, "a view across the split of a bound tensor"))
                    }
                    None => {
                        self.state[id.0] = TensorSplit::Mirror;
                        ViewPlan { layouts: vec![node.layout; self.n], on_gathered: Some(root) }
                    }
                }
            }
            other => {
                self.state[id.0] = other.clone();
                ViewPlan { layouts: vec![node.layout; self.n], on_gathered: None }
            }
        };
        self.views.insert(id, plan);
        Ok(())
    }

    fn run(mut self) -> Result<Partition, CompositeError> {
        let mut late_outputs = Vec::new();
        for (i, node) in self.graph.nodes().iter().enumerate() {
            let id = NodeId(i);
            match node.op {
                Op::Leaf => {
                    self.state[i] = self.bound[i].clone().unwrap_or(TensorSplit::Mirror);
                    continue;
                }
                Op::View => {
                    self.plan_view(id)?;
                    continue;
                }
                _ => {}
            }
            let states: Vec<TensorSplit> = node.inputs.iter().map(|x| self.state[x.0].clone()).collect();
            let rule = rules::rule_of(self.graph, node, &states);
            if matches!(node.op, Op::ScatterRows | Op::CopyInto) && rule.output == TensorSplit::Partial {
                return Err(self.fail(id, "writing into partial sums"));
            }
            // Gates first: each ends the segment, so inputs are fetched after.
            for (x, want) in node.inputs.iter().zip(&rule.inputs) {
                if *want != self.state[x.0] && self.state[x.0] != TensorSplit::Mirror {
                    self.gather(*x, None)?;
                }
                if let Some(root) = self.views.get(x).and_then(|p| p.on_gathered) {
                    self.gather(root, None)?;
                }
            }
            let mut inputs = Vec::with_capacity(node.inputs.len());
            for (x, want) in node.inputs.iter().zip(&rule.inputs) {
                inputs.push(self.value_in(*x, want)?);
            }
            let mut out = Vec::with_capacity(self.n);
            for d in 0..self.n {
                let ins: Vec<NodeId> = inputs.iter().map(|v| v[d]).collect();
                out.push(match rule.grouped {
                    Some(grouped) => self.grouped_product(id, d, &ins, &rule, grouped)?,
                    None => local::apply(&mut self.cur.graphs[d], node, &ins, &node.layout)?,
                });
            }
            self.cur.computed += 1;
            self.state[i] = rule.output.clone();
            self.cur.local.insert(id, out.clone());
            if !node.op.aliases_input() {
                self.produced.insert(id, None);
            }
            if node.flags.contains(Flags::OUTPUT) && !node.op.aliases_input() {
                let want = self.bound[i].clone().unwrap_or(TensorSplit::Mirror);
                if want == rule.output {
                    for (d, &l) in out.iter().enumerate() {
                        self.cur.graphs[d].mark(l, Flags::OUTPUT)?;
                        self.cur.binds[d].push((l, Source::Bound(id)));
                    }
                    self.homes.insert(id, vec![Source::Bound(id); self.n]);
                } else {
                    late_outputs.push((id, want));
                }
            }
        }
        for (id, want) in late_outputs {
            if want != TensorSplit::Mirror {
                return Err(
                    self.fail(id, format!("an output bound as {want:?} but computed as {:?}", self.state[id.0]))
                );
            }
            self.gather(id, Some(vec![Source::Bound(id); self.n]))?;
        }
        self.close();
        let steps: Vec<Step> = self
            .steps
            .into_iter()
            .map(|s| match s {
                StepBuild::Gate(g) => Step::Gate(g),
                StepBuild::Segment(s) => {
                    Step::Segment(Segment { graphs: s.graphs.into_iter().map(Arc::new).collect(), binds: s.binds })
                }
            })
            .collect();
        let bound_sources = bound_sources(&steps);
        Ok(Partition {
            steps,
            scratch_specs: self.scratch,
            states: self.state,
            scratch: Vec::new(),
            bound_sources,
            bindings: baton_core::loom::Mutex::new(Vec::new()),
        })
    }
}

/// Every bound node the steps name (segments' bindings, gates' memory),
/// once each, in step order.
fn bound_sources(steps: &[Step]) -> Vec<NodeId> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for step in steps {
        let sources: Vec<&Source> = match step {
            Step::Segment(seg) => seg.binds.iter().flatten().map(|(_, s)| s).collect(),
            Step::Gate(gate) => gate.inputs.iter().chain(&gate.outputs).collect(),
        };
        for source in sources {
            if let Source::Bound(id) = source {
                if seen.insert(*id) {
                    out.push(*id);
                }
            }
        }
    }
    out
}
