//! `baton devices`: the devices of this machine and what they offer.

use anyhow::Result;
use baton_core::backend::DeviceKind;
use clap::Args;

use crate::cli::devices::open;
use crate::util::json::json_str;

/// Arguments of `baton devices`.
#[derive(Args)]
pub struct DevicesArgs {
    /// Devices to describe (default: `cpu`, the per-core split `cpu:0,...`,
    /// and every Vulkan device).
    #[arg(long)]
    devices: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `baton devices`.
pub fn run(args: DevicesArgs) -> Result<()> {
    let listed = args.devices.is_some();
    let lists: Vec<String> = match args.devices {
        Some(list) => vec![list],
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
    if args.json {
        let items: Vec<String> = rows
            .iter()
            .map(|i| {
                format!(
                    "{{\"name\":{},\"backend\":{},\"kind\":\"{}\",\"description\":{},\"threads\":{},\"cores\":{:?},\"memory_bytes\":{},\"features\":[{}],\"weight_types\":[{}],\"waits_on_host_points\":{}}}",
                    json_str(&i.name),
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
            })
            .collect();
        println!("[{}]", items.join(","));
        return Ok(());
    }
    let features_width = rows.iter().map(|i| i.features.join(",").len()).max().unwrap_or(0).max(10);
    println!(
        "{:<8} {:<7} {:>7} {:<12} {:>10} {:<features_width$} {:<34} description",
        "device", "backend", "threads", "cores", "memory", "features", "weight types"
    );
    for i in rows {
        let cores = if i.cores.is_empty() { "any".to_string() } else { format!("{:?}", i.cores) };
        let types: Vec<&str> = i.weight_types.iter().map(|t| t.name()).collect();
        println!(
            "{:<8} {:<7} {:>7} {:<12} {:>7.1} GiB {:<features_width$} {:<34} {}",
            i.name,
            i.backend,
            i.threads,
            cores,
            i.memory_bytes as f64 / (1u64 << 30) as f64,
            i.features.join(","),
            types.join(","),
            i.description
        );
    }
    println!("\nStreams of every device wait natively on host-memory points (CPU streams and host timelines).");
    println!("Vulkan streams wait natively on points of their own device; other devices' points go through the relay.");
    if let Some(note) = vulkan_note {
        println!("{note}");
    }
    Ok(())
}
