//! `baton conformance`: the conformance suite against this machine's
//! devices, with a verdict per rule: pass, FAIL, an expected failure (with
//! the reason the suite gives, `baton_conformance::expected_failures`) or
//! an expected failure that unexpectedly passed.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use baton_composite::CompositeDevice;
use baton_conformance::{judge, ExpectedFailure, Fixture, CONTRACT_RULES, OP_CASES};
use baton_core::backend::Device;
use clap::{Args, ValueEnum};

use crate::cli::choices::{gate_policy, GatePolicy};
use crate::cmd::conformance_report::{print, Row};

/// Arguments of `baton conformance`.
#[derive(Args)]
pub struct ConformanceArgs {
    /// Two devices to test (the suite moves data between them); one device
    /// (`vulkan:0`) is tested as both.
    #[arg(long, default_value = "cpu:0,cpu:1")]
    devices: String,
    /// Which backend runs the suite (`-sm`, as for `baton run`).
    #[arg(long = "split-mode", visible_alias = "sm", value_enum, default_value_t = SuiteSplitMode::Layer)]
    split_mode: SuiteSplitMode,
    /// With `--split-mode tensor`: how the composites' gates wait (default
    /// as for `baton run`).
    #[arg(long = "gate-policy", value_enum)]
    gate_policy: Option<GatePolicy>,
    /// Only rules or cases whose name contains this.
    #[arg(long)]
    filter: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// The backends `baton conformance --split-mode` tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SuiteSplitMode {
    /// The devices themselves.
    Layer,
    /// Two composite devices over all of `--devices` (the backend of
    /// `--split-mode tensor`).
    Tensor,
}

/// The devices the suite runs on, and their name for the header.
fn devices_under_test(args: &ConformanceArgs) -> Result<(Vec<Arc<dyn Device>>, String)> {
    let mut devices = crate::cli::devices::open(&args.devices, None)?;
    match args.split_mode {
        SuiteSplitMode::Layer => {
            if devices.len() == 1 {
                // One device plays both parts: its streams wait on each other.
                devices.push(devices[0].clone());
            }
            Ok((devices, args.devices.clone()))
        }
        SuiteSplitMode::Tensor => {
            let policy = gate_policy(args.gate_policy);
            let pair = CompositeDevice::conformance_pair(devices, policy).context("building the composite devices")?;
            let name = format!("two composite devices {}", pair[0].info().name);
            Ok((pair, name))
        }
    }
}

/// Runs `baton conformance`.
pub fn run(args: ConformanceArgs) -> Result<()> {
    #[cfg(feature = "mpi")]
    if crate::cli::ranks::launched_by_mpirun() && args.devices.contains('@') {
        if args.split_mode != SuiteSplitMode::Layer {
            bail!("across ranks, the suite runs the devices themselves (--split-mode layer)");
        }
        let failed = super::conformance_ranks::run(&args.devices, args.filter.as_deref(), args.json)?;
        if failed > 0 {
            bail!("{failed} conformance checks failed");
        }
        return Ok(());
    }
    let (devices, name) = devices_under_test(&args)?;
    let expected = baton_conformance::expected_failures(&devices).context("probing the devices' streams")?;
    // Failures are reported in the table, not as panic messages.
    std::panic::set_hook(Box::new(|_| {}));
    let mut rows = Vec::new();
    for (kind, list) in [("contract", CONTRACT_RULES), ("op", OP_CASES)] {
        for (case_name, case) in list.iter().filter(|(n, _)| args.filter.as_deref().is_none_or(|f| n.contains(f))) {
            let fixture = Fixture::new(devices.clone());
            let start = Instant::now();
            let expectation: Option<&ExpectedFailure> = expected.iter().find(|e| e.rule == *case_name);
            let outcome = judge(expectation, &|| case(&fixture));
            rows.push(Row { kind, name: case_name, outcome, ms: start.elapsed().as_secs_f64() * 1e3 });
        }
    }
    let _ = std::panic::take_hook();
    let failed = print(&rows, args.json, &name);
    if failed > 0 {
        bail!("{failed} conformance checks failed");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::parse_alone;

    #[test]
    fn the_suite_runs_on_layer_or_tensor_only() {
        assert_eq!(
            parse_alone::<ConformanceArgs>(&[]).map(|a| a.split_mode).ok(),
            Some(SuiteSplitMode::Layer),
            "the default"
        );
        for (name, mode) in [("layer", SuiteSplitMode::Layer), ("tensor", SuiteSplitMode::Tensor)] {
            let args = parse_alone::<ConformanceArgs>(&["--split-mode", name])
                .unwrap_or_else(|e| panic!("--split-mode {name}: {e}"));
            assert_eq!(args.split_mode, mode, "--split-mode {name}");
        }
        for bad in ["none", "row"] {
            let error = parse_alone::<ConformanceArgs>(&["--split-mode", bad])
                .err()
                .unwrap_or_else(|| panic!("--split-mode {bad} parsed"));
            assert_eq!(error.kind(), clap::error::ErrorKind::InvalidValue, "--split-mode {bad}");
            assert!(error.to_string().contains("[possible values: layer, tensor]"), "{error}");
        }
    }
}
