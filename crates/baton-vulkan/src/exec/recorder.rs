//! Recording dispatches: a node's bytes as a binding (the descriptor and
//! the offset of its first byte in it), descriptor sets and push constants, and
//! the barrier after each dispatch. The ops themselves are in `ops`.

use std::sync::Arc;

use ash::vk;
use baton_core::backend::StreamError;
use baton_core::graph::{Graph, Node, NodeId, Op};
use baton_core::DType;

use super::node_error::node_error;
use super::span::Span;
use crate::context::Context;
use crate::pipelines::{Pipelines, PUSH_BYTES};

/// Invocations per workgroup of every shader (`GROUP` in common.wgsl).
pub(super) const GROUP: u32 = 64;
/// Workgroups along one dispatch dimension, at most.
const MAX_GROUPS_X: u32 = 65535;

/// A tensor as one binding: the descriptor and the tensor's first byte
/// relative to the binding's start.
pub(super) struct Bound {
    pub(super) info: vk::DescriptorBufferInfo,
    pub(super) byte: u32,
}

/// One dispatch: a shader, its bindings (`a` and `b` may be unused), its
/// push constants and its workgroup count.
pub(super) struct Dispatch<'a> {
    pub(super) shader: &'static str,
    pub(super) a: Option<&'a Bound>,
    pub(super) b: Option<&'a Bound>,
    pub(super) out: &'a Bound,
    pub(super) push: &'a [u32],
    pub(super) groups: u32,
}

/// Records the dispatches of one computation.
pub(super) struct Recorder<'a> {
    pub(super) ctx: &'a Arc<Context>,
    pub(super) pipelines: &'a Pipelines,
    pub(super) cmd: vk::CommandBuffer,
    pub(super) graph: &'a Graph,
    pub(super) roots: &'a [Option<Span>],
    pub(super) status: Span,
    /// Scratch for activations rounded for quantized matmuls (large enough
    /// for any matmul of the graph), if the graph has any.
    pub(super) acts: Option<Span>,
    pub(super) descriptors: &'a std::cell::RefCell<super::descriptors::Descriptors>,
}

pub(super) fn type_suffix(dtype: DType) -> Option<&'static str> {
    Some(match dtype {
        DType::F32 => "f32",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        DType::Q8_0 => "q8_0",
        DType::Q4_0 => "q4_0",
        DType::Q4_1 => "q4_1",
        DType::Q4_K => "q4_k",
        DType::Q5_K => "q5_k",
        DType::Q6_K => "q6_k",
        _ => return None,
    })
}

pub(super) fn u32_of(v: usize) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

