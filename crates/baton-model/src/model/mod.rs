//! A loaded model on one or more devices: evaluate tokens, get logits.

mod hidden;
mod load;
mod placement;
mod prefix;
mod rewind;
mod step;

pub use placement::Placement;

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
use crate::expert_parallel::{share_of, ExpertSplit};
use crate::graph::{self, BatchShape, CacheGeometry, GraphShape, Logits, SeqShape, WeightTypes};
use crate::memory::ModelMemory;
use crate::state::{ring_rows, KeptRows, KvCache, KvTypes, LayerCache, SavedPrefix};
use crate::tensor_parallel::TensorShares;
use crate::weights::Weights;

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
    /// A paged KV cache where the devices read one (every layer on the
    /// CPU, one process, no tensor split, attention in slots): the
    /// attention layers' keys and values are one pool of blocks that the
    /// sequences hold as they fill them, a prefix copied between slots is
    /// shared rather than copied (see [`BlockTables`](crate::BlockTables)).
    /// `false`: one slot of `context` positions per sequence.
    pub kv_blocks: bool,
    /// The paged pool's size (in blocks of
    /// [`ATTENTION_BLOCK`](baton_core::graph::ATTENTION_BLOCK) positions,
    /// positions or bytes); by default every slot's whole context where the
    /// host's memory holds it, else what it holds (see [`KvPool::Budget`]).
    /// Its memory becomes resident as blocks are first written.
    pub kv_pool: crate::KvPool,
    /// Per layer, the device (an index into the devices) of its router and
    /// experts when not its own (`--cpu-moe`, `--n-cpu-moe`, `-ot`);
    /// shorter than the layers, or `None`: with the layer.
    pub expert_devices: Vec<Option<usize>>,
    /// Every layer on the first device and each device holding a share of
    /// every layer's experts (`--split-mode expert`, see [`ExpertSplit`]);
    /// `tensor_exact` then gathers the experts' outputs so that the logits
    /// are bit for bit one device's.
    pub expert_split: bool,
    /// A hybrid model's delta rule over a prompt's rows in chunks of this
    /// many (`--delta-chunk`, the chunked form of
    /// [`Op::GatedDeltaNet`](baton_core::graph::Op::GatedDeltaNet)): faster
    /// prompts, but a sequence's bits then depend on how its prompt was
    /// split into steps (not batch-invariant). 0: row by row, bit-invariant.
    pub delta_chunk: usize,
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
            kv_blocks: true,
            kv_pool: crate::KvPool::default(),
            expert_devices: Vec::new(),
            expert_split: false,
            delta_chunk: 0,
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
    /// How the model is spread over its devices.
    placed: Placement,
    tensor: Option<(Arc<CompositeDevice>, TensorShares)>,
    config: LlamaConfig,
    tokenizer: Arc<Tokenizer>,
    devices: Vec<Arc<dyn Device>>,
    layer_device: Vec<usize>,
    /// The device of each layer's router and experts.
    expert_device: Vec<usize>,
    /// The experts split over the devices, if they are.
    expert_split: Option<ExpertSplit>,
    /// Rows per chunk of the delta rule ([`LoadOptions::delta_chunk`]).
    delta_chunk: usize,
    runner: Runner,
    weights: Weights,
    cache: KvCache,
    /// How a paged cache's pool was sized.
    pool_size: Option<crate::PoolSize>,
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
    /// A hybrid model's recurrent states kept after the rows of
    /// verification steps ([`Model::keep_states`]).
    kept: KeptRows,
}

/// Whether a weight is a layer's stacked experts (`ffn_*_exps.weight`),
/// or a device's share of them.
fn is_stacked_experts(name: &str) -> bool {
    share_of(name).0.ends_with("_exps.weight")
}

struct Types<'a>(&'a Weights);

impl WeightTypes for Types<'_> {
    fn weight_type(&self, name: &str) -> DType {
        self.0.get(name).map_or(DType::F32, TensorRef::dtype)
    }
}

impl Model {
    /// Hyper-parameters.
    pub fn config(&self) -> &LlamaConfig {
        &self.config
    }

    /// Whether the file holds a multi-token-prediction block after the
    /// model's own (Qwen 3.5's `nextn_predict_layers`): its steps never run
    /// it, and [`MtpHead`](crate::MtpHead) computes it from the same file.
    pub fn has_mtp(&self) -> bool {
        self.config.prediction_layers > 0
    }

    /// The output matrix as the model holds it (`vocab` rows of `dim`;
    /// a tied output's is the embedding's) and the device holding it: for
    /// host kernels that multiply by it between steps
    /// ([`Device::host_matmul`]), as the head does
    /// ([`MtpHead::share_output`](crate::MtpHead::share_output)). `None`
    /// where no single device of this process holds it whole (a
    /// tensor-parallel split, another rank's device).
    pub fn output_weights(&self) -> Option<(&TensorRef, &Arc<dyn Device>)> {
        let weights = self.weights.get("output.weight")?;
        let d = self.devices.iter().position(|d| d.info().name == weights.buffer().device())?;
        let device = self.runner.is_local(d).then(|| &self.devices[d])?;
        (weights.shape().dims() == [self.config.vocab, self.config.dim]).then_some((weights, device))
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

    /// How the model is spread over its devices: one device, layers,
    /// tensor shares or ranks.
    pub fn placed(&self) -> Placement {
        self.placed
    }

    /// Every device, and the device index of each layer.
    pub fn placement(&self) -> (&[Arc<dyn Device>], &[usize]) {
        (&self.devices, &self.layer_device)
    }

    /// The device index of each layer's router and experts (its layer's
    /// unless placed elsewhere: [`LoadOptions::expert_devices`]).
    pub fn expert_placement(&self) -> &[usize] {
        &self.expert_device
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
            // A layer that reads an earlier one's keys and values holds none.
            kv_cache: (self.cache.layers.iter().enumerate())
                .filter(|&(l, _)| self.config.kv_source(l) == l)
                .map(|(_, layer)| layer.bytes() as u64)
                .sum::<u64>()
                + self.kept.bytes() as u64,
            io: (buffers.sum::<usize>() + self.logits_io.len()) as u64 + self.attention_rows_bytes,
            devices,
        }
    }

