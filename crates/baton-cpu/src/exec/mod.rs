//! Graph execution on a CPU device: the stream worker walks the nodes in
//! order and runs each op's kernel, spreading large ops over the device's
//! thread pool.
//!
//! # Memory safety
//!
//! All device memory is reached through raw pointers resolved here and in
//! `context`, in one place ([`Storage`]). The facts relied on:
//! - bound tensors lie inside their buffers (`TensorRef::new`), views inside
//!   their storage (`Graph::view`), arena blocks inside the arena (the plan);
//! - nothing else touches the bound ranges while the computation runs
//!   (`RawStream::submit`'s contract), and bound outputs overlap no other
//!   binding (`Bindings::check_complete`);
//! - an op's output never overlaps its inputs: arena blocks are allocated
//!   before the inputs' blocks are freed (see `plan`), and `copy_into`
//!   checks its source against its target at run time.

mod attention;
mod context;
mod expert_scratch;
mod experts;
mod matmul;
mod ops;
mod recurrent;
mod rope_cache;
mod workspace;

use std::sync::Arc;

use baton_core::backend::{Bindings, StreamError};
use baton_core::graph::arena::{ArenaPlan as Plan, Place};
use baton_core::graph::plan_cache::PlanCache;
use baton_core::graph::{Graph, Node, NodeId, Op};

use crate::buffer::CpuBuffer;
use crate::device_shared::CpuDeviceShared;
use crate::packed_cache::PackedCache;
use context::{node_error, Context, Storage};
use workspace::Workspace;

/// Plans kept per stream (graphs reused across decode steps hit the cache;
/// a tensor-parallel decode step runs a few hundred graphs per stream:
/// its segments and its gates' adds; the cache is a hash map).
const PLAN_CACHE: usize = 512;

/// Runs graphs for one stream; owns the stream's arena and plans.
pub(crate) struct Executor {
    plans: PlanCache,
    arena: Option<CpuBuffer>,
    /// What the ops' kernels use besides their tensors.
    workspace: Workspace,
}

impl Executor {
    pub(crate) fn new(device: Arc<CpuDeviceShared>) -> Self {
        Executor {
            plans: PlanCache::new(crate::buffer::ALIGN, PLAN_CACHE),
            arena: None,
            workspace: Workspace::new(device),
        }
    }

    fn plan_for(&mut self, graph: &Arc<Graph>) -> Arc<Plan> {
        self.plans.plan(graph)
    }

    /// Computes `graph` with `bindings` (validated by the safe stream).
    pub(crate) fn compute(&mut self, graph: &Arc<Graph>, bindings: &Bindings) -> Result<(), StreamError> {
        let plan = self.plan_for(graph);
        let have = self.arena.as_ref().map_or(0, baton_core::backend::RawBuffer::len);
        if have < plan.arena_bytes {
            // Grow by half at least: decode steps need a little more each
            // token (attention over one more position), and a fresh zeroed
            // allocation per token costs page faults.
            let bytes = plan.arena_bytes.max(have + have / 2);
            self.arena = Some(
                CpuBuffer::new(bytes, &self.workspace.device.info.name, &self.workspace.device.memory).ok_or_else(
                    || StreamError::Kernel {
                        device: self.workspace.device.info.name.clone(),
                        op: "arena".into(),
                        message: format!("could not allocate {bytes} bytes"),
                    },
                )?,
            );
        }
        let arena = match &self.arena {
            Some(a) => Storage {
                ptr: baton_core::backend::RawBuffer::host_ptr(a).map_or(std::ptr::null_mut(), |p| p.as_ptr()),
                len: baton_core::backend::RawBuffer::len(a),
            },
            None => Storage { ptr: std::ptr::null_mut(), len: 0 },
        };
        let mut roots: Vec<Option<Storage>> = vec![None; graph.nodes().len()];
        let mut packed: Vec<Option<&PackedCache>> = vec![None; graph.nodes().len()];
        for (i, place) in plan.places.iter().enumerate() {
            roots[i] = match place {
                Place::Bound => {
                    let t = bindings.get(NodeId(i)).ok_or_else(|| node_error(graph, NodeId(i), "not bound"))?;
                    if t.buffer().is_sealed() {
                        packed[i] = t.buffer().raw().as_any().downcast_ref::<CpuBuffer>().map(CpuBuffer::packed);
                    }
                    // No BufferRange here: cloning the buffer handle would
                    // bounce its reference count between this worker and the
                    // host thread, once per bound tensor and computation.
                    let base = t
                        .buffer()
                        .raw()
                        .host_ptr()
                        .ok_or_else(|| node_error(graph, NodeId(i), "bound to memory the CPU cannot address"))?;
                    // SAFETY: the tensor's bytes lie inside the buffer
                    // (TensorRef::new checks offset + bytes against its length).
                    let ptr = unsafe { base.as_ptr().add(t.offset()) };
                    Some(Storage { ptr, len: t.bytes() })
                }
                Place::Arena(offset) => {
                    // SAFETY: the plan places the block inside `arena_bytes`,
                    // which the arena has at least.
                    let ptr = unsafe { arena.ptr.add(*offset) };
                    Some(Storage { ptr, len: arena.len - offset })
                }
                Place::Alias => None,
            };
        }
        let ctx = Context { graph, roots: &roots, packed: &packed };
        // The host may have rewritten any tensor since the last computation.
        self.workspace.last_product_input = None;
        self.workspace.experts.last = None;
        let profiling = crate::profile::enabled();
        let nodes = graph.nodes();
        let mut i = 0;
        while i < nodes.len() {
            let node = &nodes[i];
            if profiling && !matches!(node.op, Op::Leaf | Op::View) {
                // One op at a time, so each op's time is its own.
                let start = std::time::Instant::now();
                self.run_node(&ctx, NodeId(i), node)?;
                crate::profile::record(crate::profile::key(graph, node), start.elapsed());
            } else if let Some((group, next)) = same_input_products(nodes, i) {
                self.workspace.experts.last = None;
                matmul::run_many(&mut self.workspace, &ctx, &group)?;
                i = next;
                continue;
            } else {
                self.run_node(&ctx, NodeId(i), node)?;
            }
            i += 1;
        }
        Ok(())
    }

