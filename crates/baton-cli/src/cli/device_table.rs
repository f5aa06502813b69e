//! The table of devices `baton devices` prints, one line (or JSON object)
//! per device; under `mpirun` each rank formats its own lines (`cli::ranks`).

use anyhow::Result;
use baton_core::backend::{DeviceInfo, DeviceKind};

use crate::cli::devices::open;
use crate::util::json::json_str;

/// The devices of this machine that `list` names (default: `cpu`, the
/// per-core split and every Vulkan device, with a note when there is no
/// Vulkan driver).
pub fn local_rows(list: Option<&str>) -> Result<(Vec<DeviceInfo>, Option<String>)> {
    let listed = list.is_some();
    let lists: Vec<String> = match list {
        Some(list) => vec![list.to_string()],
        None => {
            let cores = baton_cpu::topology::usable_cores().len();
            let split: Vec<String> = (0..cores).map(|i| format!("cpu:{i}")).collect();
            vec!["cpu".into(), split.join(",")]
        }
    };
    let mut rows = Vec::new();
    for list in &lists {
        for d in open(list, None)? {
            rows.push(d.info().clone());
        }
    }
    // Without a list: every Vulkan device too, when this machine has a driver.
    let mut vulkan_note = None;
    if !listed {
        match baton_vulkan::list() {
            Ok(infos) => rows.extend(infos),
            Err(e) => vulkan_note = Some(format!("No Vulkan devices: {e}")),
        }
    }
    Ok((rows, vulkan_note))
}

/// Width of the features column: the longest list, at least 10.
pub fn features_width(rows: &[DeviceInfo]) -> usize {
    rows.iter().map(|i| i.features.join(",").len()).max().unwrap_or(0).max(10)
}

/// One line per device (a JSON object with `--json`), each name followed
/// by `suffix` (`@1` for a rank's devices), features padded to `width`.
pub fn lines(rows: &[DeviceInfo], json: bool, suffix: &str, width: usize) -> Vec<String> {
    rows.iter()
        .map(|i| {
            let name = format!("{}{suffix}", i.name);
            if json {
                format!(
                    "{{\"name\":{},\"backend\":{},\"kind\":\"{}\",\"description\":{},\"threads\":{},\"cores\":{:?},\"memory_bytes\":{},\"features\":[{}],\"weight_types\":[{}],\"waits_on_host_points\":{}}}",
                    json_str(&name),
                    json_str(i.backend),
                    if i.kind == DeviceKind::Cpu { "cpu" } else { "gpu" },
                    json_str(&i.description),
                    i.threads,
                    i.cores,
                    i.memory_bytes,
                    i.features.iter().map(|f| json_str(f)).collect::<Vec<_>>().join(","),
                    i.weight_types.iter().map(|t| json_str(t.name())).collect::<Vec<_>>().join(","),
                    i.waits_on_host_points
                )
            } else {
                let cores = if i.cores.is_empty() { "any".to_string() } else { format!("{:?}", i.cores) };
                let types: Vec<&str> = i.weight_types.iter().map(|t| t.name()).collect();
                format!(
                    "{:<8} {:<7} {:>7} {:<12} {:>7.1} GiB {:<width$} {:<34} {}",
                    name,
                    i.backend,
                    i.threads,
                    cores,
                    i.memory_bytes as f64 / (1u64 << 30) as f64,
                    i.features.join(","),
                    types.join(","),
                    i.description
                )
            }
        })
        .collect()
}

/// Prints the lines as a table (or a JSON array) with the notes, the
/// features column `features_width` wide.
pub fn print(lines: &[String], json: bool, vulkan_note: Option<&str>, features_width: usize) {
    if json {
        println!("[{}]", lines.join(","));
        return;
    }
    println!(
        "{:<8} {:<7} {:>7} {:<12} {:>10} {:<features_width$} {:<34} description",
        "device", "backend", "threads", "cores", "memory", "features", "weight types"
    );
    for line in lines {
        println!("{line}");
    }
    let packed: Vec<String> = baton_cpu::packed_weight_types().iter().map(|t| t.to_string()).collect();
    if !packed.is_empty() {
        println!(
            "\nCPU matmul weights of types {} are packed for the kernels (groups of 8 rows) on first use{}.",
            packed.join(","),
            if baton_cpu::repack_enabled() { "" } else { " (off here: BATON_REPACK=0)" }
        );
    }
    println!("\nStreams of every device wait natively on host-memory points (CPU streams and host timelines).");
    println!("Vulkan streams wait natively on points of their own device; other devices' points go through the relay.");
    if let Some(note) = vulkan_note {
        println!("{note}");
    }
}
