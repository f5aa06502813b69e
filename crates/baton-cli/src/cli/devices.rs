//! The devices a `--devices` list names (`cpu`, `cpu:0,cpu:1`, `vulkan:0`,
//! or a mix), opened in the list's order.

use std::sync::Arc;

use anyhow::{bail, Context, Result};
use baton_core::backend::{Device, IntoDevice};

/// Opens the devices of a comma-separated list (`cpu`, `cpu:0,cpu:1`,
/// `vulkan:0`, `vulkan:0,vulkan:0`, or a mix), in the list's order.
/// `threads` sets the threads of a `cpu` device (`-t`).
pub fn open(list: &str, threads: Option<usize>) -> Result<Vec<Arc<dyn Device>>> {
    let names: Vec<&str> = list.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    if names.is_empty() {
        bail!("--devices is empty");
    }
    let is_cpu = |n: &str| n == "cpu" || n.starts_with("cpu:");
    let is_vulkan = |n: &str| n == "vulkan" || n.starts_with("vulkan:");
    if let Some(bad) = names.iter().find(|n| !is_cpu(n) && !is_vulkan(n)) {
        bail!("unknown device {bad:?}: devices are `cpu`, `cpu:0,cpu:1,...` and `vulkan:N` (see `baton devices`)");
    }
    let cpu_names: Vec<&str> = names.iter().copied().filter(|n| is_cpu(n)).collect();
    let vulkan_names: Vec<&str> = names.iter().copied().filter(|n| is_vulkan(n)).collect();
    let mut cpus = if cpu_names.is_empty() {
        Vec::new()
    } else {
        let mut options = baton_cpu::OpenOptions::default();
        options.threads = threads;
        baton_cpu::open_with(&cpu_names, &options).with_context(|| format!("opening {}", cpu_names.join(",")))?
    }
    .into_iter();
    let mut gpus = if vulkan_names.is_empty() {
        Vec::new()
    } else {
        baton_vulkan::open(&vulkan_names).with_context(|| format!("opening {}", vulkan_names.join(",")))?
    }
    .into_iter();
    let mut devices: Vec<Arc<dyn Device>> = Vec::with_capacity(names.len());
    for name in names {
        let next: Option<Arc<dyn Device>> = if is_cpu(name) {
            cpus.next().map(IntoDevice::into_device)
        } else {
            gpus.next().map(IntoDevice::into_device)
        };
        devices.push(next.with_context(|| format!("opening {name}"))?);
    }
    Ok(devices)
}
