//! Writes, reads and copies of a stream.
//!
//! Each end of a transfer is device memory this stream's device can bind
//! (its own buffers, or another logical device's imported through an opaque
//! fd) or host-addressable memory (mapped Vulkan memory, CPU buffers). Two
//! bindable ends are copied on the queue; otherwise the bytes go through the
//! host: directly between mappings when both ends are mapped (the host
//! bounce), or through the stream's staging buffer.

use ash::vk;
use baton_core::backend::{BufferRange, HostSlot};
use baton_core::sync::Failure;

use crate::memory::{gpu_side, Kind, VulkanBuffer};
use crate::worker::Worker;

/// The host address of the range's first byte, when it has one.
fn host_side(range: &BufferRange) -> Option<*mut u8> {
    // SAFETY: the range lies inside its buffer (checked when it was built),
    // whose host mapping covers all of it.
    range.buffer().raw().host_ptr().map(|p| unsafe { p.as_ptr().add(range.start()) })
}

impl Worker {
    /// The staging buffer, grown to at least `bytes`.
    fn staging(&mut self, bytes: usize, value: u64) -> Result<(vk::Buffer, *mut u8), Failure> {
        if self.staging.as_ref().is_none_or(|s| baton_core::backend::RawBuffer::len(s) < bytes) {
            let have = self.staging.as_ref().map_or(0, baton_core::backend::RawBuffer::len);
            let grown = bytes.max(have + have / 2);
            self.staging = None;
            let fresh = VulkanBuffer::new(&self.device.ctx, grown, Kind::Host)
                .map_err(|e| self.failure(value, format!("staging memory: {e}")))?;
            self.staging = Some(fresh);
        }
        let staging = self.staging.as_ref().ok_or_else(|| self.failure(value, "no staging memory"))?;
        let handle = staging.handle_on(&self.device.ctx).ok_or_else(|| self.failure(value, "staging handle"))?;
        let ptr = staging.mapped().ok_or_else(|| self.failure(value, "staging memory is not mapped"))?;
        Ok((handle, ptr.as_ptr()))
    }

    /// Records one buffer-to-buffer copy and runs it as item `value`.
    fn copy_on_device(
        &mut self,
        src: (vk::Buffer, u64),
        dst: (vk::Buffer, u64),
        bytes: usize,
        value: u64,
    ) -> Result<(), Failure> {
        let ctx = self.device.ctx.clone();
        let cmd = self.commands.begin().map_err(|r| self.vk_failure(value, "recording a copy", r))?;
        if bytes > 0 {
            let region = [vk::BufferCopy { src_offset: src.1, dst_offset: dst.1, size: bytes as u64 }];
            // SAFETY: `cmd` is recording; both buffers belong to (or were
            // imported into) this device, have transfer usage, and the
            // regions lie inside them (ranges are checked when built; staging
            // has at least `bytes`); the caller never passes overlapping
            // regions of one buffer.
            unsafe { ctx.raw.cmd_copy_buffer(cmd, src.0, dst.0, &region) };
        }
        let cmd = self.commands.end().map_err(|r| self.vk_failure(value, "recording a copy", r))?;
        self.run_on_device(Some(cmd), &[], value)
    }