impl Recorder<'_> {
    pub(super) fn err(&self, id: NodeId, message: impl Into<String>) -> StreamError {
        node_error(self.graph, &self.ctx.name, id, message)
    }

    pub(super) fn node(&self, id: NodeId) -> &Node {
        self.graph.node(id)
    }

    /// The binding of node `id`'s bytes (from its first to its last byte).
    pub(super) fn bind(&self, id: NodeId) -> Result<Bound, StreamError> {
        let root_id = self.graph.storage_root(id);
        let root = self.roots[root_id.0].ok_or_else(|| self.err(id, "no storage"))?;
        let node = self.node(id);
        let start = root.offset + (node.layout.offset - self.node(root_id).layout.offset) as u64;
        let end = start + (node.layout.end_byte(node.dtype) - node.layout.offset) as u64;
        if end > root.buffer_bytes {
            return Err(self.err(id, "view outside its storage"));
        }
        Ok(self.bind_span(Span { offset: start, ..root }, end))
    }

    pub(super) fn bind_span(&self, span: Span, end: u64) -> Bound {
        let align = self.ctx.storage_align;
        let base = span.offset - span.offset % align;
        let range = (end.div_ceil(4) * 4).min(span.buffer_bytes).max(base + 4) - base;
        Bound {
            info: vk::DescriptorBufferInfo { buffer: span.buffer, offset: base, range },
            byte: (span.offset - base) as u32,
        }
    }

    /// The binding of `id` and its first word (its bytes must be whole
    /// aligned words: f32 and i32 tensors).
    pub(super) fn words(&self, id: NodeId) -> Result<(Bound, u32), StreamError> {
        let b = self.bind(id)?;
        if b.byte % 4 != 0 {
            return Err(self.err(id, "4-byte data is not 4-byte aligned"));
        }
        let word = b.byte / 4;
        Ok((b, word))
    }

    /// A contiguous f32 (or i32) input or output.
    pub(super) fn contiguous_words(&self, id: NodeId, dtype: DType) -> Result<(Bound, u32), StreamError> {
        let node = self.node(id);
        if node.dtype != dtype || !node.layout.is_contiguous(node.dtype) {
            return Err(self.err(id, format!("needs a contiguous {dtype} tensor; add contiguous()")));
        }
        self.words(id)
    }

    pub(super) fn dispatch(&self, id: NodeId, d: Dispatch<'_>) -> Result<(), StreamError> {
        self.dispatch_more(id, d, [None, None])
    }

    /// [`dispatch`](Self::dispatch) with bindings 4 and 5 (`c` and `e`)
    /// too, for ops of more than two inputs (unused ones name the status).
    pub(super) fn dispatch_more(
        &self,
        id: NodeId,
        d: Dispatch<'_>,
        more: [Option<&Bound>; 2],
    ) -> Result<(), StreamError> {
        let Dispatch { shader, a, b, out, push, groups } = d;
        if groups == 0 {
            return Ok(());
        }
        let pipeline = self.pipelines.get(shader).map_err(|e| self.err(id, e.to_string()))?;
        let status = self.bind_span(self.status, self.status.buffer_bytes).info;
        let infos = [
            a.map_or(status, |x| x.info),
            b.map_or(status, |x| x.info),
            out.info,
            status,
            more[0].map_or(status, |x| x.info),
            more[1].map_or(status, |x| x.info),
        ];
        for info in &infos {
            if info.range > self.ctx.max_storage_range {
                return Err(self.err(id, format!("a binding of {} bytes exceeds the device's limit", info.range)));
            }
        }
        let set = self
            .descriptors
            .borrow_mut()
            .allocate(self.pipelines.set_layout)
            .map_err(|r| self.err(id, format!("allocating a descriptor set: {r}")))?;
        let writes: Vec<vk::WriteDescriptorSet<'_>> = infos
            .iter()
            .enumerate()
            .map(|(i, info)| {
                vk::WriteDescriptorSet::default()
                    .dst_set(set)
                    .dst_binding(i as u32)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .buffer_info(std::slice::from_ref(info))
            })
            .collect();
        // SAFETY: the set was just allocated from this stream's pool and is
        // used by no pending batch; every descriptor names a live buffer.
        unsafe { self.ctx.raw.update_descriptor_sets(&writes, &[]) };
        debug_assert!(push.len() * 4 <= PUSH_BYTES as usize);
        let bytes: Vec<u8> = push.iter().flat_map(|w| w.to_le_bytes()).collect();
        let x = groups.min(MAX_GROUPS_X);
        let y = groups.div_ceil(x);
        let ctx = self.ctx;
        // SAFETY: `cmd` is recording on this device; the pipeline and its
        // layout belong to it; every descriptor names a live buffer of (or
        // imported into) this device, with a range inside it and an offset
        // aligned to the storage-buffer alignment; the push constants fit
        // the layout's range; shaders stay inside their bindings (the
        // parameters are derived from the same layouts, and naga's bounds
        // policy clamps any access that would not).
        unsafe {
            ctx.raw.cmd_bind_pipeline(self.cmd, vk::PipelineBindPoint::COMPUTE, pipeline);
            ctx.raw.cmd_bind_descriptor_sets(
                self.cmd,
                vk::PipelineBindPoint::COMPUTE,
                self.pipelines.layout,
                0,
                &[set],
                &[],
            );
            ctx.raw.cmd_push_constants(self.cmd, self.pipelines.layout, vk::ShaderStageFlags::COMPUTE, 0, &bytes);
            ctx.raw.cmd_dispatch(self.cmd, x, y, 1);
        }
        // The next op may read what this one wrote, or reuse its memory.
        crate::commands::barrier(
            ctx,
            self.cmd,
            (vk::PipelineStageFlags2::COMPUTE_SHADER, vk::AccessFlags2::SHADER_WRITE | vk::AccessFlags2::SHADER_READ),
            (vk::PipelineStageFlags2::COMPUTE_SHADER, vk::AccessFlags2::SHADER_READ | vk::AccessFlags2::SHADER_WRITE),
        );
        Ok(())
    }

    /// Records the dispatch of node `id`.
    pub(super) fn record(&self, id: NodeId) -> Result<(), StreamError> {
        let n = self.node(id);
        match n.op.clone() {
            Op::Leaf | Op::View => Ok(()),
            Op::Scale(factor) => self.unary(id, 0, factor),
            Op::Silu => self.unary(id, 1, 0.0),
            Op::Gelu => self.unary(id, 2, 0.0),
            Op::Add => self.broadcast(id, 0),
            Op::Mul => self.broadcast(id, 1),
            Op::RmsNorm { eps } => self.rms_norm(id, eps),
            Op::Softmax { scale, causal, window } => self.softmax(id, scale, causal, window),
            Op::Attention { scale, window, slot_rows: None, sinks: false, paged: false } => {
                self.attention(id, scale, window)
            }
            Op::Attention { .. } => {
                Err(self.err(id, "attention in slots or with sinks is not written for this device"))
            }
            Op::Rope { mode, dims, freq_base, freq_scale, yarn: None, rotated_pairs: None } => {
                self.rope(id, mode, dims, freq_base, freq_scale)
            }
            Op::Rope { .. } | Op::SwiGluClamped { .. } => {
                Err(self.err(id, "YaRN, partly rotated RoPE and the clamped SwiGLU are not written for this device"))
            }
            Op::GetRows => self.get_rows(id),
            Op::MatMul => self.matmul(id),
            Op::CopyInto => self.copy_into(id),
            Op::ScatterRows => self.scatter_rows(id),
            Op::Contiguous => self.contiguous(id),
            Op::TopK { .. } | Op::TakeColumns | Op::MatMulId | Op::MatMulIdShare { .. } | Op::SumRows => {
                Err(self.err(id, "the experts' ops are not written for this device"))
            }
            Op::Sigmoid | Op::Softplus | Op::L2Norm { .. } | Op::SsmConv | Op::GatedDeltaNet { .. } => {
                Err(self.err(id, "the recurrent layers' ops are not written for this device"))
            }
        }
    }
}
