//! The device-side fast fence (issue 7, item 5): a one-invocation shader
//! that spins on a word the host writes, with a bounded loop, so a batch can
//! wait on a host-side counter without a host round trip through the queue.
//! When the bound runs out the shader raises a timeout flag that the host
//! checks after the batch: a dead producer costs a bounded spin, never a
//! hung device.
//!
//! The word lives in host-visible, coherent memory. The shader reads it as
//! a `coherent volatile` buffer, so every poll loads it again; the host
//! writes it with a release store. (Vulkan guarantees that host writes
//! become visible to a running shader only at the next submission; on
//! lavapipe and on GPUs with coherent host memory they do so within
//! microseconds, which is what the bound is for.)

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use ash::vk;

use crate::context::Context;
use crate::error::VulkanError;
use crate::memory::{Kind, VulkanBuffer};
#[cfg(test)]
use crate::pipelines::FENCE_SPIRV;
use crate::pipelines::{Pipelines, BINDINGS};

/// Words of the fence: [value, timed_out, polls].
///
/// llvmpipe ends a shader's loops after 65535 iterations in all; the shader
/// polls 16 times per iteration, so on lavapipe a wait lasts at most about
/// a million polls (a few milliseconds) before it times out.
const WORDS: usize = 3;

/// A fence word, its descriptor set, and the fence pipeline.
pub(crate) struct DeviceFence {
    ctx: Arc<Context>,
    words: VulkanBuffer,
    pool: vk::DescriptorPool,
    set: vk::DescriptorSet,
    pipeline: vk::Pipeline,
    layout: vk::PipelineLayout,
}

/// How a fence wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FenceResult {
    /// Whether the bound ran out before the word reached the target.
    pub timed_out: bool,
    /// Polls the shader made.
    pub polls: u32,
}

impl DeviceFence {
    pub(crate) fn new(ctx: &Arc<Context>, pipelines: &Pipelines) -> Result<DeviceFence, VulkanError> {
        let words = VulkanBuffer::new(ctx, WORDS * 4, Kind::Host)?;
        let buffer =
            words.handle_on(ctx).ok_or(VulkanError::NoMemoryType { device: ctx.name.clone(), what: "a fence" })?;
        let pipeline = pipelines.get("fence")?;
        let call = |what: &'static str| move |r| VulkanError::call(&ctx.name, what, r);
        let sizes = [vk::DescriptorPoolSize { ty: vk::DescriptorType::STORAGE_BUFFER, descriptor_count: BINDINGS }];
        let info = vk::DescriptorPoolCreateInfo::default().max_sets(1).pool_sizes(&sizes);
        // SAFETY: a valid create info for this device.
        let pool = unsafe { ctx.raw.create_descriptor_pool(&info, None) }.map_err(call("vkCreateDescriptorPool"))?;
        let layouts = [pipelines.set_layout];
        let alloc = vk::DescriptorSetAllocateInfo::default().descriptor_pool(pool).set_layouts(&layouts);
        // SAFETY: the pool was just made with room for one set of this layout.
        let set = match unsafe { ctx.raw.allocate_descriptor_sets(&alloc) } {
            Ok(sets) => sets[0],
            Err(r) => {
                // SAFETY: the pool is unused.
                unsafe { ctx.raw.destroy_descriptor_pool(pool, None) };
                return Err(VulkanError::call(&ctx.name, "vkAllocateDescriptorSets", r));
            }
        };
        // Every binding of the shared layout names the fence words; the
        // shader uses binding 0 only.
        let info = [vk::DescriptorBufferInfo { buffer, offset: 0, range: (WORDS * 4) as u64 }];
        let writes: Vec<vk::WriteDescriptorSet<'_>> = (0..BINDINGS)
            .map(|b| {
                vk::WriteDescriptorSet::default()
                    .dst_set(set)
                    .dst_binding(b)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .buffer_info(&info)
            })
            .collect();
        // SAFETY: the set is new and in no batch; the buffer is live.
        unsafe { ctx.raw.update_descriptor_sets(&writes, &[]) };
        Ok(DeviceFence { ctx: ctx.clone(), words, pool, set, pipeline, layout: pipelines.layout })
    }

