//! Devices named with their rank: `cpu@0,cpu@1`, `cpu:0@0,cpu:1@0,cpu@1`.
//!
//! Under `mpirun`, every rank runs the same command with the same device
//! list; each opens only the devices named with its rank. A name without
//! `@RANK` is on rank 0 (the rank that reads the prompt and prints).

use crate::MpiError;

/// One device of a list and the rank that holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankedDevice {
    /// The device's name on its rank (`cpu`, `cpu:1`, `vulkan:0`).
    pub device: String,
    /// The rank that opens it.
    pub rank: usize,
}

impl std::fmt::Display for RankedDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.device, self.rank)
    }
}

/// Parses a comma-separated device list whose names may carry `@RANK`,
/// checking every rank against the job's `ranks`: a name with an empty
/// device, a rank that is not a number, or a rank the job does not have is
/// an error (the same on every rank, before anything is opened).
pub fn parse_ranked(list: &str, ranks: usize) -> Result<Vec<RankedDevice>, MpiError> {
    let bad = |name: &str, why: String| MpiError::BadDeviceList { name: name.to_string(), why };
    let mut devices = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let (device, rank) = match name.rsplit_once('@') {
            None => (name, 0),
            Some((device, rank)) => {
                let rank = rank.parse::<usize>().map_err(|_| bad(name, format!("{rank:?} is not a rank number")))?;
                (device, rank)
            }
        };
        if device.is_empty() {
            return Err(bad(name, "no device before `@`".into()));
        }
        if rank >= ranks {
            return Err(bad(name, format!("the job has {ranks} rank(s), 0 to {}", ranks.saturating_sub(1))));
        }
        devices.push(RankedDevice { device: device.to_string(), rank });
    }
    if devices.is_empty() {
        return Err(bad(list, "the list names no device".into()));
    }
    Ok(devices)
}

/// The names of the devices `rank` opens, in the list's order.
pub fn local_devices(devices: &[RankedDevice], rank: usize) -> Vec<&str> {
    devices.iter().filter(|d| d.rank == rank).map(|d| d.device.as_str()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranked(device: &str, rank: usize) -> RankedDevice {
        RankedDevice { device: device.into(), rank }
    }

    #[test]
    fn names_carry_their_rank_and_a_bare_name_is_on_rank_0() {
        let list = parse_ranked("cpu:0@0, cpu:1@0,cpu@1,vulkan:0", 2).unwrap();
        assert_eq!(list, vec![ranked("cpu:0", 0), ranked("cpu:1", 0), ranked("cpu", 1), ranked("vulkan:0", 0)]);
        assert_eq!(local_devices(&list, 0), vec!["cpu:0", "cpu:1", "vulkan:0"]);
        assert_eq!(local_devices(&list, 1), vec!["cpu"]);
        assert_eq!(list[2].to_string(), "cpu@1");
    }

    #[test]
    fn a_rank_the_job_does_not_have_or_a_malformed_name_is_an_error_naming_it() {
        for (list, names) in
            [("cpu@0,cpu@2", "cpu@2"), ("cpu@x", "cpu@x"), ("@1", "@1"), ("cpu@-1", "cpu@-1"), (" , ", " , ")]
        {
            match parse_ranked(list, 2) {
                Err(MpiError::BadDeviceList { name, .. }) => assert_eq!(name, names, "{list}"),
                other => panic!("{list}: expected an error naming {names}, got {other:?}"),
            }
        }
    }
}
