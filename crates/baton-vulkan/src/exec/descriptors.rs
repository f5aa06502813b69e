//! Descriptor sets of a stream's computations: one set per dispatch, from
//! pools the stream owns and resets before each recording (its previous
//! batch has completed by then). Plain sets rather than push descriptors,
//! so that the validation layer's synchronization checks see every access
//! of every dispatch.

use std::sync::Arc;

use ash::vk;

use crate::context::Context;
use crate::pipelines::BINDINGS;

/// Sets per pool.
const SETS: u32 = 256;

/// A stream's descriptor pools.
pub(crate) struct Descriptors {
    ctx: Arc<Context>,
    pools: Vec<vk::DescriptorPool>,
    /// The pool sets are allocated from now.
    current: usize,
}

impl Descriptors {
    pub(crate) fn new(ctx: &Arc<Context>) -> Descriptors {
        Descriptors { ctx: ctx.clone(), pools: Vec::new(), current: 0 }
    }

    /// Frees every set. The caller guarantees that no pending batch uses
    /// them.
    pub(crate) fn reset(&mut self) -> Result<(), vk::Result> {
        for &pool in &self.pools {
            // SAFETY: the pool belongs to this device and, by the caller's
            // guarantee, none of its sets is in use.
            unsafe { self.ctx.raw.reset_descriptor_pool(pool, vk::DescriptorPoolResetFlags::empty()) }?;
        }
        self.current = 0;
        Ok(())
    }

    fn add_pool(&mut self) -> Result<(), vk::Result> {
        let sizes =
            [vk::DescriptorPoolSize { ty: vk::DescriptorType::STORAGE_BUFFER, descriptor_count: SETS * BINDINGS }];
        let info = vk::DescriptorPoolCreateInfo::default().max_sets(SETS).pool_sizes(&sizes);
        // SAFETY: a valid create info for this device.
        let pool = unsafe { self.ctx.raw.create_descriptor_pool(&info, None) }?;
        self.pools.push(pool);
        Ok(())
    }

    /// A fresh set of `layout`.
    pub(crate) fn allocate(&mut self, layout: vk::DescriptorSetLayout) -> Result<vk::DescriptorSet, vk::Result> {
        let layouts = [layout];
        loop {
            if self.current == self.pools.len() {
                self.add_pool()?;
            }
            let info = vk::DescriptorSetAllocateInfo::default()
                .descriptor_pool(self.pools[self.current])
                .set_layouts(&layouts);
            // SAFETY: the pool and layout belong to this device; the pool is
            // used by this stream's worker only.
            match unsafe { self.ctx.raw.allocate_descriptor_sets(&info) } {
                Ok(sets) => return Ok(sets[0]),
                Err(vk::Result::ERROR_OUT_OF_POOL_MEMORY | vk::Result::ERROR_FRAGMENTED_POOL) => self.current += 1,
                Err(e) => return Err(e),
            }
        }
    }
}

impl Drop for Descriptors {
    fn drop(&mut self) {
        for &pool in &self.pools {
            // SAFETY: the stream's batches have completed (the worker waits
            // for each), so no set of the pool is in use.
            unsafe { self.ctx.raw.destroy_descriptor_pool(pool, None) };
        }
    }
}