    /// Host bytes into device memory.
    pub(crate) fn write(&mut self, dst: &BufferRange, src: &dyn HostSlot, value: u64) -> Result<(), Failure> {
        let mut copied = false;
        if let Some(ptr) = host_side(dst) {
            src.with_bytes(&mut |bytes| {
                if bytes.len() == dst.len() {
                    // SAFETY: `ptr` addresses `dst.len()` bytes of the range;
                    // no unordered work touches them (RawStream::submit's
                    // contract) and earlier work of this stream is complete;
                    // the host slot is separate host memory.
                    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr, bytes.len()) };
                    copied = true;
                }
            });
            check(copied, "write", || self.failure(value, "write: the host buffer was gone or changed size"))?;
            return self.finish_on_host(value);
        }
        let target =
            gpu_side(&self.device.ctx, dst).ok_or_else(|| self.failure(value, "write: inaccessible memory"))?;
        let (staging, ptr) = self.staging(dst.len(), value)?;
        src.with_bytes(&mut |bytes| {
            if bytes.len() == dst.len() {
                // SAFETY: the staging mapping has at least `dst.len()` bytes
                // and only this worker uses it, between its items.
                unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr, bytes.len()) };
                copied = true;
            }
        });
        check(copied, "write", || self.failure(value, "write: the host buffer was gone or changed size"))?;
        self.copy_on_device((staging, 0), target, dst.len(), value)
    }

    /// Device memory into host bytes.
    pub(crate) fn read(&mut self, src: &BufferRange, dst: &dyn HostSlot, value: u64) -> Result<(), Failure> {
        let from = match host_side(src) {
            Some(ptr) => ptr,
            None => {
                let source =
                    gpu_side(&self.device.ctx, src).ok_or_else(|| self.failure(value, "read: inaccessible memory"))?;
                let (staging, ptr) = self.staging(src.len(), value)?;
                self.copy_on_device(source, (staging, 0), src.len(), value)?;
                ptr
            }
        };
        let mut copied = false;
        dst.with_bytes_mut(&mut |bytes| {
            if bytes.len() == src.len() {
                // SAFETY: `from` addresses `src.len()` bytes (the range's
                // mapping or the staging copy), written by work that is
                // complete and made visible to the host; nothing writes them
                // now (submit's contract).
                unsafe { std::ptr::copy_nonoverlapping(from, bytes.as_mut_ptr(), bytes.len()) };
                copied = true;
            }
        });
        check(copied, "read", || self.failure(value, "read: the host buffer was gone or changed size"))?;
        if host_side(src).is_some() {
            self.finish_on_host(value)
        } else {
            // The staging copy already completed the item's value.
            Ok(())
        }
    }

    /// Device memory to device memory, possibly of another device.
    pub(crate) fn copy(&mut self, src: &BufferRange, dst: &BufferRange, value: u64) -> Result<(), Failure> {
        if src.len() != dst.len() {
            return Err(self.failure(value, "copy: the ranges differ in size"));
        }
        let bytes = src.len();
        let ctx = self.device.ctx.clone();
        let overlapping = src.overlaps(dst);
        if let (Some(s), Some(d), false) = (gpu_side(&ctx, src), gpu_side(&ctx, dst), overlapping) {
            return self.copy_on_device(s, d, bytes, value);
        }
        match (host_side(src), host_side(dst)) {
            (Some(s), Some(d)) => {
                // SAFETY: both pointers address `bytes` bytes inside their
                // buffers, whose earlier writers are complete and visible to
                // the host; they may overlap (same buffer), so memmove.
                unsafe { std::ptr::copy(s, d, bytes) };
                self.finish_on_host(value)
            }
            (Some(s), None) => {
                let d = gpu_side(&ctx, dst).ok_or_else(|| self.failure(value, "copy: inaccessible target"))?;
                let (staging, ptr) = self.staging(bytes, value)?;
                // SAFETY: `s` addresses `bytes` readable bytes; staging has
                // at least `bytes` and is this worker's alone.
                unsafe { std::ptr::copy_nonoverlapping(s, ptr, bytes) };
                self.copy_on_device((staging, 0), d, bytes, value)
            }
            (None, Some(d)) => {
                let s = gpu_side(&ctx, src).ok_or_else(|| self.failure(value, "copy: inaccessible source"))?;
                let (staging, ptr) = self.staging(bytes, value)?;
                self.copy_on_device(s, (staging, 0), bytes, value)?;
                // SAFETY: the staging copy is complete and host-visible; `d`
                // addresses `bytes` writable bytes no other work touches.
                unsafe { std::ptr::copy_nonoverlapping(ptr, d, bytes) };
                Ok(())
            }
            (None, None) => {
                // Overlapping ranges of one unmapped buffer: through staging.
                let (s, d) = match (gpu_side(&ctx, src), gpu_side(&ctx, dst)) {
                    (Some(s), Some(d)) => (s, d),
                    _ => return Err(self.failure(value, "copy: inaccessible memory")),
                };
                let (staging, _) = self.staging(bytes, value)?;
                self.copy_twice(s, d, staging, bytes, value)
            }
        }
    }

    /// `src` to staging, then staging to `dst`, in one batch.
    fn copy_twice(
        &mut self,
        src: (vk::Buffer, u64),
        dst: (vk::Buffer, u64),
        staging: vk::Buffer,
        bytes: usize,
        value: u64,
    ) -> Result<(), Failure> {
        let ctx = self.device.ctx.clone();
        let cmd = self.commands.begin().map_err(|r| self.vk_failure(value, "recording a copy", r))?;
        let size = bytes as u64;
        // SAFETY: `cmd` is recording; the buffers are this device's with
        // transfer usage and the regions lie inside them; the barrier orders
        // the second copy's read after the first copy's write.
        unsafe {
            ctx.raw.cmd_copy_buffer(cmd, src.0, staging, &[vk::BufferCopy { src_offset: src.1, dst_offset: 0, size }]);
            crate::commands::barrier(
                &ctx,
                cmd,
                (vk::PipelineStageFlags2::COPY, vk::AccessFlags2::TRANSFER_WRITE),
                (vk::PipelineStageFlags2::COPY, vk::AccessFlags2::TRANSFER_READ),
            );
            ctx.raw.cmd_copy_buffer(cmd, staging, dst.0, &[vk::BufferCopy { src_offset: 0, dst_offset: dst.1, size }]);
        }
        let cmd = self.commands.end().map_err(|r| self.vk_failure(value, "recording a copy", r))?;
        self.run_on_device(Some(cmd), &[], value)
    }
}

fn check(copied: bool, _what: &str, failure: impl FnOnce() -> Failure) -> Result<(), Failure> {
    if copied {
        Ok(())
    } else {
        Err(failure())
    }
}
