//! Compute pipelines, made on first use and kept for the device's life.
//! Every shader has the same layout: four storage buffers (inputs `a` and
//! `b`, the output, the stream's error record) in one descriptor set, and
//! up to 128 bytes of push constants (the op's parameters).

use baton_core::loom::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

use ash::vk;

use crate::context::Context;
use crate::error::VulkanError;

mod compiled {
    include!(concat!(env!("OUT_DIR"), "/shaders.rs"));
}

/// Bytes of push constants every pipeline accepts.
pub(crate) const PUSH_BYTES: u32 = 128;
/// Storage buffers of every pipeline: `a`, `b`, `out`, `status`, and `c`
/// and `e` for ops of more inputs (attention).
pub(crate) const BINDINGS: u32 = 6;

/// The device-side fence, compiled by glslc (see `shaders/fence.comp`).
pub(crate) const FENCE_SPIRV: &[u8] = include_bytes!("shaders/fence.spv");

/// The SPIR-V of a shader, by name (`matmul_q4_1`, or `fence`).
pub(crate) fn spirv(name: &str) -> Option<&'static [u32]> {
    if name == "fence" {
        static FENCE: std::sync::OnceLock<Vec<u32>> = std::sync::OnceLock::new();
        let words =
            FENCE.get_or_init(|| ash::util::read_spv(&mut std::io::Cursor::new(FENCE_SPIRV)).unwrap_or_default());
        return (!words.is_empty()).then_some(words.as_slice());
    }
    compiled::SHADERS.iter().find(|(n, _)| *n == name).map(|(_, words)| *words)
}

/// The names of every compiled shader.
pub fn shader_names() -> impl Iterator<Item = &'static str> {
    compiled::SHADERS.iter().map(|(n, _)| *n)
}

/// The pipelines of one logical device.
pub(crate) struct Pipelines {
    ctx: Arc<Context>,
    pub(crate) set_layout: vk::DescriptorSetLayout,
    pub(crate) layout: vk::PipelineLayout,
    made: Mutex<HashMap<&'static str, vk::Pipeline>>,
}

impl Pipelines {
    /// The shared layouts; no pipeline yet.
    pub(crate) fn new(ctx: &Arc<Context>) -> Result<Pipelines, VulkanError> {
        let bindings: Vec<vk::DescriptorSetLayoutBinding<'_>> = (0..BINDINGS)
            .map(|b| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(b)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        let info = vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings);
        // SAFETY: a valid create info.
        let set_layout = unsafe { ctx.raw.create_descriptor_set_layout(&info, None) }
            .map_err(|r| VulkanError::call(&ctx.name, "vkCreateDescriptorSetLayout", r))?;
        let ranges = [vk::PushConstantRange::default().stage_flags(vk::ShaderStageFlags::COMPUTE).size(PUSH_BYTES)];
        let layouts = [set_layout];
        let info = vk::PipelineLayoutCreateInfo::default().set_layouts(&layouts).push_constant_ranges(&ranges);
        // SAFETY: a valid create info referring to the set layout above.
        let layout = match unsafe { ctx.raw.create_pipeline_layout(&info, None) } {
            Ok(l) => l,
            Err(r) => {
                // SAFETY: the set layout is unused.
                unsafe { ctx.raw.destroy_descriptor_set_layout(set_layout, None) };
                return Err(VulkanError::call(&ctx.name, "vkCreatePipelineLayout", r));
            }
        };
        Ok(Pipelines { ctx: ctx.clone(), set_layout, layout, made: Mutex::new(HashMap::new()) })
    }

    /// The pipeline of shader `name`, made on first use.
    pub(crate) fn get(&self, name: &'static str) -> Result<vk::Pipeline, VulkanError> {
        let mut made = self.made.lock();
        if let Some(&p) = made.get(name) {
            return Ok(p);
        }
        let code = spirv(name).ok_or(VulkanError::Unsuitable {
            device: self.ctx.name.clone(),
            missing: format!("a shader named {name}"),
        })?;
        let ctx = &self.ctx;
        let info = vk::ShaderModuleCreateInfo::default().code(code);
        // SAFETY: `code` is SPIR-V that naga wrote and validated at build
        // time, or glslc's fence (checked against its source by a test).
        let module = unsafe { ctx.raw.create_shader_module(&info, None) }
            .map_err(|r| VulkanError::call(&ctx.name, "vkCreateShaderModule", r))?;
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(module)
            .name(c"main");
        let info = [vk::ComputePipelineCreateInfo::default().stage(stage).layout(self.layout)];
        // SAFETY: the module and layout belong to this device; the module
        // may be destroyed once the pipeline is made.
        let result = unsafe { ctx.raw.create_compute_pipelines(vk::PipelineCache::null(), &info, None) };
        // SAFETY: the module is used by no pending pipeline creation.
        unsafe { ctx.raw.destroy_shader_module(module, None) };
        let pipeline = result.map_err(|(_, r)| VulkanError::call(&ctx.name, "vkCreateComputePipelines", r))?[0];
        made.insert(name, pipeline);
        Ok(pipeline)
    }
}

impl Drop for Pipelines {
    fn drop(&mut self) {
        let made = self.made.get_mut();
        // SAFETY: the pipelines live in the device's shared state, which
        // streams hold while they run; once it drops no stream records or
        // has pending work with them.
        unsafe {
            for (_, p) in made.drain() {
                self.ctx.raw.destroy_pipeline(p, None);
            }
            self.ctx.raw.destroy_pipeline_layout(self.layout, None);
            self.ctx.raw.destroy_descriptor_set_layout(self.set_layout, None);
        }
    }
}