    fn run_node(&mut self, ctx: &Context<'_>, id: NodeId, node: &Node) -> Result<(), StreamError> {
        match &node.op {
            Op::Leaf | Op::View => return Ok(()),
            Op::MatMul => {
                self.workspace.experts.last = None;
                return matmul::run(&mut self.workspace, ctx, id);
            }
            Op::MatMulId | Op::MatMulIdShare { .. } => {}
            _ => self.workspace.experts.last = None,
        }
        // Any other op may write memory a later product reads.
        self.workspace.last_product_input = None;
        match &node.op {
            Op::Attention { .. } => attention::run(&self.workspace, ctx, id),
            Op::MatMulId => experts::matmul_id(&mut self.workspace, ctx, id, None),
            Op::MatMulIdShare { first } => experts::matmul_id(&mut self.workspace, ctx, id, Some(*first)),
            Op::TopK { k } => experts::top_k(&self.workspace, ctx, id, *k),
            Op::TakeColumns => experts::take_columns(ctx, id),
            Op::SumRows => experts::sum_rows(&self.workspace, ctx, id),
            Op::SsmConv => recurrent::ssm_conv(&self.workspace, ctx, id),
            Op::GatedDeltaNet { scale, chunk } => recurrent::gated_delta_net(&self.workspace, ctx, id, *scale, *chunk),
            _ => ops::run(&mut self.workspace, ctx, id),
        }
    }
}

/// The products from node `i` on that multiply the same input, with only
/// leaves and views (which run nothing) between them, and the index after
/// the last; `None` unless there are two or more. Running them together
/// is sound: a product writes only its own output, which no other product
/// of the group reads, and the plan keeps the shared input and every
/// output apart while they are all live.
fn same_input_products(nodes: &[Node], i: usize) -> Option<(Vec<NodeId>, usize)> {
    let first = nodes.get(i).filter(|n| matches!(n.op, Op::MatMul))?;
    let input = first.inputs[0];
    // No allocation for a product alone (most of them): the list starts
    // with the second member.
    let mut group: Vec<NodeId> = Vec::new();
    let mut next = i + 1;
    for (j, n) in nodes.iter().enumerate().skip(i + 1) {
        match n.op {
            Op::MatMul if n.inputs[0] == input && n.inputs[1] != NodeId(i) && !group.contains(&n.inputs[1]) => {
                if group.is_empty() {
                    group.push(NodeId(i));
                }
                group.push(NodeId(j));
                next = j + 1;
            }
            Op::Leaf | Op::View => {}
            _ => break,
        }
    }
    (!group.is_empty()).then_some((group, next))
}
