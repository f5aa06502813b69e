//! The conformance suite on two CPU devices (`cpu:0,cpu:1`): the op cases
//! once, and every contract rule under each wait policy (block, spin, poll),
//! since a policy changes how every waiter waits.

use std::sync::Arc;
use std::time::Duration;

use baton_core::backend::{Device, IntoDevice};
use baton_core::sync::WaitPolicy;

fn two_cpu_devices_with(policy: WaitPolicy) -> Vec<Arc<dyn Device>> {
    baton_cpu::open_with(&["cpu:0", "cpu:1"], &baton_cpu::OpenOptions::default().with_policy(policy))
        .expect("two CPU devices")
        .into_iter()
        .map(IntoDevice::into_device)
        .collect()
}

fn block() -> Vec<Arc<dyn Device>> {
    two_cpu_devices_with(WaitPolicy::Block)
}

fn spin() -> Vec<Arc<dyn Device>> {
    two_cpu_devices_with(WaitPolicy::SpinThenBlock { spin: Duration::from_micros(50) })
}

fn poll() -> Vec<Arc<dyn Device>> {
    two_cpu_devices_with(WaitPolicy::Poll { bound: Duration::from_secs(30) })
}

mod contract_block {
    baton_conformance::contract_tests!(super::block);
}

mod contract_spin {
    baton_conformance::contract_tests!(super::spin);
}

mod contract_poll {
    baton_conformance::contract_tests!(super::poll);
}

mod ops {
    baton_conformance::op_tests!(super::block);
}

/// The contract under the chaos wrapper: every queued item delayed by a
/// seeded random amount (8 seeds per rule in CI; `BATON_CHAOS_SEEDS` for more).
mod contract_chaos {
    baton_conformance::chaos_contract_tests!(super::block, 8);
}
