//! `vulkan`, `vulkan:N`: a Vulkan physical device (the same index twice
//! for two logical devices; crates/baton-vulkan).

use std::sync::Arc;

use baton_core::backend::{into_devices, Device};

use super::kind::{Kind, OpenOptions};

/// The Vulkan kind.
pub(super) static VULKAN: Kind = Kind {
    prefix: "vulkan",
    title: "Vulkan",
    forms: "`vulkan` or `vulkan:N` for physical device N (twice for two logical devices)",
    open,
    enumerate: || baton_vulkan::list().map_err(|e| e.to_string()),
    weight_types: || baton_vulkan::WEIGHT_TYPES.to_vec(),
    notes: || {
        vec!["Vulkan streams wait natively on points of their own device; other devices' points go through the relay."
            .into()]
    },
    // Vulkan devices may still be tearing down on their streams' threads;
    // exiting under them can crash the driver's own teardown.
    teardown: baton_vulkan::wait_for_teardown,
};

/// Opens with the backend's default options (threads do not apply).
fn open(names: &[&str], _: &OpenOptions) -> Result<Vec<Arc<dyn Device>>, String> {
    baton_vulkan::open(names).map(into_devices).map_err(|e| e.to_string())
}
