//! The devices a `--devices` list names (`cpu`, `cpu:0,cpu:1`, `vulkan:0`,
//! or a mix), opened in the list's order (`baton_load::open_devices`).

use std::sync::Arc;

use anyhow::Result;
use baton_core::backend::Device;

/// Opens the devices of a comma-separated list, in the list's order.
/// `threads` sets the threads of a `cpu` device (`-t`).
pub fn open(list: &str, threads: Option<usize>) -> Result<Vec<Arc<dyn Device>>> {
    Ok(baton_load::open_devices(list, threads)?)
}
