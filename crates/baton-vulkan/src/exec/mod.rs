//! Graph execution on a Vulkan device: one command buffer per computation,
//! one dispatch per op (nodes in order, a barrier between dispatches), the
//! intermediates in the stream's arena, bound tensors where the caller put
//! them. Ops that can fail on their data (an id outside a table) record the
//! error in the stream's status words; the worker reads them once the batch
//! has run and fails the stream with the node's message.

mod descriptors;
mod node_error;
mod ops;
mod recorder;
mod span;

use std::sync::Arc;

use ash::vk;
use baton_core::backend::{Bindings, RawBuffer, StreamError};
use baton_core::graph::{Graph, NodeId, Op};

use node_error::node_error;
use span::Span;

use crate::context::Context;
use crate::memory::{Kind, VulkanBuffer};
use crate::pipelines::Pipelines;
use baton_core::graph::arena::{ArenaPlan as Plan, Place};
use baton_core::graph::plan_cache::PlanCache;

/// Alignment of arena blocks (a whole number of words for every shader).
const ARENA_ALIGN: usize = 64;

/// Plans kept per stream (graphs reused across decode steps hit the cache).
const PLAN_CACHE: usize = 8;
/// Words of the status record: [errors, value, limit, node].
const STATUS_WORDS: usize = 4;

/// Runs graphs for one stream; owns the stream's arena, plans and status.
pub(crate) struct Executor {
    plans: PlanCache,
    descriptors: std::cell::RefCell<descriptors::Descriptors>,
    arena: Option<VulkanBuffer>,
    /// Activations rounded for quantized matmuls (see `ops::act_words`).
    acts: Option<VulkanBuffer>,
    status: VulkanBuffer,
}

impl Executor {
    pub(crate) fn new(ctx: &Arc<Context>) -> Result<Executor, crate::VulkanError> {
        Ok(Executor {
            plans: PlanCache::new(ARENA_ALIGN, PLAN_CACHE),
            descriptors: std::cell::RefCell::new(descriptors::Descriptors::new(ctx)),
            arena: None,
            acts: None,
            status: VulkanBuffer::new(ctx, STATUS_WORDS * 4, Kind::Host)?,
        })
    }

    fn plan_for(&mut self, graph: &Arc<Graph>) -> Arc<Plan> {
        self.plans.plan(graph)
    }

    /// The status record, as the shaders write it (cleared before each
    /// computation).
    pub(crate) fn status_words(&mut self) -> &mut [u32] {
        let ptr = self.status.mapped().map_or(std::ptr::null_mut(), |p| p.as_ptr());
        // SAFETY: the status buffer is host memory, mapped, of STATUS_WORDS
        // aligned words; the worker touches it only between its batches
        // (before recording and after the batch completed), so no shader
        // writes it meanwhile, and `&mut self` rules out another slice.
        unsafe { std::slice::from_raw_parts_mut(ptr.cast::<u32>(), STATUS_WORDS) }
    }

