//! Device memory: buffers with their own allocation, mapped when the memory
//! is host-visible (staging otherwise), exportable as opaque fds so that
//! another logical device of the same physical device can import them.

use baton_core::loom::Mutex;
use std::any::Any;
use std::ptr::NonNull;
use std::sync::Arc;

use ash::vk;
use baton_core::backend::{BufferRange, RawBuffer};

use crate::context::{Context, BUFFER_USAGE};
use crate::error::VulkanError;

const OPAQUE_FD: vk::ExternalMemoryHandleTypeFlags = vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD;

/// Where a buffer's memory comes from.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Device memory for tensors: mapped when the device memory is
    /// host-visible, exportable when the device exports fds.
    Device,
    /// Host-visible, mapped memory (staging, status words).
    Host,
}

/// A `VkBuffer` with its own memory.
struct Allocation {
    ctx: Arc<Context>,
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
}

impl Drop for Allocation {
    fn drop(&mut self) {
        // SAFETY: the runtime drops a buffer only when no queued work holds
        // it, and work holds its buffers until its point is reached, so no
        // pending command uses them; the memory is freed after the buffer.
        unsafe {
            self.ctx.raw.destroy_buffer(self.buffer, None);
            self.ctx.raw.free_memory(self.memory, None);
        }
    }
}

/// Memory of one Vulkan device.
pub struct VulkanBuffer {
    own: Allocation,
    len: usize,
    /// The allocation's size (what an importer must allocate).
    size: u64,
    memory_type: u32,
    mapped: Option<NonNull<u8>>,
    exportable: bool,
    /// This memory imported into other logical devices.
    imports: Mutex<Vec<Allocation>>,
}

// SAFETY: the handles are plain Vulkan handles, usable from any thread (the
// only externally synchronised operation, freeing, happens in Drop with
// `&mut self`); the mapped pointer is only dereferenced by stream work that
// the runtime orders (RawBuffer's contract); `imports` is behind a mutex.
unsafe impl Send for VulkanBuffer {}
// SAFETY: as above; `&VulkanBuffer` hands out handles and the pointer value.
unsafe impl Sync for VulkanBuffer {}

fn create_buffer(ctx: &Context, size: u64, exportable: bool) -> Result<vk::Buffer, VulkanError> {
    let mut external = vk::ExternalMemoryBufferCreateInfo::default().handle_types(OPAQUE_FD);
    let mut info =
        vk::BufferCreateInfo::default().size(size).usage(BUFFER_USAGE).sharing_mode(vk::SharingMode::EXCLUSIVE);
    if exportable {
        info = info.push_next(&mut external);
    }
    // SAFETY: a valid create info for this device.
    unsafe { ctx.raw.create_buffer(&info, None) }.map_err(|r| VulkanError::call(&ctx.name, "vkCreateBuffer", r))
}

