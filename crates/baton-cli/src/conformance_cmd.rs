//! `baton conformance`: the conformance suite against this machine's
//! devices, with a pass/fail table per rule.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use anyhow::{bail, Result};
use baton_conformance::{Fixture, CONTRACT_RULES, OP_CASES};
use clap::Args;

/// Arguments of `baton conformance`.
#[derive(Args)]
pub struct ConformanceArgs {
    /// Two devices to test (the suite moves data between them); one device
    /// (`vulkan:0`) is tested as both.
    #[arg(long, default_value = "cpu:0,cpu:1")]
    devices: String,
    /// Only rules or cases whose name contains this.
    #[arg(long)]
    filter: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `baton conformance`.
pub fn run(args: ConformanceArgs) -> Result<()> {
    let mut devices = crate::devices::open(&args.devices, None)?;
    if devices.len() == 1 {
        // One device plays both parts: its streams wait on each other.
        devices.push(devices[0].clone());
    }
    // Failures are reported in the table, not as panic messages.
    std::panic::set_hook(Box::new(|_| {}));
    let mut rows = Vec::new();
    for (kind, list) in [("contract", CONTRACT_RULES), ("op", OP_CASES)] {
        for (name, case) in list.iter().filter(|(n, _)| args.filter.as_deref().is_none_or(|f| n.contains(f))) {
            let fixture = Fixture::new(devices.clone());
            let start = Instant::now();
            let outcome = catch_unwind(AssertUnwindSafe(|| case(&fixture)));
            let message = outcome.err().map(|p| {
                p.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default()
            });
            rows.push((kind, *name, message, start.elapsed().as_secs_f64() * 1e3));
        }
    }
    let _ = std::panic::take_hook();
    let failed = rows.iter().filter(|r| r.2.is_some()).count();
    if args.json {
        let items: Vec<String> = rows
            .iter()
            .map(|(kind, name, msg, ms)| {
                let m = msg.as_deref().unwrap_or("").replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
                format!(
                    "{{\"kind\":\"{kind}\",\"name\":\"{name}\",\"passed\":{},\"ms\":{ms:.1},\"message\":\"{m}\"}}",
                    msg.is_none()
                )
            })
            .collect();
        println!("[{}]", items.join(","));
    } else {
        println!("conformance on {}:", args.devices);
        for (kind, name, msg, ms) in &rows {
            let verdict = if msg.is_none() { "pass" } else { "FAIL" };
            println!("  {verdict}  {kind:<8} {name:<30} {ms:>8.1} ms");
            if let Some(m) = msg {
                println!("        {}", m.lines().next().unwrap_or(""));
            }
        }
        println!("{} passed, {} failed", rows.len() - failed, failed);
    }
    if failed > 0 {
        bail!("{failed} conformance checks failed");
    }
    Ok(())
}
