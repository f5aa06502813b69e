//! The table of devices `baton devices` prints, one line (or JSON object)
//! per device; under `mpirun` each rank formats its own lines (`cli::ranks`).
//! Which devices there are, and what is noted about each kind, is the
//! device registry's (`baton_load::registry`).

use anyhow::Result;
use baton_core::backend::{DeviceInfo, DeviceKind};
use baton_load::registry;

use crate::cli::devices::open;
use crate::util::json::json_str;

/// The devices of this machine that `list` names (default: what every kind
/// of the device registry enumerates: `cpu`, the per-core split, every
/// Vulkan device), with a note for each kind this machine has none of (no
/// Vulkan driver).
pub fn local_rows(list: Option<&str>) -> Result<(Vec<DeviceInfo>, Option<String>)> {
    if let Some(list) = list {
        return Ok((open(list, None)?.iter().map(|d| d.info().clone()).collect(), None));
    }
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for kind in registry::KINDS {
        match kind.enumerate() {
            Ok(infos) => rows.extend(infos),
            Err(e) => notes.push(format!("No {} devices: {e}", kind.title())),
        }
    }
    Ok((rows, (!notes.is_empty()).then(|| notes.join("\n"))))
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

/// Prints the lines as a table (or a JSON array) with each device kind's
/// notes and `absent_note` (the kinds this machine has none of), the
/// features column `features_width` wide.
pub fn print(lines: &[String], json: bool, absent_note: Option<&str>, features_width: usize) {
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
    for kind in registry::KINDS {
        for note in kind.notes() {
            println!("{note}");
        }
    }
    if let Some(note) = absent_note {
        println!("{note}");
    }
}
