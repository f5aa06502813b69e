//! One logical Vulkan device: its queue, its memory types, the extensions
//! Baton uses, and whether it was lost. Everything created from it (buffers,
//! semaphores, pipelines, command pools) holds an `Arc<Context>`, so the
//! `VkDevice` is destroyed only after all of them.

use baton_core::loom::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ash::vk;
use baton_core::sync::{Domain, Failure, FailureKind};

use crate::error::VulkanError;
use crate::instance::{Instance, Physical};
use crate::options::OpenOptions;

static NEXT_SERIAL: AtomicU64 = AtomicU64::new(1);

/// How every buffer may be used: shader storage and both ends of copies.
pub(crate) const BUFFER_USAGE: vk::BufferUsageFlags = vk::BufferUsageFlags::from_raw(
    vk::BufferUsageFlags::STORAGE_BUFFER.as_raw()
        | vk::BufferUsageFlags::TRANSFER_SRC.as_raw()
        | vk::BufferUsageFlags::TRANSFER_DST.as_raw(),
);

/// The memory types buffers use.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MemoryChoice {
    /// The type of device buffers.
    pub(crate) device_type: u32,
    /// Whether device buffers are mapped (host-visible and coherent).
    pub(crate) device_mapped: bool,
    /// A host-visible, coherent type for staging and status words.
    pub(crate) host_type: u32,
}

/// A `VkDevice` with its single queue.
pub(crate) struct Context {
    pub(crate) instance: Arc<Instance>,
    pub(crate) physical: Physical,
    pub(crate) raw: ash::Device,
    queue: Mutex<vk::Queue>,
    pub(crate) queue_family: u32,
    /// Present when buffers can be exported and imported as opaque fds.
    pub(crate) external_fd: Option<ash::khr::external_memory_fd::Device>,
    /// `vulkan:0` (`vulkan:0#2` for a second logical device of it).
    pub(crate) name: String,
    /// Process-unique, tells logical devices of one physical device apart.
    pub(crate) serial: u64,
    /// The domain of this device's timelines: only its own streams wait on
    /// them natively.
    pub(crate) domain: Domain,
    pub(crate) memory: MemoryChoice,
    /// Alignment of storage-buffer binding offsets.
    pub(crate) storage_align: u64,
    /// The largest storage-buffer binding.
    pub(crate) max_storage_range: u64,
    lost: Mutex<Option<Failure>>,
}

fn find_type(memory: &vk::PhysicalDeviceMemoryProperties, flags: vk::MemoryPropertyFlags) -> Option<u32> {
    (0..memory.memory_type_count).find(|&i| memory.memory_types[i as usize].property_flags.contains(flags))
}

fn has_extension(available: &[vk::ExtensionProperties], name: &std::ffi::CStr) -> bool {
    available.iter().any(|e| e.extension_name_as_c_str().is_ok_and(|n| n == name))
}

