//! The Vulkan instance: the loader, the validation layer when asked for,
//! and the physical devices Baton can use.

use baton_core::loom::plain::Mutex;
use std::ffi::CStr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use ash::vk;

use crate::error::VulkanError;
use crate::teardown::LIVE;
use crate::validation;

const VALIDATION_LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";

/// A loaded Vulkan instance, shared by every device opened from it.
pub(crate) struct Instance {
    /// Keeps the loader library loaded while the instance lives.
    _entry: ash::Entry,
    pub(crate) raw: ash::Instance,
    messenger: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
}

/// A physical device and what Baton reads of it.
#[derive(Clone)]
pub(crate) struct Physical {
    pub(crate) handle: vk::PhysicalDevice,
    pub(crate) name: String,
    pub(crate) properties: vk::PhysicalDeviceProperties,
    pub(crate) memory: vk::PhysicalDeviceMemoryProperties,
}

/// The instance of the process while any device uses it.
static SHARED: Mutex<Weak<Instance>> = Mutex::new(Weak::new());

impl Instance {
    /// The process's instance, created on first use (and again after every
    /// device of the previous one is gone).
    pub(crate) fn shared() -> Result<Arc<Instance>, VulkanError> {
        let mut shared = SHARED.lock();
        if let Some(instance) = shared.upgrade() {
            return Ok(instance);
        }
        let instance = Arc::new(Instance::new()?);
        *shared = Arc::downgrade(&instance);
        Ok(instance)
    }

    fn new() -> Result<Instance, VulkanError> {
        // SAFETY: loading the system's Vulkan loader runs its initialisers;
        // it is the library this function exists to load.
        let entry = unsafe { ash::Entry::load() }.map_err(|e| VulkanError::NoLoader(std::sync::Arc::new(e)))?;
        let app = vk::ApplicationInfo::default()
            .application_name(c"baton")
            .engine_name(c"baton")
            .api_version(vk::API_VERSION_1_3);
        let validate = validation::enabled();
        let mut layers = Vec::new();
        let mut extensions = Vec::new();
        if validate {
            // SAFETY: a plain query of the loader.
            let available = unsafe { entry.enumerate_instance_layer_properties() }
                .map_err(|r| VulkanError::call("instance", "vkEnumerateInstanceLayerProperties", r))?;
            let found = available.iter().any(|l| l.layer_name_as_c_str().is_ok_and(|n| n == VALIDATION_LAYER));
            if !found {
                return Err(VulkanError::Unsuitable {
                    device: "instance".into(),
                    missing: "VK_LAYER_KHRONOS_validation (BATON_VK_VALIDATION=1; install vulkan-validationlayers)"
                        .into(),
                });
            }
            layers.push(VALIDATION_LAYER.as_ptr());
            extensions.push(ash::ext::debug_utils::NAME.as_ptr());
        }
        let enables = [vk::ValidationFeatureEnableEXT::SYNCHRONIZATION_VALIDATION];
        let mut features = vk::ValidationFeaturesEXT::default().enabled_validation_features(&enables);
        let mut creation_messenger = messenger_info();
        let mut info = vk::InstanceCreateInfo::default()
            .application_info(&app)
            .enabled_layer_names(&layers)
            .enabled_extension_names(&extensions);
        if validate {
            info = info.push_next(&mut features).push_next(&mut creation_messenger);
        }
        // SAFETY: every pointer in `info` refers to locals that outlive the
        // call; the layer and extension names are static C strings.
        let raw = unsafe { entry.create_instance(&info, None) }.map_err(|r| match r {
            vk::Result::ERROR_INCOMPATIBLE_DRIVER => VulkanError::NoDevice,
            r => VulkanError::call("instance", "vkCreateInstance", r),
        })?;
        let messenger = if validate {
            let utils = ash::ext::debug_utils::Instance::new(&entry, &raw);
            // SAFETY: the instance is alive and was created with debug utils;
            // the messenger is destroyed before it (Drop).
            match unsafe { utils.create_debug_utils_messenger(&messenger_info(), None) } {
                Ok(m) => Some((utils, m)),
                Err(r) => {
                    // SAFETY: nothing was created from the instance yet.
                    unsafe { raw.destroy_instance(None) };
                    return Err(VulkanError::call("instance", "vkCreateDebugUtilsMessengerEXT", r));
                }
            }
        } else {
            None
        };
        LIVE.fetch_add(1, Ordering::SeqCst);
        Ok(Instance { _entry: entry, raw, messenger })
    }

    /// Every physical device, in the loader's order (`vulkan:N` is index N).
    pub(crate) fn physical_devices(&self) -> Result<Vec<Physical>, VulkanError> {
        // SAFETY: the instance is alive.
        let handles = unsafe { self.raw.enumerate_physical_devices() }
            .map_err(|r| VulkanError::call("instance", "vkEnumeratePhysicalDevices", r))?;
        Ok(handles
            .into_iter()
            .enumerate()
            .map(|(index, handle)| {
                // SAFETY: `handle` was just enumerated from this instance.
                let (properties, memory) = unsafe {
                    (
                        self.raw.get_physical_device_properties(handle),
                        self.raw.get_physical_device_memory_properties(handle),
                    )
                };
                let name = properties
                    .device_name_as_c_str()
                    .map_or_else(|_| format!("Vulkan device {index}"), |n| n.to_string_lossy().into_owned());
                Physical { handle, name, properties, memory }
            })
            .collect())
    }
}

fn messenger_info() -> vk::DebugUtilsMessengerCreateInfoEXT<'static> {
    vk::DebugUtilsMessengerCreateInfoEXT::default()
        .message_severity(vk::DebugUtilsMessageSeverityFlagsEXT::ERROR | vk::DebugUtilsMessageSeverityFlagsEXT::WARNING)
        .message_type(
            vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
        )
        .pfn_user_callback(Some(validation::on_message))
}

impl Drop for Instance {
    fn drop(&mut self) {
        // SAFETY: every device created from this instance holds an Arc of it,
        // so they are all destroyed by now; the messenger goes first.
        unsafe {
            if let Some((utils, messenger)) = self.messenger.take() {
                utils.destroy_debug_utils_messenger(messenger, None);
            }
            self.raw.destroy_instance(None);
        }
        LIVE.fetch_sub(1, Ordering::SeqCst);
    }
}
