//! `cpu`: one device with every usable core, or `cpu:0,cpu:1,...`, the
//! cores split evenly (crates/baton-cpu).

use std::sync::Arc;
use std::time::Duration;

use baton_core::backend::{into_devices, Device, DeviceInfo};

use super::kind::{Kind, OpenOptions};

/// The CPU kind.
pub(super) static CPU: Kind = Kind {
    prefix: "cpu",
    title: "CPU",
    forms: "`cpu` for every core, `cpu:0,cpu:1,...` for the cores split evenly",
    open,
    enumerate,
    weight_types: || baton_cpu::WEIGHT_TYPES.to_vec(),
    notes,
    teardown,
};

fn open(names: &[&str], options: &OpenOptions) -> Result<Vec<Arc<dyn Device>>, String> {
    let mut cpu = baton_cpu::OpenOptions::default();
    cpu.threads = options.threads;
    baton_cpu::open_with(names, &cpu).map(into_devices).map_err(|e| e.to_string())
}

/// `cpu`, then the per-core split `cpu:0,...` (one device per usable core).
fn enumerate() -> Result<Vec<DeviceInfo>, String> {
    let cores = baton_cpu::topology::usable_cores().len();
    let split: Vec<String> = (0..cores).map(|i| format!("cpu:{i}")).collect();
    let mut rows = Vec::new();
    for names in [vec!["cpu"], split.iter().map(String::as_str).collect()] {
        rows.extend(open(&names, &OpenOptions::default())?.iter().map(|d| d.info().clone()));
    }
    Ok(rows)
}

fn notes() -> Vec<String> {
    let mut notes = Vec::new();
    let packed: Vec<String> = baton_cpu::packed_weight_types().iter().map(|t| t.to_string()).collect();
    if !packed.is_empty() {
        notes.push(String::new());
        notes.push(format!(
            "CPU matmul weights of types {} are packed for the kernels (groups of 8 rows) on first use{}.",
            packed.join(","),
            if baton_cpu::repack_enabled() { "" } else { " (off here: BATON_REPACK=0)" }
        ));
    }
    notes.push(String::new());
    notes.push("Streams of every device wait natively on host-memory points (CPU streams and host timelines).".into());
    notes
}

/// CPU devices tear down on the thread that drops them: nothing to wait for.
fn teardown(_: Duration) -> bool {
    true
}
