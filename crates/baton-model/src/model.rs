//! A loaded model on one or more devices: evaluate tokens, get logits.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use baton_composite::{CompositeBuffer, CompositeDevice, Partition};
use baton_core::backend::{
    into_devices, Bindings, Buffer, Device, DeviceMemory, IntoDevice, Pending, Stream, TensorRef,
};
use baton_core::graph::{Graph, Op};
use baton_core::sync::SyncPoint;
use baton_core::DType;
use baton_gguf::{GgufFile, OptionalKey};
use baton_sched::{Plan, RemoteEdges, RunPoints, Runner, RunnerStats, SchedError, Trace};
use baton_tokenizer::Tokenizer;

use crate::config::LlamaConfig;
use crate::error::ModelError;
use crate::graph::{self, BatchShape, CacheGeometry, GraphShape, Logits, SeqShape, WeightTypes};
use crate::kv_copy::SavedPrefix;
use crate::memory::ModelMemory;
use crate::tensor_parallel::TensorShares;
use crate::weights::{KvCache, KvTypes, Weights};

/// Makes the runner's edges to other processes, given the runner (its
/// streams); see [`Model::load_over_ranks`].
pub type MakeRemoteEdges<'a> = dyn Fn(&Runner) -> Result<Arc<dyn RemoteEdges>, SchedError> + 'a;

/// The GGUF key of a model's chat template (llama.cpp's).
pub const CHAT_TEMPLATE_KEY: &str = "tokenizer.chat_template";

/// Options of loading a model.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Positions the KV cache holds per sequence (`-c`); `None` = the
    /// model's context, capped at 4096.
    pub context: Option<usize>,
    /// Sequences the KV cache holds (`--parallel`), each with its own
    /// `context` positions; see [`Model::eval_batch`].
    pub slots: usize,
    /// Element type of the KV cache's keys (`-ctk`), and of its values
    /// unless `cache_type_v` says otherwise: f16 like llama.cpp, f32, bf16,
    /// or the block types q8_0 and q4_0 (whose blocks must divide the head
    /// size).
    pub cache_type: DType,
    /// Element type of the values (`-ctv`), if not `cache_type`.
    pub cache_type_v: Option<DType>,
    /// Most tokens one evaluation takes (`-b`/`-ub`).
    pub batch: usize,
    /// Share of the layers of each device (`--tensor-split`); empty = even.
    pub tensor_split: Vec<f32>,
    /// Runs in flight at most (`--n-copies`), each with its own copies of
    /// the activations that cross devices.
    pub n_copies: usize,
    /// The host waits for every split before submitting the next
    /// (`--sync-copies`, for comparison).
    pub sync_copies: bool,
    /// Under tensor parallelism, hold whole every weight whose split would
    /// give partial sums (`attn_output`, `ffn_down`) and gather its input
    /// instead (`--tensor-exact`): the logits are then bit for bit one
    /// device's, at the price of computing those products on every device.
    pub tensor_exact: bool,
    /// Devices that can read the file's pages in place (the CPU) map the
    /// weights rather than copy them (`--no-mmap` turns it off): they are
    /// then held once, as the packed forms replace the mapped pages. The
    /// file must stay unchanged while the model lives.
    pub mmap: bool,
    /// In a step of several sequences, one attention node per sequence and
    /// layer even where the devices attend in slots (for comparisons; the
    /// logits are the same bits either way).
    pub attention_per_sequence: bool,
}

impl LoadOptions {
    /// The KV cache's key and value types.
    pub fn kv_types(&self) -> KvTypes {
        KvTypes { k: self.cache_type, v: self.cache_type_v.unwrap_or(self.cache_type) }
    }
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            context: None,
            slots: 1,
            cache_type: DType::F16,
            cache_type_v: None,
            batch: 512,
            tensor_split: Vec::new(),
            n_copies: 1,
            sync_copies: false,
            tensor_exact: false,
            mmap: true,
            attention_per_sequence: false,
        }
    }
}

/// A batched step in flight ([`Model::submit_batch`]); its logits are read
/// once with [`Model::batch_logits`].
#[derive(Debug)]
#[must_use = "a step's logits are read with Model::batch_logits"]
pub struct BatchTicket {
    /// Its run's input (and logits) slot.
    slot: usize,
    /// The slot's serial when submitted: a later run in the slot makes the
    /// ticket stale.
    serial: u64,
    /// Reached when the step is done.
    done: SyncPoint,
    /// The logits it fills.
    logits: TensorRef,
    /// The hidden states it fills, when some were asked for
    /// ([`Model::submit_batch_hidden`]).
    hidden: Option<TensorRef>,
}

/// One sequence's tokens in a batched evaluation ([`Model::eval_batch`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqStep<'a> {
    /// Its KV cache slot (`0..slots`).
    pub slot: usize,
    /// Positions of the slot already evaluated: the tokens go to
    /// `past..past + tokens.len()`.
    pub past: usize,
    /// The new tokens.
    pub tokens: &'a [u32],
}

/// Plans and graphs kept per model (one per evaluation shape seen recently).
const PLAN_CACHE: usize = 16;

/// The device of each layer: contiguous ranges in proportion to `split`.
pub fn layer_devices(layers: usize, devices: usize, split: &[f32]) -> Vec<usize> {
    let weights: Vec<f64> =
        if split.len() == devices && split.iter().all(|w| *w >= 0.0) && split.iter().sum::<f32>() > 0.0 {
            split.iter().map(|&w| f64::from(w)).collect()
        } else {
            vec![1.0; devices]
        };
    let total: f64 = weights.iter().sum();
    let mut bounds = Vec::with_capacity(devices);
    let mut acc = 0.0;
    for w in &weights {
        acc += w;
        bounds.push((acc / total * layers as f64).round() as usize);
    }
    (0..layers).map(|l| bounds.iter().position(|&b| l < b).unwrap_or(devices - 1)).collect()
}

/// The tensors bound to a graph's nodes, by node index.
type BoundByNode = Arc<Vec<Option<TensorRef>>>;