    fn word(&self, i: usize) -> &AtomicU32 {
        let base = self.words.mapped().map_or(std::ptr::null_mut(), |p| p.as_ptr());
        // SAFETY: the fence words are host memory, mapped for the buffer's
        // life and aligned to at least 4 bytes; `i < WORDS`; the device
        // accesses them only as 32-bit words, so an atomic view is sound.
        unsafe { &*base.cast::<AtomicU32>().add(i.min(WORDS - 1)) }
    }

    /// Sets the counter to 0 and clears the flags. The caller guarantees no
    /// batch with a fence wait is running.
    pub(crate) fn reset(&self) {
        for i in 0..WORDS {
            self.word(i).store(0, Ordering::Release);
        }
    }

    /// The host side: publishes that the counter reached `value`.
    pub(crate) fn release(&self, value: u32) {
        self.word(0).store(value, Ordering::Release);
    }

    /// Records a wait, in `cmd`, until the counter reaches `target`, for at
    /// most `max_polls` polls; later commands of the batch run after it.
    pub(crate) fn record_wait(&self, cmd: vk::CommandBuffer, target: u32, max_polls: u32) {
        let push: Vec<u8> = [target, max_polls].iter().flat_map(|w| w.to_le_bytes()).collect();
        let ctx = &self.ctx;
        // SAFETY: `cmd` is recording on this device; the pipeline, layout
        // and set belong to it and stay alive while `self` does, which the
        // caller keeps until the batch has run; the push constants fit.
        unsafe {
            ctx.raw.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, self.pipeline);
            ctx.raw.cmd_bind_descriptor_sets(cmd, vk::PipelineBindPoint::COMPUTE, self.layout, 0, &[self.set], &[]);
            ctx.raw.cmd_push_constants(cmd, self.layout, vk::ShaderStageFlags::COMPUTE, 0, &push);
            ctx.raw.cmd_dispatch(cmd, 1, 1, 1);
        }
        crate::commands::barrier(
            ctx,
            cmd,
            (vk::PipelineStageFlags2::COMPUTE_SHADER, vk::AccessFlags2::SHADER_WRITE),
            (vk::PipelineStageFlags2::ALL_COMMANDS, vk::AccessFlags2::MEMORY_READ | vk::AccessFlags2::MEMORY_WRITE),
        );
    }

    /// How the last wait ended (after its batch has run).
    pub(crate) fn result(&self) -> FenceResult {
        FenceResult {
            timed_out: self.word(1).load(Ordering::Acquire) != 0,
            polls: self.word(2).load(Ordering::Acquire),
        }
    }
}

