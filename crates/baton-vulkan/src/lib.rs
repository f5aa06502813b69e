//! Baton's Vulkan backend.
//!
//! A backend: depends on baton-core alone (the contract it implements); the
//! scheduler and the model reach it only through baton-core's `Device` trait,
//! and baton-cli opens it.
//!
//! A Vulkan device is a logical device on one physical device (`vulkan:N`
//! is the loader's N-th; `vulkan` is `vulkan:0`), with its one queue. Each
//! stream's timeline is one timeline semaphore, mirrored into the core's
//! timeline machinery so that host waits, other backends and the core's
//! relay work on its points; waits between streams of one device are
//! native semaphore waits, held back on the host until their signal is
//! submitted (one queue: contract rule `W-HOLD`). Graphs run as compute
//! shaders written in WGSL and compiled to SPIR-V by naga at build time
//! (`src/shaders/`). See `docs/contract.md` for the rules every stream
//! keeps.
//!
//! The same physical device can be opened twice (`vulkan:0,vulkan:0`): two
//! logical devices, named `vulkan:0` and `vulkan:0#2`, whose copies import
//! each other's memory through opaque fds where the driver offers them, or
//! go through the host otherwise.
//!
//! The loader is loaded at run time: a machine without Vulkan gets a typed
//! error ([`VulkanError::NoLoader`], [`VulkanError::NoDevice`]), never a
//! panic. `BATON_VK_VALIDATION=1` enables the Khronos validation layer with
//! synchronization validation ([`validation`]).
#![deny(missing_docs)]

mod commands;
mod context;
mod device;
mod device_shared;
mod error;
mod exec;
mod exit;
mod fence;
mod instance;
pub mod latency;
mod memory;
mod options;
mod pipelines;
mod queue;
mod stream;
mod teardown;
mod timeline;
mod transfer;
pub mod validation;
mod worker;

use std::sync::Arc;

use baton_core::backend::DeviceInfo;

pub use device::{VulkanDevice, WEIGHT_TYPES};
pub use error::VulkanError;
pub use fence::FenceResult;
pub use memory::VulkanBuffer;
pub use options::OpenOptions;
pub use pipelines::shader_names;
pub use stream::VulkanStream;
pub use teardown::wait_for_teardown;

/// Parses `vulkan` or `vulkan:N` into the physical device index.
pub fn parse_name(name: &str) -> Result<usize, VulkanError> {
    let bad = || VulkanError::BadName { name: name.to_string() };
    match name.strip_prefix("vulkan") {
        Some("") => Ok(0),
        Some(rest) => rest.strip_prefix(':').and_then(|n| n.parse().ok()).ok_or_else(bad),
        None => Err(bad()),
    }
}

/// Opens the Vulkan devices of a device list (`vulkan`, `vulkan:0`,
/// `vulkan:0,vulkan:1`, or the same index twice for two logical devices).
pub fn open(names: &[&str]) -> Result<Vec<Arc<VulkanDevice>>, VulkanError> {
    open_with(names, &OpenOptions::default())
}

/// As [`open`], with options.
pub fn open_with(names: &[&str], options: &OpenOptions) -> Result<Vec<Arc<VulkanDevice>>, VulkanError> {
    let indices = names.iter().map(|n| parse_name(n)).collect::<Result<Vec<usize>, VulkanError>>()?;
    let instance = instance::Instance::shared()?;
    let physical = instance.physical_devices()?;
    if physical.is_empty() {
        return Err(VulkanError::NoDevice);
    }
    let available = || (0..physical.len()).map(|i| format!("vulkan:{i}")).collect::<Vec<_>>().join(", ");
    let mut opened = Vec::new();
    for (k, &index) in indices.iter().enumerate() {
        let p = physical
            .get(index)
            .ok_or_else(|| VulkanError::Unknown { name: names[k].to_string(), available: available() })?;
        let earlier = indices[..k].iter().filter(|&&i| i == index).count();
        let name = if earlier == 0 { format!("vulkan:{index}") } else { format!("vulkan:{index}#{}", earlier + 1) };
        let ctx = context::Context::new(instance.clone(), p.clone(), name, options)?;
        opened.push(Arc::new(VulkanDevice::new(ctx, options.policy)?));
    }
    Ok(opened)
}

/// What every usable Vulkan device of this machine offers, for `baton
/// devices` (opens each one briefly).
pub fn list() -> Result<Vec<DeviceInfo>, VulkanError> {
    let instance = instance::Instance::shared()?;
    let count = instance.physical_devices()?.len();
    let mut infos = Vec::new();
    for i in 0..count {
        let name = format!("vulkan:{i}");
        match open(&[name.as_str()]) {
            Ok(devices) => infos.extend(devices.iter().map(|d| baton_core::backend::Device::info(&**d).clone())),
            Err(e) => tracing::debug!("{name} is not usable: {e}"),
        }
    }
    Ok(infos)
}