/// A llama model loaded on one or more devices: evaluate tokens, get
/// logits.
///
/// With several devices the layers are split between them (`--split-mode
/// layer`, in proportion to `--tensor-split`); each layer's weights and KV
/// cache live on its device, and the scheduler runs the graph's splits with
/// asynchronous copies of the activations between devices.
pub struct Model {
    /// The composite device and the shares, under tensor parallelism.
    tensor: Option<(Arc<CompositeDevice>, TensorShares)>,
    config: LlamaConfig,
    tokenizer: Arc<Tokenizer>,
    devices: Vec<Arc<dyn Device>>,
    layer_device: Vec<usize>,
    runner: Runner,
    weights: Weights,
    cache: KvCache,
    /// Leaves by name (weights and caches).
    bound: HashMap<String, TensorRef>,
    batch: usize,
    /// Whether every device holding layers attends in slots: a batch of
    /// several sequences then has one attention node per layer
    /// ([`BatchShape::in_slots`]).
    in_slots: bool,
    /// Token and position buffers, one per run in flight, and the points of
    /// the work that last read each (waited before it is rewritten).
    input_io: Vec<(Buffer, Vec<SyncPoint>)>,
    next_input: usize,
    /// Logits of evaluations that bring their own buffer none: a row
    /// (grown when every token's logits are asked for).
    logits_io: Buffer,
    /// Bytes of the rows where a batch's attention outputs meet.
    attention_rows_bytes: u64,
    /// Per run in flight: the logits of a batched step (a row per
    /// sequence), and the serial of the last run that used it.
    batch_logits_io: Vec<(Buffer, u64)>,
    /// Per run in flight: the hidden states of a batched step's embedding
    /// rows (allocated at the first such step).
    batch_hidden_io: Vec<Option<Buffer>>,
    /// A stream of the last device that reads a batched step's logits once
    /// that step is done, not behind later steps queued on the device's
    /// own stream (which would serialise steps in flight). `None` where the
    /// device has no second stream, or over several processes.
    readback: Option<Stream>,
    /// Plans by shape, with the tensors bound to their graph's weights and
    /// caches by node (so a step binds by index, not by name).
    plans: Vec<(BatchShape, Arc<Plan>, BoundByNode)>,
    /// Token ids, positions and logit rows of a step, written as one.
    host_inputs: Option<Vec<i32>>,
    /// The last input write, whose buffer comes back at the next submit.
    pending_inputs: Option<Pending<Vec<i32>>>,
    host_logits: Option<Vec<f32>>,
    host_waits: u64,
    host_submit: std::time::Duration,
    file_bytes: u64,
    /// The file's `tokenizer.chat_template`, if any.
    chat_template: Option<String>,
    /// Tokens evaluated so far (every position written to the cache).
    evaluated_tokens: u64,
    /// Per slot: one past the furthest position written since it last
    /// started at 0 (how far a sliding-window ring may have been
    /// overwritten).
    frontier: Vec<usize>,
}

struct Types<'a>(&'a Weights);

impl WeightTypes for Types<'_> {
    fn weight_type(&self, name: &str) -> DType {
        self.0.get(name).map_or(DType::F32, TensorRef::dtype)
    }
}

impl Model {
    /// Loads the GGUF file at `path` onto one device.
    pub fn load(path: impl AsRef<Path>, device: impl IntoDevice, options: &LoadOptions) -> Result<Model, ModelError> {
        Self::load_split(path, [device], options)
    }

    /// Loads the GGUF file at `path` with its layers split over `devices`.
    pub fn load_split(
        path: impl AsRef<Path>,
        devices: impl IntoIterator<Item = impl IntoDevice>,
        options: &LoadOptions,
    ) -> Result<Model, ModelError> {
        Self::load_with(path.as_ref(), into_devices(devices), options, None, None)
    }

    /// As [`load_split`](Self::load_split), for a model whose devices are
    /// spread over several processes (the ranks of an MPI job, each running
    /// the same calls): `remote` makes the runner's [`RemoteEdges`] (which
    /// devices are this process's, how crossings between processes travel).
    /// This process uploads only the weights of its own devices' layers;
    /// the others' are stand-ins. Every process gets the logits.
    pub fn load_over_ranks(
        path: impl AsRef<Path>,
        devices: impl IntoIterator<Item = impl IntoDevice>,
        options: &LoadOptions,
        remote: &MakeRemoteEdges<'_>,
    ) -> Result<Model, ModelError> {
        Self::load_with(path.as_ref(), into_devices(devices), options, None, Some(remote))
    }

    /// Loads the GGUF file at `path` with every layer's weights split over
    /// the inner devices of `device` (tensor parallelism, `--split-mode
    /// tensor`), in proportion to `options.tensor_split`; see
    /// [`TensorShares`](crate::TensorShares).
    pub fn load_tensor_parallel(
        path: impl AsRef<Path>,
        device: Arc<CompositeDevice>,
        options: &LoadOptions,
    ) -> Result<Model, ModelError> {
        Self::load_with(path.as_ref(), vec![device.clone().into_device()], options, Some(device), None)
    }

    fn load_with(
        path: &Path,
        devices: Vec<Arc<dyn Device>>,
        options: &LoadOptions,
        tensor: Option<Arc<CompositeDevice>>,
        remote: Option<&MakeRemoteEdges<'_>>,
    ) -> Result<Model, ModelError> {
        if devices.is_empty() {
            return Err(ModelError::Input("no device to load the model on".into()));
        }
        let handle = std::fs::File::open(path)
            .map_err(|source| baton_gguf::ReadError::Io { path: path.to_path_buf(), source })?;
        let file = GgufFile::map(&handle, path)?;
        let source = options.mmap.then_some(&handle);
        let config = LlamaConfig::from_gguf(&file)?;
        let tokenizer = crate::vocab::tokenizer_from_gguf(&file)?;
        let chat_template = file.metadata().get_str(CHAT_TEMPLATE_KEY).optional()?.map(str::to_string);
        if tokenizer.vocab_size() != config.vocab {
            return Err(ModelError::Config(format!(
                "the vocabulary has {} tokens, the model {}",
                tokenizer.vocab_size(),
                config.vocab
            )));
        }
        let layer_device = match tensor {
            Some(_) => vec![0; config.layers],
            None => layer_devices(config.layers, devices.len(), &options.tensor_split),
        };
        check_cache_types(&devices, &layer_device, options.kv_types())?;
        let in_slots = !options.attention_per_sequence && attend_in_slots(&devices, &layer_device, options.kv_types());
        let mut runner = Runner::new(devices.clone(), options.n_copies.max(1))?;
        runner.set_sync_copies(options.sync_copies);
        if let Some(remote) = remote {
            runner.set_remote(Some(remote(&runner)?));
        }
        let streams: Vec<_> = (0..devices.len()).map(|d| runner.stream(d).clone()).collect();
        let context = options.context.unwrap_or(config.context.min(4096)).max(1);
        let batch = options.batch.clamp(1, context);
        let ring = crate::weights::ring_rows(&config, batch, context);
        let (weights, cache, tensor) = match tensor {
            Some(c) => {
                let shares = TensorShares::new(&config, c.inner().len(), &options.tensor_split)?
                    .with_exact_sums(options.tensor_exact);
                let weights = Weights::load_tensor_parallel(&file, source, &config, &c, &streams[0], &shares)?;
                let slots = options.slots.max(1);
                let cache =
                    KvCache::new_tensor_parallel(&config, (context, slots, ring), options.kv_types(), &c, &shares)?;
                (weights, cache, Some((c, shares)))
            }
            None => {
                let weights = Weights::load(&file, source, &config, &devices, &streams, &|l| layer_device[l], &|d| {
                    runner.is_local(d)
                })?;
                let slots = options.slots.max(1);
                let cache =
                    KvCache::new(&config, (context, slots, ring), options.kv_types(), &devices, &|l| layer_device[l])?;
                (weights, cache, None)
            }
        };
        let first = layer_device[0];
        let last = layer_device[config.layers - 1];
        let input_io = (0..options.n_copies.max(1))
            .map(|_| Ok((devices[first].alloc(8 * batch * 4 + 64)?, Vec::new())))
            .collect::<Result<Vec<_>, ModelError>>()?;
        let logits_io = devices[last].alloc(config.vocab * 4)?;
        let readback = match remote {
            Some(_) => None,
            None => devices[last].new_stream().ok(),
        };
        let batch_logits_io = (0..input_io.len())
            .map(|_| Ok((devices[last].alloc(cache.slots * config.vocab * 4)?, 0)))
            .collect::<Result<Vec<_>, ModelError>>()?;
        let mut bound: HashMap<String, TensorRef> = weights.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let mut attention_rows_bytes = 0;
        for (l, (k, v)) in cache.layers.iter().enumerate() {
            bound.insert(graph::key_cache_name(l), k.clone());
            bound.insert(graph::value_cache_name(l), v.clone());
            if cache.slots > 1 && !in_slots {
                // Where the attention outputs of a batch's sequences meet
                // when each has its own attention node (split by heads
                // under tensor parallelism); attention in slots writes
                // them in place.
                let width = config.heads * config.head_dim;
                let rows = match &tensor {
                    Some((composite, shares)) => {
                        composite.alloc_split(DType::F32, &[batch, width], shares.attention_rows())?
                    }
                    None => TensorRef::new(
                        &devices[layer_device[l]].alloc(batch * width * 4)?,
                        0,
                        DType::F32,
                        &[batch, width],
                    )?,
                };
                attention_rows_bytes += rows.bytes() as u64;
                bound.insert(graph::attention_rows_name(l), rows);
            }
        }
        let file_bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let slot_count = cache.slots;
        Ok(Model {
            tensor,
            config,
            tokenizer: Arc::new(tokenizer),
            devices,
            layer_device,
            runner,
            weights,
            cache,
            bound,
            batch,
            in_slots,
            batch_hidden_io: vec![None; input_io.len()],
            input_io,
            next_input: 0,
            logits_io,
            attention_rows_bytes,
            batch_logits_io,
            readback,
            plans: Vec::new(),
            host_inputs: Some(Vec::new()),
            pending_inputs: None,
            host_logits: Some(Vec::new()),
            host_waits: 0,
            host_submit: std::time::Duration::ZERO,
            file_bytes,
            chat_template,
            evaluated_tokens: 0,
            frontier: vec![0; slot_count],
        })
    }