impl VulkanBuffer {
    /// Allocates `len` bytes (zeroed) of `kind` on `ctx`.
    pub(crate) fn new(ctx: &Arc<Context>, len: usize, kind: Kind) -> Result<VulkanBuffer, VulkanError> {
        // Vulkan buffers are never empty, and copies and fills move whole
        // words: round up.
        let size = (len.max(1) as u64).div_ceil(4) * 4;
        let (memory_type, mapped) = match kind {
            Kind::Device => (ctx.memory.device_type, ctx.memory.device_mapped),
            Kind::Host => (ctx.memory.host_type, true),
        };
        let exportable = kind == Kind::Device && ctx.external_fd.is_some();
        let buffer = create_buffer(ctx, size, exportable)?;
        // SAFETY: `buffer` was just created on this device.
        let needs = unsafe { ctx.raw.get_buffer_memory_requirements(buffer) };
        let destroy = |e: VulkanError| {
            // SAFETY: the buffer is unused and destroyed once.
            unsafe { ctx.raw.destroy_buffer(buffer, None) };
            e
        };
        if needs.memory_type_bits & (1 << memory_type) == 0 {
            return Err(destroy(VulkanError::NoMemoryType { device: ctx.name.clone(), what: "this buffer" }));
        }
        let mut export = vk::ExportMemoryAllocateInfo::default().handle_types(OPAQUE_FD);
        let mut dedicated = vk::MemoryDedicatedAllocateInfo::default().buffer(buffer);
        let mut info = vk::MemoryAllocateInfo::default().allocation_size(needs.size).memory_type_index(memory_type);
        if exportable {
            info = info.push_next(&mut export).push_next(&mut dedicated);
        }
        // SAFETY: a valid allocate info; the type index was checked.
        let memory = unsafe { ctx.raw.allocate_memory(&info, None) }
            .map_err(|r| destroy(VulkanError::call(&ctx.name, "vkAllocateMemory", r)))?;
        let own = Allocation { ctx: ctx.clone(), buffer, memory };
        // SAFETY: fresh buffer and memory of this device, bound once.
        unsafe { ctx.raw.bind_buffer_memory(buffer, memory, 0) }
            .map_err(|r| VulkanError::call(&ctx.name, "vkBindBufferMemory", r))?;
        let mapped = if mapped {
            // SAFETY: the memory is host-visible (its type was chosen so) and
            // mapped once, for its whole life (freeing unmaps it).
            let ptr = unsafe { ctx.raw.map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty()) }
                .map_err(|r| VulkanError::call(&ctx.name, "vkMapMemory", r))?;
            let ptr = NonNull::new(ptr.cast::<u8>()).ok_or(VulkanError::call(
                &ctx.name,
                "vkMapMemory",
                vk::Result::ERROR_MEMORY_MAP_FAILED,
            ))?;
            // SAFETY: the mapping covers the whole allocation, at least
            // `size` bytes, and nothing else uses the new memory yet.
            unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, size as usize) };
            Some(ptr)
        } else {
            crate::commands::fill_zero(ctx, buffer, size)?;
            None
        };
        Ok(VulkanBuffer {
            own,
            len,
            size: needs.size,
            memory_type,
            mapped,
            exportable,
            imports: Mutex::new(Vec::new()),
        })
    }

    /// The mapped address, when the memory is host-visible.
    pub(crate) fn mapped(&self) -> Option<NonNull<u8>> {
        self.mapped
    }

    /// The buffer as `ctx` sees it: its own handle on its own device, an
    /// imported one (made once, then cached) on another logical device of
    /// the same physical device, or `None` when `ctx` cannot address it.
    pub(crate) fn handle_on(&self, ctx: &Arc<Context>) -> Option<vk::Buffer> {
        let owner = &self.own.ctx;
        if owner.serial == ctx.serial {
            return Some(self.own.buffer);
        }
        let same_physical = Arc::ptr_eq(&owner.instance, &ctx.instance) && owner.physical.handle == ctx.physical.handle;
        let (Some(export), Some(_)) = (owner.external_fd.as_ref(), ctx.external_fd.as_ref()) else { return None };
        if !self.exportable || !same_physical {
            return None;
        }
        let mut imports = self.imports.lock();
        if let Some(a) = imports.iter().find(|a| a.ctx.serial == ctx.serial) {
            return Some(a.buffer);
        }
        match self.import_into(export, ctx) {
            Ok(a) => {
                let buffer = a.buffer;
                imports.push(a);
                Some(buffer)
            }
            Err(e) => {
                tracing::warn!("importing a buffer of {} into {}: {e}", owner.name, ctx.name);
                None
            }
        }
    }

    fn import_into(
        &self,
        export: &ash::khr::external_memory_fd::Device,
        ctx: &Arc<Context>,
    ) -> Result<Allocation, VulkanError> {
        let owner = &self.own.ctx;
        let get = vk::MemoryGetFdInfoKHR::default().memory(self.own.memory).handle_type(OPAQUE_FD);
        // SAFETY: the memory was allocated exportable as an opaque fd.
        let fd =
            unsafe { export.get_memory_fd(&get) }.map_err(|r| VulkanError::call(&owner.name, "vkGetMemoryFdKHR", r))?;
        let buffer = create_buffer(ctx, self.len.max(1).div_ceil(4) as u64 * 4, true)?;
        let mut import = vk::ImportMemoryFdInfoKHR::default().handle_type(OPAQUE_FD).fd(fd);
        let mut dedicated = vk::MemoryDedicatedAllocateInfo::default().buffer(buffer);
        let info = vk::MemoryAllocateInfo::default()
            .allocation_size(self.size)
            .memory_type_index(self.memory_type)
            .push_next(&mut import)
            .push_next(&mut dedicated);
        // SAFETY: same physical device, so the same memory type index and
        // size are valid; on success the driver owns `fd`.
        let memory = match unsafe { ctx.raw.allocate_memory(&info, None) } {
            Ok(m) => m,
            Err(r) => {
                // SAFETY: the import failed, so `fd` is still ours to close,
                // and the buffer is unused.
                unsafe {
                    drop(<std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd));
                    ctx.raw.destroy_buffer(buffer, None);
                }
                return Err(VulkanError::call(&ctx.name, "vkAllocateMemory (import)", r));
            }
        };
        let imported = Allocation { ctx: ctx.clone(), buffer, memory };
        // SAFETY: fresh buffer and imported memory of `ctx`, bound once.
        unsafe { ctx.raw.bind_buffer_memory(buffer, memory, 0) }
            .map_err(|r| VulkanError::call(&ctx.name, "vkBindBufferMemory", r))?;
        Ok(imported)
    }
}

impl Drop for VulkanBuffer {
    fn drop(&mut self) {
        // Imports first: they alias this memory.
        self.imports.get_mut().clear();
    }
}

// SAFETY: `len` is fixed; the memory lives until drop; `host_ptr` is the
// mapping of the whole allocation (at least `len` bytes), valid from any
// thread while the buffer lives, and the runtime orders every access to it.
unsafe impl RawBuffer for VulkanBuffer {
    fn len(&self) -> usize {
        self.len
    }
    fn device(&self) -> &str {
        &self.own.ctx.name
    }
    fn host_ptr(&self) -> Option<NonNull<u8>> {
        self.mapped
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The range as a buffer `ctx` can bind, and its byte offset.
pub(crate) fn gpu_side(ctx: &Arc<Context>, range: &BufferRange) -> Option<(vk::Buffer, u64)> {
    let buffer = range.buffer().raw().as_any().downcast_ref::<VulkanBuffer>()?;
    buffer.handle_on(ctx).map(|b| (b, range.start() as u64))
}
