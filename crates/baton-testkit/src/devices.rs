//! CPU devices for tests, and the conformance suite run under every wait
//! policy ([`conformance_under_every_policy!`](crate::conformance_under_every_policy)).

use std::sync::Arc;
use std::time::Duration;

use baton_core::backend::{Device, IntoDevice};
use baton_core::sync::WaitPolicy;

/// The CPU devices `names` (`cpu:0`, `cpu:1`...) with every core they may
/// have, whose waiters wait by `policy`.
///
/// # Panics
///
/// When the devices do not open.
pub fn cpus(names: &[&str], policy: WaitPolicy) -> Vec<Arc<dyn Device>> {
    baton_cpu::open_with(names, &baton_cpu::OpenOptions::default().with_policy(policy))
        .unwrap_or_else(|e| panic!("opening {names:?}: {e}"))
        .into_iter()
        .map(IntoDevice::into_device)
        .collect()
}

/// Devices as the conformance suite takes them.
pub type Devices = Vec<Arc<dyn Device>>;

/// The first wait policy the conformance suite runs under: block at once.
pub const BLOCK: WaitPolicy = WaitPolicy::Block;

/// The second: spin for 50 µs, then block.
pub const SPIN: WaitPolicy = WaitPolicy::SpinThenBlock { spin: Duration::from_micros(50) };

/// The third: poll, with a bound of 30 s.
pub const POLL: WaitPolicy = WaitPolicy::Poll { bound: Duration::from_secs(30) };

/// The conformance suite on the devices `$devices_with(policy)` returns:
/// every contract rule under each wait policy ([`BLOCK`], [`SPIN`], [`POLL`]: modules
/// `contract_block`, `contract_spin`, `contract_poll`), every op case once
/// (`ops`, blocking), and every rule under the chaos wrapper (`contract_chaos`:
/// each queued item delayed by a seeded random amount, `$seeds` seeds per
/// rule; `BATON_CHAOS_SEEDS` for more). A policy changes how every waiter
/// waits, so each one meets every rule.
#[macro_export]
macro_rules! conformance_under_every_policy {
    ($devices_with:path, chaos_seeds: $seeds:expr) => {
        fn block() -> $crate::devices::Devices {
            $devices_with($crate::devices::BLOCK)
        }

        fn spin() -> $crate::devices::Devices {
            $devices_with($crate::devices::SPIN)
        }

        fn poll() -> $crate::devices::Devices {
            $devices_with($crate::devices::POLL)
        }

        mod contract_block {
            $crate::baton_conformance::contract_tests!(super::block);
        }

        mod contract_spin {
            $crate::baton_conformance::contract_tests!(super::spin);
        }

        mod contract_poll {
            $crate::baton_conformance::contract_tests!(super::poll);
        }

        mod ops {
            $crate::baton_conformance::op_tests!(super::block);
        }

        mod contract_chaos {
            $crate::baton_conformance::chaos_contract_tests!(super::block, $seeds);
        }
    };
}