impl Context {
    /// Creates a logical device on `physical`, named `name`.
    pub(crate) fn new(
        instance: Arc<Instance>,
        physical: Physical,
        name: String,
        options: &OpenOptions,
    ) -> Result<Arc<Context>, VulkanError> {
        let unsuitable =
            |missing: &str| VulkanError::Unsuitable { device: physical.name.clone(), missing: missing.into() };
        if physical.properties.api_version < vk::API_VERSION_1_3 {
            return Err(unsuitable("Vulkan 1.3"));
        }
        // SAFETY: plain queries of a physical device of this instance.
        let (families, available) = unsafe {
            (
                instance.raw.get_physical_device_queue_family_properties(physical.handle),
                instance
                    .raw
                    .enumerate_device_extension_properties(physical.handle)
                    .map_err(|r| VulkanError::call(&name, "vkEnumerateDeviceExtensionProperties", r))?,
            )
        };
        let queue_family = families
            .iter()
            .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE))
            .ok_or_else(|| unsuitable("a compute queue"))? as u32;
        let mut v12 = vk::PhysicalDeviceVulkan12Features::default();
        let mut v13 = vk::PhysicalDeviceVulkan13Features::default();
        let mut features = vk::PhysicalDeviceFeatures2::default().push_next(&mut v12).push_next(&mut v13);
        // SAFETY: a query into structures that live across the call.
        unsafe { instance.raw.get_physical_device_features2(physical.handle, &mut features) };
        if v12.timeline_semaphore == vk::FALSE {
            return Err(unsuitable("timeline semaphores"));
        }
        if v13.synchronization2 == vk::FALSE {
            return Err(unsuitable("synchronization2"));
        }
        let mut subgroup = vk::PhysicalDeviceSubgroupProperties::default();
        let mut properties = vk::PhysicalDeviceProperties2::default().push_next(&mut subgroup);
        // SAFETY: a query into structures that live across the call.
        unsafe { instance.raw.get_physical_device_properties2(physical.handle, &mut properties) };
        let shuffles = vk::SubgroupFeatureFlags::BASIC | vk::SubgroupFeatureFlags::SHUFFLE;
        if !subgroup.supported_stages.contains(vk::ShaderStageFlags::COMPUTE)
            || !subgroup.supported_operations.contains(shuffles)
            || subgroup.subgroup_size < 8
            || !subgroup.subgroup_size.is_multiple_of(8)
            || subgroup.subgroup_size > 64
        {
            return Err(unsuitable("subgroup shuffles in compute shaders on subgroups of 8 to 64 (a multiple of 8)"));
        }
        let external = options.external_memory
            && has_extension(&available, ash::khr::external_memory_fd::NAME)
            && exports_buffers(&instance, &physical);
        let mut extensions = Vec::new();
        if external {
            extensions.push(ash::khr::external_memory_fd::NAME.as_ptr());
        }
        let priorities = [1.0f32];
        let queues =
            [vk::DeviceQueueCreateInfo::default().queue_family_index(queue_family).queue_priorities(&priorities)];
        let mut want12 = vk::PhysicalDeviceVulkan12Features::default().timeline_semaphore(true);
        let mut want13 = vk::PhysicalDeviceVulkan13Features::default().synchronization2(true);
        let info = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queues)
            .enabled_extension_names(&extensions)
            .push_next(&mut want12)
            .push_next(&mut want13);
        // SAFETY: `info` and everything it points to outlive the call; the
        // features were checked to be supported above.
        let raw = unsafe { instance.raw.create_device(physical.handle, &info, None) }
            .map_err(|r| VulkanError::call(&name, "vkCreateDevice", r))?;
        // The driver is loaded and has a device: from now on, exit waits
        // for stream workers before the driver's own exit handlers run.
        crate::exit::register_exit_wait();
        // SAFETY: the device was created with one queue of this family.
        let queue = unsafe { raw.get_device_queue(queue_family, 0) };
        let memory = choose_memory(&physical, options).ok_or_else(|| {
            // SAFETY: nothing was created from the device yet.
            unsafe { raw.destroy_device(None) };
            VulkanError::NoMemoryType { device: name.clone(), what: "buffers" }
        })?;
        let external_fd = external.then(|| ash::khr::external_memory_fd::Device::new(&instance.raw, &raw));
        let serial = NEXT_SERIAL.fetch_add(1, Ordering::Relaxed);
        let limits = physical.properties.limits;
        Ok(Arc::new(Context {
            domain: Domain::Device { backend: "vulkan", device: format!("{name} (logical device {serial})") },
            storage_align: limits.min_storage_buffer_offset_alignment.max(16),
            max_storage_range: u64::from(limits.max_storage_buffer_range),
            instance,
            physical,
            raw,
            queue: Mutex::new(queue),
            queue_family,
            external_fd,
            name,
            serial,
            memory,
            lost: Mutex::new(None),
        }))
    }

    /// Submits one batch to the queue: after `waits`, run `command` (if
    /// any), then signal `signal`.
    pub(crate) fn submit(
        &self,
        command: Option<vk::CommandBuffer>,
        waits: &[(vk::Semaphore, u64)],
        signal: (vk::Semaphore, u64),
    ) -> Result<(), vk::Result> {
        let waits: Vec<vk::SemaphoreSubmitInfo<'_>> = waits
            .iter()
            .map(|&(semaphore, value)| {
                vk::SemaphoreSubmitInfo::default()
                    .semaphore(semaphore)
                    .value(value)
                    .stage_mask(vk::PipelineStageFlags2::ALL_COMMANDS)
            })
            .collect();
        let signals = [vk::SemaphoreSubmitInfo::default()
            .semaphore(signal.0)
            .value(signal.1)
            .stage_mask(vk::PipelineStageFlags2::ALL_COMMANDS)];
        let commands: Vec<vk::CommandBufferSubmitInfo<'_>> =
            command.iter().map(|&c| vk::CommandBufferSubmitInfo::default().command_buffer(c)).collect();
        let submit = vk::SubmitInfo2::default()
            .wait_semaphore_infos(&waits)
            .command_buffer_infos(&commands)
            .signal_semaphore_infos(&signals);
        let queue = self.queue.lock();
        // SAFETY: the queue is externally synchronised by its mutex; the
        // semaphores and command buffer belong to this device and stay alive
        // until the signal is observed (their owners wait for it); the
        // caller submits no wait whose signal is not submitted yet (the
        // single-queue rule, see `timeline`).
        let result = unsafe { self.raw.queue_submit2(*queue, &[submit], vk::Fence::null()) };
        drop(queue);
        self.check(result)
    }

    /// Submits `command` alone and blocks until it has run (one-off work
    /// outside any stream, such as zeroing a new buffer).
    pub(crate) fn run_blocking(&self, command: vk::CommandBuffer) -> Result<(), vk::Result> {
        // SAFETY: a fence of this device, destroyed below after the wait.
        let fence = unsafe { self.raw.create_fence(&vk::FenceCreateInfo::default(), None) }?;
        let commands = [vk::CommandBufferSubmitInfo::default().command_buffer(command)];
        let submit = vk::SubmitInfo2::default().command_buffer_infos(&commands);
        let queue = self.queue.lock();
        // SAFETY: the queue is externally synchronised by its mutex; the
        // command buffer was recorded on this device; the batch waits on
        // nothing.
        let result = unsafe { self.raw.queue_submit2(*queue, &[submit], fence) };
        drop(queue);
        // SAFETY: the fence is signalled by the batch just submitted (or
        // was never submitted, then it is not waited on).
        let result = result.and_then(|()| unsafe { self.raw.wait_for_fences(&[fence], true, u64::MAX) });
        // SAFETY: the batch has completed (or failed to submit), so nothing
        // uses the fence any more.
        unsafe { self.raw.destroy_fence(fence, None) };
        self.check(result)
    }

    /// Records a device loss (sticky) and passes other results through.
    pub(crate) fn check<T>(&self, result: Result<T, vk::Result>) -> Result<T, vk::Result> {
        if let Err(vk::Result::ERROR_DEVICE_LOST) = result {
            self.lose("the driver reported VK_ERROR_DEVICE_LOST");
        }
        result
    }

    /// Marks the device lost: every stream fails from its next item on.
    pub(crate) fn lose(&self, message: &str) {
        let mut lost = self.lost.lock();
        if lost.is_none() {
            *lost = Some(Failure::new(FailureKind::DeviceLost, self.name.clone(), message.to_string()));
        }
    }

    /// The device's loss, if it was lost.
    pub(crate) fn lost(&self) -> Option<Failure> {
        self.lost.lock().clone()
    }
}

