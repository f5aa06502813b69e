//! Vulkan devices: a logical device, what it supports, and its streams
//! (which share its context, pipelines and timelines through
//! `device_shared`).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use ash::vk;
use baton_core::backend::{Buffer, Device, DeviceError, DeviceInfo, DeviceKind, Stream};
use baton_core::graph::Op;
use baton_core::sync::WaitPolicy;
use baton_core::DType;

use crate::context::Context;
use crate::device_shared::DeviceShared;
use crate::memory::{Kind, VulkanBuffer};
use crate::pipelines::Pipelines;
use crate::stream::VulkanStream;

/// Weight types the Vulkan matmul and row lookup accept (what its shaders
/// decode): the kernels' `WEIGHT_TYPES` but Q8_K, GGML's activation format,
/// and Q5_0, Q5_1, MXFP4, Q2_K and Q3_K, which have no shaders yet
/// (`supports` refuses them).
/// The conformance suite checks every type a device declares, and that the
/// others are refused.
pub const WEIGHT_TYPES: [DType; 9] =
    [DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q4_K, DType::Q5_K, DType::Q6_K];

/// One Vulkan logical device.
pub struct VulkanDevice {
    shared: Arc<DeviceShared>,
    next_stream: AtomicUsize,
    allocated: AtomicU64,
    policy: WaitPolicy,
}

fn info_of(ctx: &Context) -> DeviceInfo {
    let p = &ctx.physical;
    let heaps = &p.memory.memory_heaps[..p.memory.memory_heap_count as usize];
    let memory_bytes =
        heaps.iter().filter(|h| h.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL)).map(|h| h.size).sum();
    let version = p.properties.api_version;
    let mut features = vec![format!("vk{}.{}", vk::api_version_major(version), vk::api_version_minor(version))];
    if ctx.external_fd.is_some() {
        features.push("extmem-fd".into());
    }
    if !ctx.memory.device_mapped {
        features.push("staging".into());
    }
    DeviceInfo {
        name: ctx.name.clone(),
        backend: "vulkan",
        kind: DeviceKind::Gpu,
        description: format!("{} ({:?})", p.name, p.properties.device_type),
        threads: 0,
        cores: Vec::new(),
        memory_bytes,
        features,
        weight_types: WEIGHT_TYPES.to_vec(),
        waits_on_host_points: true,
    }
}

impl VulkanDevice {
    pub(crate) fn new(ctx: Arc<Context>, policy: WaitPolicy) -> Result<VulkanDevice, crate::VulkanError> {
        let pipelines = Pipelines::new(&ctx)?;
        let info = info_of(&ctx);
        let shared = DeviceShared::new(ctx, info, pipelines);
        Ok(VulkanDevice {
            shared: Arc::new(shared),
            next_stream: AtomicUsize::new(0),
            allocated: AtomicU64::new(0),
            policy,
        })
    }

    pub(crate) fn context(&self) -> &Arc<Context> {
        &self.shared.ctx
    }

    pub(crate) fn pipelines(&self) -> &Pipelines {
        &self.shared.pipelines
    }

    /// Whether the driver runs on the host's CPU (lavapipe, SwiftShader):
    /// its shaders spin on host cores, so benches bound their work there.
    pub fn is_cpu_implementation(&self) -> bool {
        self.shared.ctx.physical.properties.device_type == vk::PhysicalDeviceType::CPU
    }

    /// Bytes allocated on this device so far (not decreased by frees).
    pub fn allocated_bytes(&self) -> u64 {
        self.allocated.load(Ordering::Relaxed)
    }
}

impl Device for VulkanDevice {
    fn info(&self) -> &DeviceInfo {
        &self.shared.info
    }

    fn alloc(&self, bytes: usize) -> Result<Buffer, DeviceError> {
        let buffer = VulkanBuffer::new(&self.shared.ctx, bytes, Kind::Device).map_err(|e| {
            tracing::debug!("allocating {bytes} bytes: {e}");
            DeviceError::OutOfMemory { device: self.shared.info.name.clone(), bytes }
        })?;
        self.allocated.fetch_add(bytes as u64, Ordering::Relaxed);
        Ok(Buffer::new(Box::new(buffer)))
    }

    fn new_stream(&self) -> Result<Stream, DeviceError> {
        let index = self.next_stream.fetch_add(1, Ordering::Relaxed);
        let stream = VulkanStream::spawn(self.shared.clone(), index)
            .map_err(|e| DeviceError::backend(&self.shared.info.name, "could not start a stream", e))?;
        Ok(Stream::with_policy(Arc::new(stream), self.policy))
    }

    fn supports(&self, op: &Op, dtype: DType) -> bool {
        match op {
            Op::MatMul | Op::GetRows => WEIGHT_TYPES.contains(&dtype),
            Op::CopyInto => matches!(dtype, DType::F32 | DType::F16 | DType::BF16),
            // KV caches: float, or rows of Q8_0 or Q4_0 blocks (`-ctk q8_0`);
            // one cache per op (the form in slots is not written here).
            Op::ScatterRows | Op::Attention { slot_rows: None, sinks: false, paged: false, .. } => {
                matches!(dtype, DType::F32 | DType::F16 | DType::BF16 | DType::Q8_0 | DType::Q4_0)
            }
            Op::Contiguous | Op::View | Op::Leaf => true,
            Op::Attention { .. } | Op::Rope { yarn: Some(_), .. } | Op::SwiGluClamped { .. } => false,
            Op::Rope { rotated_pairs: Some(_), .. } => false,
            // A mixture of experts' ops are not written here: the experts'
            // layers go on a device that runs them (the CPU).
            Op::TopK { .. } | Op::TakeColumns | Op::MatMulId | Op::MatMulIdShare { .. } | Op::SumRows => false,
            // Nor are a recurrent layer's (Gated DeltaNet): its layers go on
            // the CPU too.
            Op::Sigmoid | Op::Softplus | Op::L2Norm { .. } | Op::SsmConv | Op::GatedDeltaNet { .. } => false,
            _ => dtype == DType::F32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// MXFP4 (gpt-oss's experts) has no shader: not declared, so `supports`
    /// refuses its matmul and the CPU takes it.
    #[test]
    fn mxfp4_is_not_a_vulkan_weight_type() {
        assert!(!WEIGHT_TYPES.contains(&DType::MXFP4));
    }
}