    /// Bytes of weights one decode step reads: every matrix but the token
    /// embedding, of which it reads one row (a tied output is bound as its
    /// own `output.weight` and counts), and of a mixture's stacked experts
    /// the share a token runs (`used` of `count`).
    pub fn decode_weight_bytes(&self) -> usize {
        let experts = self.config.experts;
        self.weights
            .iter()
            .filter(|(name, _)| name.as_str() != "token_embd.weight")
            .map(|(name, t)| match experts {
                Some(e) if is_stacked_experts(name) => t.bytes() / e.count * e.used,
                _ => t.bytes(),
            })
            .sum()
    }

    /// Bytes of keys and values one decode step at `positions` positions
    /// of context reads: every attention layer's keys and values over the
    /// positions it sees (a sliding-window layer's last `window`), in the
    /// cache's types, whichever layer's cache holds them. A recurrent
    /// layer's state reads nothing per position and counts 0.
    pub fn decode_kv_bytes(&self, positions: usize) -> usize {
        let types = self.cache.dtypes;
        (0..self.config.layers)
            .filter(|&l| matches!(self.cache.layers.get(self.config.kv_source(l)), Some(LayerCache::Attention(..))))
            .map(|l| {
                let attention = self.config.layer_attention(l);
                let seen = attention.window.map_or(positions, |w| w.min(positions));
                let row = |t: DType| t.row_bytes(attention.head_dim).unwrap_or(0);
                seen * attention.kv_heads * (row(types.k) + row(types.v))
            })
            .sum()
    }

    /// Bytes of layer `l`'s stacked experts (`ffn_*_exps.weight`; 0 for a
    /// dense layer), and the share of them one token reads (`used` of
    /// `count` experts).
    pub fn expert_bytes(&self, l: usize) -> (usize, usize) {
        let Some(e) = self.config.experts else { return (0, 0) };
        let held: usize = self
            .weights
            .iter()
            .filter(|(name, _)| {
                is_stacked_experts(name) && self.config.expert_weight_layer(share_of(name).0) == Some(l)
            })
            .map(|(_, t)| t.bytes())
            .sum();
        (held, held / e.count * e.used)
    }

    /// The experts' split over the devices (`--split-mode expert`), if
    /// they are split.
    pub fn expert_split(&self) -> Option<ExpertSplit> {
        self.expert_split
    }

    /// Bytes of stacked experts (`ffn_*_exps.weight`, every layer's) each
    /// device holds, by device index.
    pub fn expert_bytes_by_device(&self) -> Vec<usize> {
        let mut bytes = vec![0; self.devices.len()];
        for (name, t) in self.weights.iter().filter(|(name, _)| is_stacked_experts(name)) {
            let device = match share_of(name).1 {
                Some(d) => d,
                None => self.devices.iter().position(|d| d.info().name == t.buffer().device()).unwrap_or(0),
            };
            if let Some(b) = bytes.get_mut(device) {
                *b += t.bytes();
            }
        }
        bytes
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
        let mut shape: BatchShape = shape.into();
        if self.cache.blocks.is_some() {
            // A paged cache is read in slots, as every step reads it.
            shape.in_slots = true;
            for seq in &mut shape.seqs {
                *seq = SeqShape { slot: 0, tokens: seq.tokens, window: 0 };
            }
        }
        self.plan_and_bound(&shape).map(|(plan, _)| plan)
    }

    /// Runs that may be in flight at once (`LoadOptions::n_copies`).
    pub fn runs_in_flight(&self) -> usize {
        self.input_io.len()
    }

    /// A paged cache's block counts (`None`: one slot per sequence).
    pub fn kv_blocks(&self) -> Option<crate::BlockUsage> {
        self.cache.blocks.as_ref().map(|b| b.usage())
    }

    /// How a paged cache's pool was sized (`None`: one slot per sequence).
    pub fn kv_pool_size(&self) -> Option<crate::PoolSize> {
        self.pool_size
    }

    /// Blocks slot `slot` holds in a paged cache (0 without one, or for a
    /// slot that does not exist).
    pub fn slot_blocks(&self, slot: usize) -> usize {
        self.cache.blocks.as_ref().map_or(0, |b| b.table(slot).len())
    }

    /// Bytes of one block of a paged cache: its keys and values in every
    /// paged layer (0 without a paged cache).
    pub fn kv_block_bytes(&self) -> usize {
        self.cache.block_bytes(&self.config)
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