impl Drop for DeviceFence {
    fn drop(&mut self) {
        // SAFETY: the owner keeps the fence until its batches have run, so
        // the set is in no pending batch; destroying the pool frees it.
        unsafe { self.ctx.raw.destroy_descriptor_pool(self.pool, None) };
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::commands::Commands;
    use crate::timeline::StreamTimeline;

    fn required() -> bool {
        std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false")
            || std::env::var("BATON_REQUIRE_VULKAN").is_ok_and(|v| v == "1")
    }

    fn device() -> Option<Arc<crate::VulkanDevice>> {
        match crate::open(&["vulkan:0"]) {
            Ok(mut d) => Some(d.remove(0)),
            Err(e) if e.is_unavailable() && !required() => {
                eprintln!("skipped: {e}");
                None
            }
            Err(e) => panic!("{e}"),
        }
    }

    /// Runs one batch that waits on the fence for `target`, polling at most
    /// `max_polls` times; `release` runs on another thread meanwhile.
    fn wait_batch(max_polls: u32, release: Option<Duration>) -> Option<FenceResult> {
        let device = device()?;
        let ctx = device.context();
        let fence = Arc::new(DeviceFence::new(ctx, device.pipelines()).expect("fence"));
        let (timeline, _writer) = StreamTimeline::new(ctx, "fence-test".into()).expect("timeline");
        let mut commands = Commands::new(ctx).expect("commands");
        fence.reset();
        let cmd = commands.begin().expect("begin");
        fence.record_wait(cmd, 1, max_polls);
        let cmd = commands.end().expect("end");
        ctx.submit(Some(cmd), &[], (timeline.semaphore, 1)).expect("submit");
        let releaser = release.map(|after| {
            let (fence, timeline) = (fence.clone(), timeline.clone());
            std::thread::spawn(move || {
                std::thread::sleep(after);
                // The batch cannot have finished: its fence holds it.
                let reached = timeline.counter().expect("counter");
                fence.release(1);
                reached
            })
        });
        let bound = std::time::Instant::now() + std::time::Duration::from_secs(60);
        assert_eq!(timeline.wait_reached(1, Some(bound)), Ok(true), "the batch ends");
        if let Some(r) = releaser {
            let reached = r.join().expect("releaser");
            // A wait that saw the release held its batch until then; one
            // that ran out of polls first ended it unreleased (on a loaded
            // machine the releasing thread may come late: the caller
            // retries on `timed_out`).
            let result = fence.result();
            assert!(result.timed_out || reached == 0, "the batch ended before the fence was released: {result:?}");
        }
        let result = fence.result();
        drop((commands, fence, timeline, device));
        crate::validation::assert_clean();
        Some(result)
    }

    #[test]
    fn a_fence_released_before_its_batch_passes_at_once() {
        let Some(device) = device() else { return };
        let ctx = device.context();
        let fence = DeviceFence::new(ctx, device.pipelines()).expect("fence");
        let (timeline, _writer) = StreamTimeline::new(ctx, "fence-test".into()).expect("timeline");
        let mut commands = Commands::new(ctx).expect("commands");
        fence.reset();
        fence.release(3);
        let cmd = commands.begin().expect("begin");
        fence.record_wait(cmd, 2, 1000);
        let cmd = commands.end().expect("end");
        ctx.submit(Some(cmd), &[], (timeline.semaphore, 1)).expect("submit");
        let bound = std::time::Instant::now() + std::time::Duration::from_secs(60);
        assert_eq!(timeline.wait_reached(1, Some(bound)), Ok(true), "the batch ends");
        assert_eq!(fence.result(), FenceResult { timed_out: false, polls: 0 });
        drop((commands, fence, timeline, device));
        crate::validation::assert_clean();
    }

    /// A release while the shader spins ends the wait. On lavapipe a wait
    /// lasts a few milliseconds at most, so under load the host may come too
    /// late: up to 20 tries (each a few milliseconds), one must see the
    /// release.
    #[test]
    fn a_fence_released_while_it_spins_lets_its_batch_finish() {
        for _ in 0..20 {
            match wait_batch(u32::MAX, Some(Duration::from_micros(300))) {
                None => return,
                Some(r) if !r.timed_out => return,
                Some(r) => eprintln!("the release came after the bound: {r:?}"),
            }
        }
        panic!("no fence wait saw its release");
    }

    #[test]
    fn a_fence_never_released_times_out_within_its_bound() {
        if let Some(r) = wait_batch(10_000, None) {
            assert_eq!(r, FenceResult { timed_out: true, polls: 10_000 }, "polls count in steps of 16");
        }
    }

    /// The committed SPIR-V is glslc's output for the committed source.
    #[test]
    fn the_committed_fence_spirv_matches_its_source() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/shaders");
        let out = std::env::temp_dir().join(format!("baton-fence-{}.spv", std::process::id()));
        let status = std::process::Command::new("glslc")
            .args(["--target-env=vulkan1.2", "-O", "-o"])
            .arg(&out)
            .arg(dir.join("fence.comp"))
            .status();
        match status {
            Ok(s) => assert!(s.success(), "glslc failed on fence.comp"),
            Err(e) => {
                assert!(!required(), "glslc is required here (scripts/setup-vulkan.sh installs it): {e}");
                eprintln!("skipped: no glslc ({e})");
                return;
            }
        }
        let fresh = std::fs::read(&out).expect("glslc output");
        let _ = std::fs::remove_file(&out);
        assert!(
            fresh == FENCE_SPIRV,
            "src/shaders/fence.spv is stale: run `glslc --target-env=vulkan1.2 -O -o fence.spv fence.comp` in src/shaders"
        );
    }
}