    /// Records `graph` with `bindings` into `cmd`.
    pub(crate) fn record(
        &mut self,
        ctx: &Arc<Context>,
        pipelines: &Pipelines,
        cmd: vk::CommandBuffer,
        graph: &Arc<Graph>,
        bindings: &Bindings,
    ) -> Result<(), StreamError> {
        let plan = self.plan_for(graph);
        let have = self.arena.as_ref().map_or(0, RawBuffer::len);
        if have < plan.arena_bytes {
            let bytes = plan.arena_bytes.max(have + have / 2);
            self.arena = None;
            self.arena = Some(VulkanBuffer::new(ctx, bytes, Kind::Device).map_err(|e| StreamError::Kernel {
                device: ctx.name.clone(),
                op: "arena".into(),
                message: e.to_string(),
            })?);
        }
        let arena = match &self.arena {
            Some(a) => Some(Span {
                buffer: a.handle_on(ctx).ok_or_else(|| node_error(graph, &ctx.name, NodeId(0), "arena handle"))?,
                offset: 0,
                buffer_bytes: (a.len().max(1) as u64).div_ceil(4) * 4,
            }),
            None => None,
        };
        // The largest activation scratch a quantized matmul of the graph needs.
        let act_bytes = graph
            .nodes()
            .iter()
            .filter(|n| matches!(n.op, Op::MatMul))
            .filter_map(|n| ops::act_words(graph.node(n.inputs[0]).layout.shape.elems(), graph.node(n.inputs[1]).dtype))
            .max()
            .map_or(0, |words| words * 4);
        let have = self.acts.as_ref().map_or(0, RawBuffer::len);
        if have < act_bytes {
            let bytes = act_bytes.max(have + have / 2);
            self.acts = None;
            self.acts = Some(VulkanBuffer::new(ctx, bytes, Kind::Device).map_err(|e| StreamError::Kernel {
                device: ctx.name.clone(),
                op: "activation scratch".into(),
                message: e.to_string(),
            })?);
        }
        let acts = match (&self.acts, act_bytes) {
            (Some(a), 1..) => Some(Span {
                buffer: a.handle_on(ctx).ok_or_else(|| node_error(graph, &ctx.name, NodeId(0), "scratch handle"))?,
                offset: 0,
                buffer_bytes: (a.len() as u64).div_ceil(4) * 4,
            }),
            _ => None,
        };
        let mut roots: Vec<Option<Span>> = vec![None; graph.nodes().len()];
        for (i, place) in plan.places.iter().enumerate() {
            let id = NodeId(i);
            roots[i] = match place {
                Place::Bound => {
                    let t = bindings.get(id).ok_or_else(|| node_error(graph, &ctx.name, id, "not bound"))?;
                    let range = t.byte_range();
                    let (buffer, offset) = crate::memory::gpu_side(ctx, &range).ok_or_else(|| {
                        node_error(
                            graph,
                            &ctx.name,
                            id,
                            format!(
                                "bound to memory of {} that {} cannot bind; copy it first",
                                t.buffer().device(),
                                ctx.name
                            ),
                        )
                    })?;
                    Some(Span { buffer, offset, buffer_bytes: (t.buffer().len().max(1) as u64).div_ceil(4) * 4 })
                }
                Place::Arena(at) => arena.map(|a| Span { offset: *at as u64, ..a }),
                Place::Alias => None,
            };
        }
        let status = Span {
            buffer: self
                .status
                .handle_on(ctx)
                .ok_or_else(|| node_error(graph, &ctx.name, NodeId(0), "status handle"))?,
            offset: 0,
            buffer_bytes: (STATUS_WORDS * 4) as u64,
        };
        self.descriptors
            .borrow_mut()
            .reset()
            .map_err(|r| node_error(graph, &ctx.name, NodeId(0), format!("resetting descriptor pools: {r}")))?;
        let recorder = recorder::Recorder {
            ctx,
            pipelines,
            cmd,
            graph,
            roots: &roots,
            status,
            acts,
            descriptors: &self.descriptors,
        };
        for (i, node) in graph.nodes().iter().enumerate() {
            if matches!(node.op, Op::Leaf | Op::View) {
                continue;
            }
            recorder.record(NodeId(i))?;
        }
        Ok(())
    }

    /// The error the shaders recorded, if any (after the batch has run).
    pub(crate) fn take_error(&mut self, graph: &Graph, device: &str) -> Option<StreamError> {
        let words = self.status_words();
        if words[0] == 0 {
            return None;
        }
        let (value, limit, node) = (words[1] as i32, words[2], words[3] as usize);
        words.fill(0);
        let id = NodeId(node.min(graph.nodes().len().saturating_sub(1)));
        let message = match graph.node(id).op {
            Op::GetRows => format!("token id {value} outside 0..{limit}"),
            Op::ScatterRows => format!("row index {value} outside 0..{limit}"),
            Op::Rope { .. } => format!("negative position {value}"),
            Op::Attention { .. } => format!("a row attends {value} positions, more than the cache's {limit}"),
            _ => format!("value {value} outside 0..{limit}"),
        };
        Some(node_error(graph, device, id, message))
    }
}
