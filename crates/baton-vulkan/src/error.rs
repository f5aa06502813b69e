//! Errors of opening and using Vulkan devices.

use ash::vk;
use baton_core::backend::DeviceError;

/// What went wrong with Vulkan.
#[derive(Clone, Debug, thiserror::Error)]
pub enum VulkanError {
    /// The Vulkan loader (`libvulkan.so.1`) could not be loaded.
    #[error("no Vulkan loader on this machine ({0}); install libvulkan1 and a driver (Mesa's lavapipe: mesa-vulkan-drivers)")]
    NoLoader(#[source] std::sync::Arc<ash::LoadingError>),
    /// The loader found no driver offering a device.
    #[error("the Vulkan loader found no device; install a driver (Mesa's lavapipe: mesa-vulkan-drivers)")]
    NoDevice,
    /// A device lacks something Baton needs.
    #[error("{device} cannot be used: it lacks {missing}")]
    Unsuitable {
        /// The physical device's name.
        device: String,
        /// The feature or extension it lacks.
        missing: String,
    },
    /// A device list names no such device.
    #[error("unknown device {name:?}; available: {available}")]
    Unknown {
        /// The name given.
        name: String,
        /// What exists on this machine.
        available: String,
    },
    /// A malformed device name.
    #[error("bad Vulkan device name {name:?}: expected vulkan or vulkan:N")]
    BadName {
        /// The name given.
        name: String,
    },
    /// A Vulkan call failed.
    #[error("{call} failed on {device}: {result}")]
    Call {
        /// The device (or `instance`).
        device: String,
        /// The Vulkan function.
        call: &'static str,
        /// Its result code.
        result: vk::Result,
    },
    /// No memory type fits a request.
    #[error("{device} has no memory type for {what}")]
    NoMemoryType {
        /// The device.
        device: String,
        /// What the memory was for.
        what: &'static str,
    },
}

impl VulkanError {
    /// Whether the machine simply has no Vulkan (loader or driver missing),
    /// as opposed to a device that failed.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, VulkanError::NoLoader(_) | VulkanError::NoDevice)
    }

    pub(crate) fn call(device: &str, call: &'static str, result: vk::Result) -> VulkanError {
        VulkanError::Call { device: device.to_string(), call, result }
    }
}

impl From<VulkanError> for DeviceError {
    fn from(e: VulkanError) -> DeviceError {
        match e {
            VulkanError::Unknown { name, available } => DeviceError::Unknown { name, available },
            VulkanError::BadName { name } => {
                DeviceError::BadSpec { spec: name, reason: "expected vulkan or vulkan:N".into() }
            }
            VulkanError::Call { ref device, result: vk::Result::ERROR_OUT_OF_DEVICE_MEMORY, .. }
            | VulkanError::Call { ref device, result: vk::Result::ERROR_OUT_OF_HOST_MEMORY, .. } => {
                DeviceError::backend(device.clone(), "out of memory", e)
            }
            other => DeviceError::backend("vulkan", "Vulkan failed", other),
        }
    }
}
