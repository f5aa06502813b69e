//! The devices a list names, opened in the list's order.

use std::sync::Arc;

use baton_core::backend::{Device, IntoDevice};

use crate::LoadError;

/// Opens the devices of a comma-separated list (`cpu`, `cpu:0,cpu:1`,
/// `vulkan:0`, `vulkan:0,vulkan:0`, or a mix), in the list's order.
/// `threads` sets the threads of a `cpu` device (`-t`); `None` is the
/// backend's default.
pub fn open_devices(list: &str, threads: Option<usize>) -> Result<Vec<Arc<dyn Device>>, LoadError> {
    let names: Vec<&str> = list.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    if names.is_empty() {
        return Err(LoadError::NoDevices);
    }
    let is_cpu = |n: &str| n == "cpu" || n.starts_with("cpu:");
    let is_vulkan = |n: &str| n == "vulkan" || n.starts_with("vulkan:");
    if let Some(bad) = names.iter().find(|n| !is_cpu(n) && !is_vulkan(n)) {
        return Err(LoadError::UnknownDevice(bad.to_string()));
    }
    let failed = |names: &[&str], message: String| LoadError::Open { names: names.join(","), message };
    let cpu_names: Vec<&str> = names.iter().copied().filter(|n| is_cpu(n)).collect();
    let vulkan_names: Vec<&str> = names.iter().copied().filter(|n| is_vulkan(n)).collect();
    let mut cpus = if cpu_names.is_empty() {
        Vec::new()
    } else {
        let mut options = baton_cpu::OpenOptions::default();
        options.threads = threads;
        baton_cpu::open_with(&cpu_names, &options).map_err(|e| failed(&cpu_names, e.to_string()))?
    }
    .into_iter();
    let mut gpus = if vulkan_names.is_empty() {
        Vec::new()
    } else {
        baton_vulkan::open(&vulkan_names).map_err(|e| failed(&vulkan_names, e.to_string()))?
    }
    .into_iter();
    let mut devices: Vec<Arc<dyn Device>> = Vec::with_capacity(names.len());
    for name in names {
        let next: Option<Arc<dyn Device>> = if is_cpu(name) {
            cpus.next().map(IntoDevice::into_device)
        } else {
            gpus.next().map(IntoDevice::into_device)
        };
        devices.push(next.ok_or_else(|| failed(&[name], "the backend opened fewer devices than named".into()))?);
    }
    Ok(devices)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(list: &str) -> String {
        open_devices(list, Some(1)).map(|d| d.len()).expect_err("the list is refused").to_string()
    }

    #[test]
    fn bad_lists_are_refused_with_their_name() {
        assert_eq!(error_of(" , "), "the device list is empty");
        assert!(error_of("cpu:0,gpu:1").contains("unknown device \"gpu:1\""), "{}", error_of("cpu:0,gpu:1"));
    }

    #[test]
    fn cpu_lists_open_in_order() {
        let devices = open_devices("cpu:0, cpu:1", Some(1)).expect("two cpu devices open");
        assert_eq!(devices.len(), 2);
    }
}
