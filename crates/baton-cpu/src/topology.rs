//! Which cores this process may use, how device lists split them, and
//! pinning threads to cores.

use baton_core::backend::DeviceError;

/// The cores this process may run on (its affinity mask), in order.
pub fn usable_cores() -> Vec<usize> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `set` is a plain bitmask that sched_getaffinity fills; it
        // is zero-initialised and its size is passed exactly.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
                let cores: Vec<usize> = (0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).collect();
                if !cores.is_empty() {
                    return cores;
                }
            }
        }
    }
    let n = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    (0..n).collect()
}

/// Pins the calling thread to `core`; failure (e.g. a container that forbids
/// it) is logged and ignored, since pinning only helps speed.
pub fn pin_current_thread(core: usize) {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: as in `usable_cores`; CPU_SET writes inside the set, and
        // `core` is below CPU_SETSIZE by the check.
        unsafe {
            if core < libc::CPU_SETSIZE as usize {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(core, &mut set);
                if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                    tracing::debug!(core, "could not pin a thread");
                }
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = core;
}

/// One CPU device of a device list: its index and cores.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuSlice {
    /// `None` for `cpu` (all cores), `Some(i)` for `cpu:i`.
    pub index: Option<usize>,
    /// Its cores.
    pub cores: Vec<usize>,
}

/// Parses the CPU entries of a device list: `cpu` is one device with all
/// cores; `cpu:0,cpu:1,...` split the cores evenly into that many devices
/// (indices must be `0..n`, each once). With more devices than cores, each
/// device still gets one core, shared.
pub fn split_cores(names: &[&str], cores: &[usize]) -> Result<Vec<CpuSlice>, DeviceError> {
    let spec = names.join(",");
    let bad = |reason: String| DeviceError::BadSpec { spec: spec.clone(), reason };
    if names == ["cpu"] {
        return Ok(vec![CpuSlice { index: None, cores: cores.to_vec() }]);
    }
    let mut indices = Vec::new();
    for name in names {
        let index = name
            .strip_prefix("cpu:")
            .and_then(|i| i.parse::<usize>().ok())
            .ok_or_else(|| bad(format!("{name:?} is not `cpu` or `cpu:N`")))?;
        indices.push(index);
    }
    let n = indices.len();
    let mut sorted = indices.clone();
    sorted.sort_unstable();
    if sorted != (0..n).collect::<Vec<_>>() {
        return Err(bad(format!("CPU devices must be cpu:0..cpu:{} once each", n - 1)));
    }
    if cores.is_empty() {
        return Err(bad("no usable cores".into()));
    }
    Ok(indices
        .into_iter()
        .map(|i| {
            let range = baton_core::parallel::split_range(cores.len().max(n), n, i, 1);
            let mine: Vec<usize> = range.map(|c| cores[c % cores.len()]).collect();
            CpuSlice { index: Some(i), cores: mine }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_is_all_cores_and_cpu_n_splits_evenly() {
        let cores = [0, 1, 2, 3];
        assert_eq!(split_cores(&["cpu"], &cores).unwrap()[0].cores, vec![0, 1, 2, 3]);
        let two = split_cores(&["cpu:0", "cpu:1"], &cores).unwrap();
        assert_eq!(two[0].cores, vec![0, 1]);
        assert_eq!(two[1].cores, vec![2, 3]);
        let three = split_cores(&["cpu:0", "cpu:1", "cpu:2"], &[0, 1]).unwrap();
        assert!(three.iter().all(|s| s.cores.len() == 1));
    }

    #[test]
    fn bad_cpu_lists_are_errors() {
        assert!(split_cores(&["cpu:1"], &[0, 1]).is_err());
        assert!(split_cores(&["cpu:0", "cpu:0"], &[0, 1]).is_err());
        assert!(split_cores(&["gpu"], &[0, 1]).is_err());
    }
}