    /// Hyper-parameters.
    pub fn config(&self) -> &LlamaConfig {
        &self.config
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The tokenizer, shared (to decode while the model is borrowed).
    pub fn shared_tokenizer(&self) -> Arc<Tokenizer> {
        self.tokenizer.clone()
    }

    /// The first device (the embedding's).
    pub fn device(&self) -> &Arc<dyn Device> {
        &self.devices[self.layer_device[0]]
    }

    /// Every device, and the device index of each layer.
    pub fn placement(&self) -> (&[Arc<dyn Device>], &[usize]) {
        (&self.devices, &self.layer_device)
    }

    /// The Jinja chat template of the file (`tokenizer.chat_template`), if
    /// it has one; see [`ChatTemplate`](crate::ChatTemplate).
    pub fn chat_template(&self) -> Option<&str> {
        self.chat_template.as_deref()
    }

    /// Tokens evaluated so far: each evaluation adds its tokens (positions
    /// written to the KV cache).
    pub fn evaluated_tokens(&self) -> u64 {
        self.evaluated_tokens
    }

    /// Positions the KV cache holds per sequence.
    pub fn context(&self) -> usize {
        self.cache.context
    }

    /// Sequences the KV cache holds (see [`eval_batch`](Self::eval_batch)).
    pub fn slots(&self) -> usize {
        self.cache.slots
    }

    /// Most tokens one evaluation takes.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// Size of the GGUF file in bytes.
    pub fn file_bytes(&self) -> u64 {
        self.file_bytes
    }

    /// Bytes of weights on the devices.
    pub fn weight_bytes(&self) -> usize {
        self.weights.bytes()
    }

    /// Where the model's memory goes now: weights (mapped or copied), KV
    /// cache, io buffers, and what the devices that keep count hold.
    pub fn memory(&self) -> ModelMemory {
        let mut devices = DeviceMemory::default();
        for memory in self.devices.iter().filter_map(|d| d.memory()) {
            devices.allocated += memory.allocated;
            devices.mapped += memory.mapped;
            devices.derived += memory.derived;
        }
        let mapped = self.weights.mapped_bytes() as u64;
        let buffers =
            self.input_io.iter().map(|(b, _)| b.len()).chain(self.batch_logits_io.iter().map(|(b, _)| b.len()));
        ModelMemory {
            file: self.file_bytes,
            weights_mapped: mapped,
            weights_copied: self.weights.bytes() as u64 - mapped,
            kv_cache: self.cache.layers.iter().map(|(k, v)| (k.bytes() + v.bytes()) as u64).sum(),
            io: (buffers.sum::<usize>() + self.logits_io.len()) as u64 + self.attention_rows_bytes,
            devices,
        }
    }

    /// Bytes of weights one decode step reads: every matrix but the token
    /// embedding, of which it reads one row (a tied output is bound as its
    /// own `output.weight` and counts).
    pub fn decode_weight_bytes(&self) -> usize {
        self.weights.iter().filter(|(name, _)| name.as_str() != "token_embd.weight").map(|(_, t)| t.bytes()).sum()
    }

    /// Times the host blocked so far: logits reads, and the scheduler's own
    /// waits (backpressure, `--sync-copies`).
    pub fn host_waits(&self) -> u64 {
        self.host_waits + self.runner.stats().host_waits
    }

    /// Host time spent preparing and submitting evaluations (graph and plan
    /// lookup or build, bindings, queueing), without waiting.
    pub fn host_submit_time(&self) -> std::time::Duration {
        self.host_submit
    }

    /// Waits the streams' hazard tracking had to insert because the
    /// scheduler had not ordered an access itself (0 when it orders all).
    pub fn implicit_waits(&self) -> u64 {
        let inner = self.tensor.as_ref().map_or(0, |(c, _)| c.inner_implicit_waits());
        inner + (0..self.devices.len()).map(|d| self.runner.stream(d).implicit_waits()).sum::<u64>()
    }

    /// Under tensor parallelism: the composite device and the shares.
    pub fn tensor_parallel(&self) -> Option<(&Arc<CompositeDevice>, &TensorShares)> {
        self.tensor.as_ref().map(|(c, s)| (c, s))
    }

    /// Under tensor parallelism: the partition of one evaluation shape over
    /// the inner devices (each weight's split and each gate), as the
    /// composite stream builds it.
    pub fn tensor_partition(&mut self, shape: GraphShape) -> Result<Option<Partition>, ModelError> {
        let Some((device, _)) = self.tensor.clone() else { return Ok(None) };
        let plan = self.plan(shape)?;
        let graph = plan.graph.clone();
        let mut bound = Partition::bound_splits(&graph, &Bindings::new(&graph));
        let mut windows = vec![false; bound.len()];
        for id in graph.bound_nodes() {
            let name = graph.node(id).name.as_deref().unwrap_or("");
            let buffer = self.bound.get(name).and_then(|t| CompositeBuffer::of(t.buffer()));
            bound[id.0] = buffer.map(|b| b.split());
            windows[id.0] = buffer.is_some_and(|b| b.windowed());
        }
        let fold = device.folds_gates().unwrap_or(false);
        let inner = device.inner().len();
        let partition = Partition::build_windowed(&graph, bound, windows, inner, &**device.collective(), fold)?;
        Ok(Some(partition))
    }

    /// The scheduler's counters.
    pub fn runner_stats(&self) -> RunnerStats {
        self.runner.stats()
    }

    /// Records a trace of every stream from now on (`--trace`).
    pub fn set_trace(&mut self, trace: Option<Trace>) {
        self.runner.set_trace(trace);
    }

    /// The trace being recorded.
    pub fn trace(&self) -> Option<&Trace> {
        self.runner.trace()
    }

    /// The plan of one evaluation shape of one sequence (cached).
    pub fn plan(&mut self, shape: GraphShape) -> Result<Arc<Plan>, ModelError> {
        self.plan_and_bound(&shape.into()).map(|(plan, _)| plan)
    }

    /// The plan of `shape` and the tensors bound to its graph's nodes.
    fn plan_and_bound(&mut self, shape: &BatchShape) -> Result<(Arc<Plan>, BoundByNode), ModelError> {
        if let Some(i) = self.plans.iter().position(|(s, _, _)| s == shape) {
            // Most recently used last: the oldest is evicted first.
            let entry = self.plans.remove(i);
            let found = (entry.1.clone(), entry.2.clone());
            self.plans.push(entry);
            return Ok(found);
        }
        let geometry = CacheGeometry {
            dtypes: self.cache.dtypes,
            context: self.cache.context,
            ring: self.cache.ring,
            slots: self.cache.slots,
            batch: self.batch,
        };
        let graph: Arc<Graph> = Arc::new(graph::build(&self.config, &Types(&self.weights), shape, geometry)?);
        let (config, layer_device) = (&self.config, &self.layer_device);
        let group_device = |g: u32| Some(layer_device[graph::group_layer(config, g)]);
        let first = layer_device[0];
        let g2 = graph.clone();
        let bound = &self.bound;
        let leaf_device = |id: baton_core::graph::NodeId| {
            let name = g2.node(id).name.as_deref()?;
            match name {
                "tokens"
                | "positions"
                | graph::LOGIT_ROWS
                | graph::HIDDEN_ROWS
                | graph::SLOTS
                | graph::CACHE_ROWS
                | graph::RING_CACHE_ROWS => Some(first),
                _ => {
                    bound.get(name).and_then(|t| self.devices.iter().position(|d| d.info().name == t.buffer().device()))
                }
            }
        };
        let plan = Arc::new(Plan::new(graph.clone(), &self.runner, &group_device, &leaf_device)?);
        if self.plans.len() == PLAN_CACHE {
            self.plans.remove(0);
        }
        let by_node: Vec<Option<TensorRef>> = graph
            .nodes()
            .iter()
            .map(|n| match n.name.as_deref() {
                // Bound per step (submit_inner).
                Some(
                    "tokens"
                    | "positions"
                    | "logits"
                    | graph::HIDDEN
                    | graph::LOGIT_ROWS
                    | graph::HIDDEN_ROWS
                    | graph::SLOTS
                    | graph::CACHE_ROWS
                    | graph::RING_CACHE_ROWS,
                )
                | None => None,
                Some(name) => self.bound.get(name).cloned(),
            })
            .collect();
        let by_node = Arc::new(by_node);
        self.plans.push((shape.clone(), plan.clone(), by_node.clone()));
        Ok((plan, by_node))
    }

    /// Checks a step's sequences: tokens, slots, room in the cache.
    fn check(&self, seqs: &[SeqStep<'_>], logits: Logits) -> Result<(), ModelError> {
        if seqs.is_empty() {
            return Err(ModelError::Input("a batch needs at least one sequence".into()));
        }
        if matches!(logits, Logits::All | Logits::Hidden) && seqs.len() > 1 {
            return Err(ModelError::Input("every token's logits are for one sequence at a time".into()));
        }
        let t: usize = seqs.iter().map(|s| s.tokens.len()).sum();
        if t > self.batch || seqs.iter().any(|s| s.tokens.is_empty()) {
            return Err(ModelError::Input(format!(
                "an evaluation takes 1 to {} tokens, at least one per sequence, not {t}",
                self.batch
            )));
        }
        for (i, seq) in seqs.iter().enumerate() {
            if seq.slot >= self.cache.slots {
                return Err(ModelError::Input(format!(
                    "slot {} does not exist: the cache holds {} sequences",
                    seq.slot, self.cache.slots
                )));
            }
            if seqs[..i].iter().any(|other| other.slot == seq.slot) {
                return Err(ModelError::Input(format!("slot {} is twice in one batch", seq.slot)));
            }
            let needed = seq.past + seq.tokens.len();
            if needed > self.cache.context {
                return Err(ModelError::ContextFull { needed, context: self.cache.context });
            }
            // A ring still holds the window before `past` unless a longer
            // run since went more than its spare rows past it.
            if let Some(reach) = self.ring_reach().filter(|_| !self.resumable(seq.slot, seq.past)) {
                return Err(ModelError::RingRewound { slot: seq.slot, past: seq.past, reach });
            }
            if let Some(&bad) = seq.tokens.iter().find(|&&id| id as usize >= self.config.vocab) {
                return Err(ModelError::Input(format!(
                    "token id {bad} is outside the vocabulary of {}",
                    self.config.vocab
                )));
            }
        }
        Ok(())
    }

    /// Queues the evaluation of `seqs` without waiting for it, the logits
    /// into `logits_buffer` if given (else the model's own); returns its
    /// points and the logits tensor it fills.
    fn submit(
        &mut self,
        seqs: &[SeqStep<'_>],
        logits: Logits,
        logits_buffer: Option<&Buffer>,
    ) -> Result<(RunPoints, TensorRef), ModelError> {
        let start = std::time::Instant::now();
        let result = self.submit_inner(seqs, logits, logits_buffer, None, None);
        self.host_submit += start.elapsed();
        result.map(|(points, logits, _)| (points, logits))
    }

    /// As [`submit`](Self::submit); with `hidden` (a flag per sequence and
    /// a buffer), the final hidden states of every token of the flagged
    /// sequences are an output too, into that buffer; with `every_logit`
    /// (a flag per sequence, several sequences and [`Logits::Last`]), the
    /// flagged sequences give a logits row per token, the others their
    /// last token's.
    fn submit_inner(
        &mut self,
        seqs: &[SeqStep<'_>],
        logits: Logits,
        logits_buffer: Option<&Buffer>,
        hidden: Option<(&[bool], &Buffer)>,
        every_logit: Option<&[bool]>,
    ) -> Result<(RunPoints, TensorRef, Option<TensorRef>), ModelError> {
        self.check(seqs, logits)?;
        let t: usize = seqs.iter().map(|s| s.tokens.len()).sum();
        // The rows that give logits, in a batch of several sequences: each
        // sequence's last, or each of its rows when flagged.
        let logit_rows: Vec<i32> = match seqs.len() > 1 {
            true => {
                let every = |i: usize| every_logit.is_some_and(|flags| flags.get(i) == Some(&true));
                let mut start = 0;
                let mut rows = Vec::with_capacity(seqs.len());
                for (i, s) in seqs.iter().enumerate() {
                    let end = start + s.tokens.len();
                    match every(i) {
                        true => rows.extend((start..end).map(|r| r as i32)),
                        false => rows.push(end as i32 - 1),
                    }
                    start = end;
                }
                rows
            }
            false => Vec::new(),
        };
        // The rows whose hidden states are asked for.
        let hidden_rows: Vec<i32> = match hidden {
            Some((flags, _)) => {
                let mut start = 0;
                let mut rows = Vec::new();
                for (s, &wanted) in seqs.iter().zip(flags) {
                    if wanted {
                        rows.extend((start..start + s.tokens.len()).map(|r| r as i32));
                    }
                    start += s.tokens.len();
                }
                rows
            }
            None => Vec::new(),
        };
        let context = self.cache.context;
        // In slots, the graph depends on the token counts only.
        let in_slots = self.in_slots && seqs.len() > 1;
        let shape = BatchShape {
            seqs: seqs
                .iter()
                .map(|s| match in_slots {
                    true => SeqShape { slot: 0, tokens: s.tokens.len(), window: 0 },
                    false => {
                        let window = GraphShape::new(s.tokens.len(), s.past, logits, context).window;
                        SeqShape { slot: s.slot, tokens: s.tokens.len(), window }
                    }
                })
                .collect(),
            logits,
            logit_rows: if logit_rows.len() == seqs.len() { 0 } else { logit_rows.len() },
            hidden_rows: hidden_rows.len(),
            in_slots,
        };
        let (plan, by_node) = self.plan_and_bound(&shape)?;
        let rows = match logits {
            Logits::All | Logits::Hidden => t,
            Logits::Last => logit_rows.len().max(1),
        };
        let width = if logits == Logits::Hidden { self.config.dim } else { self.config.vocab };
        let picks = logit_rows.len();
        let slot = self.next_input;
        self.next_input = (slot + 1) % self.input_io.len();
        let io = self.input_io[slot].0.clone();
        let ring = self.cache.ring;
        let ring_len = if ring.is_some() { t } else { 0 };
        let in_slots_len = if in_slots { 2 * t + ring_len } else { 0 };
        let inputs_t =
            TensorRef::new(&io, 0, DType::I32, &[2 * t + picks.max(1) + ring_len + hidden_rows.len() + in_slots_len])?;
        let ids_t = TensorRef::new(&io, 0, DType::I32, &[t])?;
        let pos_t = TensorRef::new(&io, t * 4, DType::I32, &[t])?;
        let picks_t = TensorRef::new(&io, 2 * t * 4, DType::I32, &[picks.max(1)])?;
        let ring_t = TensorRef::new(&io, (2 * t + picks.max(1)) * 4, DType::I32, &[t])?;
        let hidden_at = (2 * t + picks.max(1) + ring_len) * 4;
        let hidden_rows_t = TensorRef::new(&io, hidden_at, DType::I32, &[hidden_rows.len().max(1)])?;
        // In slots: each token's slot, then its rows in the whole caches.
        let slots_at = hidden_at + hidden_rows.len() * 4;
        let slot_inputs: Vec<TensorRef> = match in_slots {
            true => {
                (0..3).map(|i| TensorRef::new(&io, slots_at + i * t * 4, DType::I32, &[t])).collect::<Result<_, _>>()?
            }
            false => Vec::new(),
        };
        let hidden_t = match hidden {
            Some((_, buffer)) if !hidden_rows.is_empty() => {
                Some(TensorRef::new(buffer, 0, DType::F32, &[hidden_rows.len(), self.config.dim])?)
            }
            _ => None,
        };
        let needed = rows * width * 4;
        if logits_buffer.is_none() && self.logits_io.len() < needed {
            // Runs in flight hold the old buffer until they are done.
            let last = self.layer_device[self.config.layers - 1];
            self.logits_io = self.devices[last].alloc(needed)?;
        }
        let logits_t = TensorRef::new(logits_buffer.unwrap_or(&self.logits_io), 0, DType::F32, &[rows, width])?;
        if let Some(written) = self.pending_inputs.take() {
            // Done long ago in practice (earlier on the stream than the last
            // logits); a real wait is counted.
            if !written.is_ready() {
                self.host_waits += 1;
            }
            self.host_inputs = Some(written.wait().map_err(|e| ModelError::Stream(e.error))?);
        }
        // Token ids, then positions, then (several sequences) the row of
        // each one's last token.
        let mut inputs = self.host_inputs.take().unwrap_or_default();
        inputs.clear();
        inputs.extend(seqs.iter().flat_map(|s| s.tokens.iter().map(|&id| id as i32)));
        inputs.extend(seqs.iter().flat_map(|s| (s.past..s.past + s.tokens.len()).map(|p| p as i32)));
        if picks > 0 {
            inputs.extend_from_slice(&logit_rows);
        } else {
            inputs.push(0);
        }
        if let Some(rows) = ring {
            inputs.extend(seqs.iter().flat_map(|s| (s.past..s.past + s.tokens.len()).map(|p| (p % rows) as i32)));
        }
        inputs.extend_from_slice(&hidden_rows);
        if in_slots {
            let each = |s: &SeqStep<'_>| std::iter::repeat_n(s.slot, s.tokens.len()).zip(s.past..);
            inputs.extend(seqs.iter().flat_map(|s| each(s).map(|(slot, _)| slot as i32)));
            inputs.extend(seqs.iter().flat_map(|s| each(s).map(|(slot, p)| (slot * context + p) as i32)));
            if let Some(rows) = ring {
                inputs.extend(seqs.iter().flat_map(|s| each(s).map(|(slot, p)| (slot * rows + p % rows) as i32)));
            }
        }
        let stream = self.runner.stream(self.layer_device[0]).clone();
        // The run that used this buffer last may still read it on another
        // device: this stream waits for that (no host wait).
        for p in std::mem::take(&mut self.input_io[slot].1) {
            stream.wait_or_relay(&p, stream.wait_policy())?;
        }
        let written: Pending<Vec<i32>> = stream.write_async(&inputs_t, inputs)?;
        let ready: SyncPoint = written.point().clone();
        let graph = plan.graph.clone();
        let bind = |id: baton_core::graph::NodeId| -> Option<TensorRef> {
            if let Some(t) = by_node.get(id.0).and_then(Option::as_ref) {
                return Some(t.clone());
            }
            match graph.node(id).name.as_deref()? {
                "tokens" => Some(ids_t.clone()),
                "positions" => Some(pos_t.clone()),
                graph::LOGIT_ROWS => Some(picks_t.clone()),
                graph::RING_ROWS => Some(ring_t.clone()),
                graph::HIDDEN_ROWS => Some(hidden_rows_t.clone()),
                graph::SLOTS => slot_inputs.first().cloned(),
                graph::CACHE_ROWS => slot_inputs.get(1).cloned(),
                graph::RING_CACHE_ROWS => slot_inputs.get(2).cloned(),
                graph::HIDDEN if hidden_t.is_some() => hidden_t.clone(),
                "logits" | graph::HIDDEN => Some(logits_t.clone()),
                _ => None,
            }
        };
        let points = self.runner.submit(&plan, &bind, Some(&ready))?;
        self.input_io[slot].1 = points.inputs_read.clone();
        // The write is ordered before the run's first split on the same
        // stream; its buffer comes back at the next submit.
        self.pending_inputs = Some(written);
        self.evaluated_tokens += t as u64;
        for s in seqs {
            let end = s.past + s.tokens.len();
            let frontier = &mut self.frontier[s.slot];
            *frontier = if s.past == 0 { end } else { (*frontier).max(end) };
        }
        Ok((points, logits_t, hidden_t))
    }

    /// Waits for the logits a submitted run fills and returns them; with
    /// `done` (the run's point), on the readback stream after that point.
    fn read_logits(&mut self, logits_t: &TensorRef, done: Option<&SyncPoint>) -> Result<&[f32], ModelError> {
        let mut host_logits = self.host_logits.take().unwrap_or_default();
        host_logits.resize(logits_t.shape().elems(), 0.0);
        let last = self.layer_device[self.config.layers - 1];
        let stream = match (done, &self.readback) {
            (Some(done), Some(readback)) => {
                readback.wait(done)?;
                readback
            }
            _ => self.runner.stream(last),
        };
        let read = stream.read_into_async(logits_t, host_logits)?;
        if !read.is_ready() {
            self.host_waits += 1;
        }
        let mut host_logits = read.wait().map_err(|e| ModelError::Stream(e.error))?;
        if let Some(remote) = self.runner.remote() {
            remote.share(&mut host_logits, last)?;
        }
        self.host_logits = Some(host_logits);
        Ok(self.host_logits.as_deref().unwrap_or(&[]))
    }

    /// Evaluates one step of several sequences at once, each in its own
    /// KV cache slot: `seqs[i].tokens` go to positions `past..` of slot
    /// `seqs[i].slot` (distinct slots, at most [`batch`](Self::batch) tokens
    /// in all). Returns one row of `vocab` logits per sequence, in order:
    /// its last token's.
    ///
    /// Every weight is read once for the whole batch; attention runs per
    /// sequence on its own slot. A sequence's logits do not depend on the
    /// others in the batch: they are bit for bit what it gets evaluated
    /// alone in the same slot with the same tokens (the kernels' results
    /// per row do not depend on the other rows).
    pub fn eval_batch(&mut self, seqs: &[SeqStep<'_>]) -> Result<&[f32], ModelError> {
        let ticket = self.submit_batch(seqs)?;
        self.batch_logits(ticket)
    }

    /// Queues a step as [`eval_batch`](Self::eval_batch) does, without
    /// waiting for it: up to [`runs_in_flight`](Self::runs_in_flight) steps
    /// (of disjoint sequences) flow through the devices at once, so over a
    /// layer split one device works on one step while the next works on
    /// another. Read each step's logits with
    /// [`batch_logits`](Self::batch_logits), in any order, before
    /// `runs_in_flight` more steps are submitted.
    pub fn submit_batch(&mut self, seqs: &[SeqStep<'_>]) -> Result<BatchTicket, ModelError> {
        let slot = self.next_input;
        let buffer = self.batch_logits_io.get(slot).map(|(buffer, _)| buffer.clone());
        let (points, logits) = self.submit(seqs, Logits::Last, buffer.as_ref())?;
        let serial = self.next_serial(slot);
        Ok(BatchTicket { slot, serial, done: points.done, logits, hidden: None })
    }

    /// As [`submit_batch`](Self::submit_batch), with the final hidden
    /// states (after the output norm) of every token of the sequences
    /// `hidden` flags as an output too: an embedding's tokens carried by a
    /// decode step. Read them with [`batch_hidden`](Self::batch_hidden)
    /// before the logits. Every row is computed as it would be alone, so
    /// the other sequences' logits keep their bits. On one process without
    /// tensor parallelism only.
    pub fn submit_batch_hidden(&mut self, seqs: &[SeqStep<'_>], hidden: &[bool]) -> Result<BatchTicket, ModelError> {
        if hidden.len() != seqs.len() {
            return Err(ModelError::Input(format!("{} hidden flags for {} sequences", hidden.len(), seqs.len())));
        }
        if self.tensor.is_some() || self.runner.remote().is_some() {
            return Err(ModelError::Input(
                "hidden states (embeddings) are read on one process without --split-mode tensor".into(),
            ));
        }
        let slot = self.next_input;
        if self.batch_hidden_io[slot].is_none() {
            let last = self.layer_device[self.config.layers - 1];
            self.batch_hidden_io[slot] = Some(self.devices[last].alloc(self.batch * self.config.dim * 4)?);
        }
        let logits_buffer = self.batch_logits_io[slot].0.clone();
        let hidden_buffer =
            self.batch_hidden_io[slot].clone().ok_or_else(|| ModelError::Config("no hidden buffer".into()))?;
        let start = std::time::Instant::now();
        let result = self.submit_inner(seqs, Logits::Last, Some(&logits_buffer), Some((hidden, &hidden_buffer)), None);
        self.host_submit += start.elapsed();
        let (points, logits, hidden) = result?;
        let serial = self.next_serial(slot);
        Ok(BatchTicket { slot, serial, done: points.done, logits, hidden })
    }

    /// As [`submit_batch_hidden`](Self::submit_batch_hidden), and the
    /// sequences `every_logit` flags give a logits row per token (the
    /// others their last token's): a prompt's score carried by a decode
    /// step. [`batch_logits`](Self::batch_logits) returns the rows in
    /// order, each flagged sequence's rows together. Every row is computed
    /// as it would be alone (the rows of a sequence scored alone with
    /// [`Logits::All`] have the same bits). On one process without tensor
    /// parallelism only.
    pub fn submit_batch_rows(
        &mut self,
        seqs: &[SeqStep<'_>],
        hidden: &[bool],
        every_logit: &[bool],
    ) -> Result<BatchTicket, ModelError> {
        if hidden.len() != seqs.len() || every_logit.len() != seqs.len() {
            return Err(ModelError::Input(format!(
                "{} hidden and {} logits flags for {} sequences",
                hidden.len(),
                every_logit.len(),
                seqs.len()
            )));
        }
        if !self.hidden_in_steps() {
            return Err(ModelError::Input(
                "every token's logits in a step are read on one process without --split-mode tensor".into(),
            ));
        }
        let slot = self.next_input;
        let rows: usize = seqs.iter().zip(every_logit).map(|(s, &every)| if every { s.tokens.len() } else { 1 }).sum();
        let needed = rows * self.config.vocab * 4;
        if self.batch_logits_io[slot].0.len() < needed {
            // Grown once to a whole batch's rows; a step in flight keeps
            // the buffer it was given (its ticket holds it).
            let last = self.layer_device[self.config.layers - 1];
            let size = needed.max(self.batch * self.config.vocab * 4);
            self.batch_logits_io[slot].0 = self.devices[last].alloc(size)?;
        }
        let wants_hidden = hidden.contains(&true);
        if wants_hidden && self.batch_hidden_io[slot].is_none() {
            let last = self.layer_device[self.config.layers - 1];
            self.batch_hidden_io[slot] = Some(self.devices[last].alloc(self.batch * self.config.dim * 4)?);
        }
        let logits_buffer = self.batch_logits_io[slot].0.clone();
        let hidden_buffer = match wants_hidden {
            true => {
                Some(self.batch_hidden_io[slot].clone().ok_or_else(|| ModelError::Config("no hidden buffer".into()))?)
            }
            false => None,
        };
        // One sequence alone gives its every row as a plain evaluation does.
        let logits = if seqs.len() == 1 && every_logit[0] { Logits::All } else { Logits::Last };
        let start = std::time::Instant::now();
        let hidden_io = hidden_buffer.as_ref().map(|buffer| (hidden, buffer));
        let result = self.submit_inner(seqs, logits, Some(&logits_buffer), hidden_io, Some(every_logit));
        self.host_submit += start.elapsed();
        let (points, logits, hidden) = result?;
        let serial = self.next_serial(slot);
        Ok(BatchTicket { slot, serial, done: points.done, logits, hidden })
    }

    /// Whether steps can carry hidden states
    /// ([`submit_batch_hidden`](Self::submit_batch_hidden)): on one process
    /// without tensor parallelism.
    pub fn hidden_in_steps(&self) -> bool {
        self.tensor.is_none() && self.runner.remote().is_none()
    }

    /// The next serial of run slot `slot`'s buffers.
    fn next_serial(&mut self, slot: usize) -> u64 {
        match self.batch_logits_io.get_mut(slot) {
            Some((_, serial)) => {
                *serial += 1;
                *serial
            }
            None => 0,
        }
    }

    /// Waits for a step of [`submit_batch_hidden`](Self::submit_batch_hidden)
    /// and returns its hidden states: `dim` values per flagged token, in
    /// row order (empty when none were flagged).
    pub fn batch_hidden(&mut self, ticket: &BatchTicket) -> Result<Vec<f32>, ModelError> {
        let Some(hidden) = &ticket.hidden else { return Ok(Vec::new()) };
        let current = self.batch_logits_io.get(ticket.slot).map_or(0, |(_, serial)| *serial);
        if current != ticket.serial {
            return Err(ModelError::Input("the step's hidden states were overwritten by later steps".into()));
        }
        // As the logits: on the readback stream after the step, not behind
        // later steps queued on the device's own.
        let last = self.layer_device[self.config.layers - 1];
        let stream = match &self.readback {
            Some(readback) => {
                readback.wait(&ticket.done)?;
                readback.clone()
            }
            None => self.runner.stream(last).clone(),
        };
        let read = stream.read_into_async(hidden, vec![0f32; hidden.shape().elems()])?;
        if !read.is_ready() {
            self.host_waits += 1;
        }
        read.wait().map_err(|e| ModelError::Stream(e.error))
    }

    /// Waits for a submitted step and returns its logits: one row of
    /// `vocab` per sequence, in order. An error if `runs_in_flight` later
    /// steps have reused its buffer since.
    pub fn batch_logits(&mut self, ticket: BatchTicket) -> Result<&[f32], ModelError> {
        let current = self.batch_logits_io.get(ticket.slot).map_or(0, |(_, serial)| *serial);
        if current != ticket.serial {
            return Err(ModelError::Input(format!(
                "the step's logits were overwritten: {} later steps were submitted before they were read",
                self.input_io.len()
            )));
        }
        self.read_logits(&ticket.logits, Some(&ticket.done))
    }

    /// Runs that may be in flight at once (`LoadOptions::n_copies`).
    pub fn runs_in_flight(&self) -> usize {
        self.input_io.len()
    }

    /// Whether slot `slot` can take an evaluation from position `past`: its
    /// cache still holds what that needs ([`ModelError::RingRewound`]
    /// otherwise: a sliding-window layer's ring was overwritten by a run
    /// that went further). From position 0 it always can.
    pub fn resumable(&self, slot: usize, past: usize) -> bool {
        match (self.ring_reach(), self.frontier.get(slot)) {
            (Some(reach), Some(&frontier)) => past == 0 || frontier <= past + reach,
            _ => true,
        }
    }

    /// Gives slot `to` slot `from`'s keys and values at positions
    /// `0..len`, as a copy on the device queued behind the work that wrote
    /// them: an evaluation of slot `to` may then start at position `len`
    /// and gets the bits evaluating those positions would give. `Ok(false)`
    /// (nothing queued) where a copy is not served: under tensor
    /// parallelism, over several processes, or when `from`'s sliding-window
    /// rings no longer hold what `len` needs.
    pub fn copy_prefix(&mut self, from: usize, to: usize, len: usize) -> Result<bool, ModelError> {
        let (slots, context) = (self.cache.slots, self.cache.context);
        if from >= slots || to >= slots || len > context {
            return Err(ModelError::Config(format!(
                "a KV copy of {len} positions from slot {from} to slot {to} (the cache has {slots} slots of {context})"
            )));
        }
        if from == to || len == 0 {
            return Ok(true);
        }
        if self.tensor.is_some() || self.runner.remote().is_some() || !self.resumable(from, len) {
            return Ok(false);
        }
        let (runner, layer_device) = (&self.runner, &self.layer_device);
        self.cache.copy_prefix(&self.config, (from, to, len), &|l| runner.stream(layer_device[l]).clone())?;
        if let (Some(&frontier), Some(_)) = (self.frontier.get(from), self.frontier.get(to)) {
            // The rings were copied whole: `to`'s hold what `from`'s do.
            self.frontier[to] = if self.cache.ring.is_some() { frontier } else { len };
        }
        Ok(true)
    }

    /// Slot `slot`'s keys and values at positions `0..len`, read into host
    /// memory (the host waits for the reads); `None` where that is not
    /// served (under tensor parallelism, over several processes, when the
    /// slot's rings no longer hold the window before `len`, or for no
    /// position). [`restore_prefix`](Self::restore_prefix) writes it back.
    pub fn save_prefix(&mut self, slot: usize, len: usize) -> Result<Option<SavedPrefix>, ModelError> {
        if self.tensor.is_some() || self.runner.remote().is_some() || len == 0 || !self.resumable(slot, len) {
            return Ok(None);
        }
        let frontier = self.frontier.get(slot).copied().unwrap_or(len);
        let (runner, layer_device) = (&self.runner, &self.layer_device);
        let saved =
            self.cache.save_prefix(&self.config, (slot, len, frontier), &|l| runner.stream(layer_device[l]).clone())?;
        Ok(Some(saved))
    }

    /// Whether a slot given `saved` can evaluate from position `past`
    /// (`past` at most its length): its sliding-window rings, as saved,
    /// still hold the window before `past`.
    pub fn restorable(&self, saved: &SavedPrefix, past: usize) -> bool {
        match self.ring_reach() {
            Some(reach) => past == 0 || (past <= saved.len() && saved.frontier <= past + reach),
            None => past <= saved.len(),
        }
    }

    /// Writes `saved` (from [`save_prefix`](Self::save_prefix) of this
    /// model) into slot `slot`: an evaluation of the slot may then start at
    /// position `saved.len()`, with the bits evaluating those positions
    /// would give. `Ok(false)` (nothing written) where that is not served.
    pub fn restore_prefix(&mut self, slot: usize, saved: &SavedPrefix) -> Result<bool, ModelError> {
        if self.tensor.is_some() || self.runner.remote().is_some() {
            return Ok(false);
        }
        let (runner, layer_device) = (&self.runner, &self.layer_device);
        self.cache.restore_prefix(&self.config, slot, saved, &|l| runner.stream(layer_device[l]).clone())?;
        if let Some(frontier) = self.frontier.get_mut(slot) {
            *frontier = if self.cache.ring.is_some() { saved.frontier } else { saved.len() };
        }
        Ok(true)
    }

    /// How far back from the furthest position written an evaluation may
    /// start while the rings still hold its window (`None`: no rings).
    fn ring_reach(&self) -> Option<usize> {
        Some(self.cache.ring? - self.config.sliding_window? + 1)
    }

    /// Evaluates `tokens` at positions `past..past + tokens.len()` of slot 0
    /// (at most [`batch`](Self::batch) tokens), writing their keys and values into the
    /// cache, and returns the logits: one row of `vocab` for the last token,
    /// or one per token with [`Logits::All`]. The host waits once, for the
    /// logits (their read waits for its own point only).
    pub fn eval(&mut self, tokens: &[u32], past: usize, logits: Logits) -> Result<&[f32], ModelError> {
        self.eval_slot(0, tokens, past, logits)
    }

    /// As [`eval`](Self::eval), on sequence slot `slot` of the cache.
    pub fn eval_slot(
        &mut self,
        slot: usize,
        tokens: &[u32],
        past: usize,
        logits: Logits,
    ) -> Result<&[f32], ModelError> {
        let (_, logits_t) = self.submit(&[SeqStep { slot, past, tokens }], logits, None)?;
        self.read_logits(&logits_t, None)
    }

    /// Evaluates a prompt of any length from position `past` in batches of
    /// [`batch`](Self::batch) (`-ub`), which flow through the devices as a
    /// pipeline (up to `n_copies` in flight); returns the last token's
    /// logits.
    pub fn eval_prompt(&mut self, tokens: &[u32], past: usize) -> Result<&[f32], ModelError> {
        if tokens.is_empty() {
            return Err(ModelError::Input("the prompt is empty".into()));
        }
        let batch = self.batch;
        let chunks = tokens.len().div_ceil(batch);
        for (i, chunk) in tokens.chunks(batch).enumerate().take(chunks - 1) {
            self.submit(&[SeqStep { slot: 0, past: past + i * batch, tokens: chunk }], Logits::Last, None)?;
        }
        let last = chunks - 1;
        self.eval(&tokens[last * batch..], past + last * batch, Logits::Last)
    }

    /// Every token's final hidden state (`dim` values each, after the
    /// output norm) of `tokens` evaluated from position 0 of `slot`, in
    /// batches of [`batch`](Self::batch); the slot's cache holds the tokens
    /// afterwards (a later evaluation of that slot from position 0
    /// overwrites them).
    pub fn eval_hidden(&mut self, slot: usize, tokens: &[u32]) -> Result<Vec<f32>, ModelError> {
        if tokens.is_empty() {
            return Err(ModelError::Input("the text to embed gives no tokens".into()));
        }
        if self.tensor_parallel().is_some() || self.runner.remote().is_some() {
            return Err(ModelError::Input(
                "hidden states (embeddings) are read on one process without --split-mode tensor".into(),
            ));
        }
        let batch = self.batch;
        let mut hidden = Vec::with_capacity(tokens.len() * self.config.dim);
        for (i, chunk) in tokens.chunks(batch).enumerate() {
            let step = [SeqStep { slot, past: i * batch, tokens: chunk }];
            let (_, rows) = self.submit(&step, Logits::Hidden, None)?;
            hidden.extend_from_slice(self.read_logits(&rows, None)?);
        }
        Ok(hidden)
    }

    /// Runs one decode step (token 0 at position 0 of slot 0) and drops
    /// its logits, so that what a backend does on a model's first step
    /// happens now rather than inside the first request: the CPU packs
    /// every matmul weight matrix for its kernels (`baton_cpu::set_repack`),
    /// the decode plan is built, scratch memory is touched. Position 0 of
    /// slot 0 is written, as any evaluation from position 0 overwrites it;
    /// [`evaluated_tokens`](Self::evaluated_tokens) does not count it.
    pub fn warm_up(&mut self) -> Result<(), ModelError> {
        let counted = self.evaluated_tokens;
        self.eval(&[0], 0, Logits::Last)?;
        self.evaluated_tokens = counted;
        Ok(())
    }

    /// Whether a step of several sequences attends in slots: one attention
    /// node per layer for all of them (see [`LoadOptions::attention_per_sequence`]).
    pub fn attends_in_slots(&self) -> bool {
        self.in_slots
    }

    /// Plans built so far (for tests of plan reuse).
    pub fn cached_plans(&self) -> usize {
        self.plans.len()
    }
}

/// Whether every device holding layers attends in slots over a cache of
/// these types.
fn attend_in_slots(devices: &[Arc<dyn Device>], layer_device: &[usize], kv: KvTypes) -> bool {
    let op = Op::Attention { scale: 1.0, window: None, slot_rows: Some(1) };
    devices
        .iter()
        .enumerate()
        .filter(|(d, _)| layer_device.contains(d))
        .all(|(_, device)| device.supports(&op, kv.k) && device.supports(&op, kv.v))
}

/// Refuses, before anything is loaded, a KV cache type that a device
/// holding layers cannot attend over.
fn check_cache_types(devices: &[Arc<dyn Device>], layer_device: &[usize], kv: KvTypes) -> Result<(), ModelError> {
    let op = Op::Attention { scale: 1.0, window: None, slot_rows: None };
    for (d, device) in devices.iter().enumerate() {
        if layer_device.contains(&d) && !(device.supports(&op, kv.k) && device.supports(&op, kv.v)) {
            return Err(ModelError::Config(format!(
                "{} cannot hold a KV cache of {} keys and {} values",
                device.info().name,
                kv.k,
                kv.v
            )));
        }
    }
    Ok(())
}
