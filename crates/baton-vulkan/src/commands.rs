//! Recording command buffers: one pool and one command buffer per stream
//! (a stream records its next item only after the previous one completed),
//! and the barriers every recording uses.

use std::sync::Arc;

use ash::vk;

use crate::context::Context;
use crate::error::VulkanError;

/// A stream's command pool and its one command buffer.
pub(crate) struct Commands {
    ctx: Arc<Context>,
    pool: vk::CommandPool,
    buffer: vk::CommandBuffer,
}

fn create(ctx: &Context) -> Result<(vk::CommandPool, vk::CommandBuffer), VulkanError> {
    let info = vk::CommandPoolCreateInfo::default()
        .queue_family_index(ctx.queue_family)
        .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
    // SAFETY: a valid create info for this device.
    let pool = unsafe { ctx.raw.create_command_pool(&info, None) }
        .map_err(|r| VulkanError::call(&ctx.name, "vkCreateCommandPool", r))?;
    let alloc = vk::CommandBufferAllocateInfo::default()
        .command_pool(pool)
        .level(vk::CommandBufferLevel::PRIMARY)
        .command_buffer_count(1);
    // SAFETY: `pool` was just created on this device.
    match unsafe { ctx.raw.allocate_command_buffers(&alloc) } {
        Ok(buffers) => Ok((pool, buffers[0])),
        Err(r) => {
            // SAFETY: the pool is unused.
            unsafe { ctx.raw.destroy_command_pool(pool, None) };
            Err(VulkanError::call(&ctx.name, "vkAllocateCommandBuffers", r))
        }
    }
}

impl Commands {
    /// A pool and command buffer on `ctx`.
    pub(crate) fn new(ctx: &Arc<Context>) -> Result<Commands, VulkanError> {
        let (pool, buffer) = create(ctx)?;
        Ok(Commands { ctx: ctx.clone(), pool, buffer })
    }

    /// Starts a new recording. The caller guarantees that the previous
    /// recording's work has completed.
    pub(crate) fn begin(&mut self) -> Result<vk::CommandBuffer, vk::Result> {
        let begin = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        // SAFETY: the buffer is not pending (caller's guarantee) and belongs
        // to a pool created with RESET_COMMAND_BUFFER; only this stream's
        // worker records into it.
        unsafe {
            self.ctx.raw.reset_command_buffer(self.buffer, vk::CommandBufferResetFlags::empty())?;
            self.ctx.raw.begin_command_buffer(self.buffer, &begin)?;
        }
        Ok(self.buffer)
    }

    /// Ends the recording with a barrier that makes every write of it
    /// visible to the host (reads of mapped memory) and to later work.
    pub(crate) fn end(&mut self) -> Result<vk::CommandBuffer, vk::Result> {
        to_host(&self.ctx, self.buffer);
        // SAFETY: the buffer is recording (begun by `begin`).
        unsafe { self.ctx.raw.end_command_buffer(self.buffer) }?;
        Ok(self.buffer)
    }
}

impl Drop for Commands {
    fn drop(&mut self) {
        // SAFETY: the stream waits for each submission to complete before
        // it records or exits, so the command buffer is not pending; freeing
        // the pool frees it.
        unsafe { self.ctx.raw.destroy_command_pool(self.pool, None) };
    }
}

/// A global memory barrier from `src` to `dst` (stages and accesses).
pub(crate) fn barrier(
    ctx: &Context,
    cmd: vk::CommandBuffer,
    src: (vk::PipelineStageFlags2, vk::AccessFlags2),
    dst: (vk::PipelineStageFlags2, vk::AccessFlags2),
) {
    let barriers = [vk::MemoryBarrier2::default()
        .src_stage_mask(src.0)
        .src_access_mask(src.1)
        .dst_stage_mask(dst.0)
        .dst_access_mask(dst.1)];
    let dependency = vk::DependencyInfo::default().memory_barriers(&barriers);
    // SAFETY: `cmd` is recording on this device (callers record between
    // `begin` and `end`).
    unsafe { ctx.raw.cmd_pipeline_barrier2(cmd, &dependency) };
}

/// Every write so far, made available and visible to the host.
fn to_host(ctx: &Context, cmd: vk::CommandBuffer) {
    barrier(
        ctx,
        cmd,
        (vk::PipelineStageFlags2::ALL_COMMANDS, vk::AccessFlags2::MEMORY_WRITE),
        (vk::PipelineStageFlags2::HOST, vk::AccessFlags2::HOST_READ | vk::AccessFlags2::HOST_WRITE),
    );
}

/// Zeroes a new buffer that the host cannot map, blocking until done.
pub(crate) fn fill_zero(ctx: &Arc<Context>, buffer: vk::Buffer, size: u64) -> Result<(), VulkanError> {
    let mut commands = Commands::new(ctx)?;
    let call = |r| VulkanError::call(&ctx.name, "zeroing a buffer", r);
    let cmd = commands.begin().map_err(call)?;
    // SAFETY: `cmd` is recording; `buffer` belongs to this device, has
    // TRANSFER_DST usage and `size` (a multiple of 4) bytes.
    unsafe { ctx.raw.cmd_fill_buffer(cmd, buffer, 0, size, 0) };
    let cmd = commands.end().map_err(call)?;
    ctx.run_blocking(cmd).map_err(call)
}
