//! `baton devices`: the devices of this machine and what they offer.

use anyhow::Result;
use clap::Args;

use crate::cli::device_table::{features_width, lines, local_rows, print};

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

/// Runs `baton devices`: under `mpirun` with the `mpi` feature, every
/// rank's devices, printed by rank 0.
pub fn run(args: DevicesArgs) -> Result<()> {
    #[cfg(feature = "mpi")]
    if crate::cli::ranks::launched_by_mpirun() {
        return crate::cli::ranks::devices(args.devices.as_deref(), args.json);
    }
    let (rows, absent_note) = local_rows(args.devices.as_deref())?;
    let width = features_width(&rows);
    let lines = lines(&rows, args.json, "", width);
    print(&lines, args.json, absent_note.as_deref(), width);
    Ok(())
}
