//! `baton devices`, and opening the devices a `--devices` list names.

use std::sync::Arc;

use anyhow::{bail, Context, Result};
use baton_core::backend::{Device, DeviceKind, IntoDevice};
use baton_core::sync::WaitPolicy;
use clap::Args;

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

/// How the gates of a composite device (`--split-mode tensor`) wait:
/// `--gate-policy` where given, else `BATON_WAIT_POLICY` or
/// `BATON_FAST_SYNC` where set, else spin (poll for 50 µs, then block).
pub fn gate_policy(name: Option<&str>) -> Result<WaitPolicy> {
    match name {
        Some(name) => WaitPolicy::from_name(name).with_context(|| format!("--gate-policy {name:?}")),
        None if std::env::var("BATON_FAST_SYNC").is_ok_and(|v| v == "1")
            || std::env::var("BATON_WAIT_POLICY").ok().and_then(|n| WaitPolicy::from_name(&n)).is_some() =>
        {
            Ok(WaitPolicy::process_default())
        }
        None => WaitPolicy::from_name("spin").context("the spin policy"),
    }
}

/// `s` as a JSON string.
pub fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
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
    println!(
        "{:<8} {:<7} {:>7} {:<12} {:>10} {:<10} {:<34} description",
        "device", "backend", "threads", "cores", "memory", "features", "weight types"
    );
    for i in rows {
        let cores = if i.cores.is_empty() { "any".to_string() } else { format!("{:?}", i.cores) };
        let types: Vec<&str> = i.weight_types.iter().map(|t| t.name()).collect();
        println!(
            "{:<8} {:<7} {:>7} {:<12} {:>7.1} GiB {:<10} {:<34} {}",
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