/// Whether buffers of Baton's usage can be exported and imported as opaque
/// file descriptors.
fn exports_buffers(instance: &Instance, physical: &Physical) -> bool {
    let info = vk::PhysicalDeviceExternalBufferInfo::default()
        .usage(BUFFER_USAGE)
        .handle_type(vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD);
    let mut out = vk::ExternalBufferProperties::default();
    // SAFETY: a query into a structure that lives across the call.
    unsafe { instance.raw.get_physical_device_external_buffer_properties(physical.handle, &info, &mut out) };
    let features = out.external_memory_properties.external_memory_features;
    features.contains(vk::ExternalMemoryFeatureFlags::EXPORTABLE | vk::ExternalMemoryFeatureFlags::IMPORTABLE)
}

fn choose_memory(physical: &Physical, options: &OpenOptions) -> Option<MemoryChoice> {
    let mem = &physical.memory;
    let host = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
    let host_type = find_type(mem, host)?;
    let mapped = find_type(mem, vk::MemoryPropertyFlags::DEVICE_LOCAL | host).filter(|_| !options.staging);
    Some(match mapped {
        Some(t) => MemoryChoice { device_type: t, device_mapped: true, host_type },
        None => MemoryChoice {
            device_type: find_type(mem, vk::MemoryPropertyFlags::DEVICE_LOCAL).unwrap_or(host_type),
            device_mapped: false,
            host_type,
        },
    })
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: every object created from this device holds an Arc of this
        // context, so all of them are destroyed by now; waiting for idle
        // first lets in-flight work (none expected) finish.
        unsafe {
            let _ = self.raw.device_wait_idle();
            self.raw.destroy_device(None);
        }
    }
}
