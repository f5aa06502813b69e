//! The devices a list names, opened in the list's order.

use std::sync::Arc;

use baton_core::backend::Device;

use super::kind::OpenOptions;
use super::name::DeviceName;
use crate::LoadError;

/// Opens the devices of a comma-separated list (`cpu`, `cpu:0,cpu:1`,
/// `vulkan:0`, `vulkan:0,vulkan:0`, or a mix), in the list's order: each
/// kind of the registry opens its names in one call (a kind's devices may
/// depend on each other: `cpu:0,cpu:1` split the cores). `threads` sets the
/// threads of a `cpu` device (`-t`); `None` is the backend's default. A
/// name on a rank (`cpu@1`) is refused: ranks open their own devices under
/// `mpirun` (`baton-cli`'s ranks).
pub fn open_devices(list: &str, threads: Option<usize>) -> Result<Vec<Arc<dyn Device>>, LoadError> {
    let names = list.split(',').map(str::trim).filter(|s| !s.is_empty());
    let names = names.map(DeviceName::parse).collect::<Result<Vec<DeviceName<'_>>, LoadError>>()?;
    if names.is_empty() {
        return Err(LoadError::NoDevices);
    }
    let failed = |names: &[&str], message: String| LoadError::Open { names: names.join(","), message };
    if let Some((local, rank)) = names.iter().find_map(|n| n.rank.map(|rank| (n.local, rank))) {
        let message =
            format!("a device on rank {rank} (`@{rank}`) opens on that rank, under `mpirun` with a build that has the `mpi` feature");
        return Err(failed(&[local], message));
    }
    let options = OpenOptions { threads };
    // Each kind's devices, in the list's order, taken one by one below.
    let mut opened = Vec::new();
    for kind in super::kinds::KINDS {
        let mine: Vec<&str> = names.iter().filter(|n| std::ptr::eq(n.kind, kind)).map(|n| n.local).collect();
        let devices =
            if mine.is_empty() { Vec::new() } else { kind.open(&mine, &options).map_err(|e| failed(&mine, e))? };
        opened.push((kind, devices.into_iter()));
    }
    let mut devices: Vec<Arc<dyn Device>> = Vec::with_capacity(names.len());
    for name in &names {
        let of_kind = opened.iter_mut().find(|(kind, _)| std::ptr::eq(*kind, name.kind)).and_then(|(_, d)| d.next());
        devices
            .push(of_kind.ok_or_else(|| failed(&[name.local], "the backend opened fewer devices than named".into()))?);
    }
    Ok(devices)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(list: &str) -> String {
        open_devices(list, Some(1)).map(|d| d.len()).expect_err("the list is refused").to_string()
    }

    #[test]
    fn bad_lists_are_refused_with_their_name() {
        assert_eq!(error_of(" , "), "the device list is empty");
        assert!(error_of("cpu:0,gpu:1").contains("unknown device \"gpu:1\""), "{}", error_of("cpu:0,gpu:1"));
    }

    #[test]
    fn cpu_lists_open_in_order() {
        let devices = open_devices("cpu:0, cpu:1", Some(1)).expect("two cpu devices open");
        assert_eq!(devices.len(), 2);
    }
}
