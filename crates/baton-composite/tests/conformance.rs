//! The conformance suite on composite devices: two composites, each over
//! `cpu:0,cpu:1` (`CompositeDevice::conformance_pair`, as `baton
//! conformance -sm tensor` builds them). Every contract rule under each
//! wait policy, every op case, and the rules under the chaos wrapper.

use std::sync::Arc;
use std::time::Duration;

use baton_composite::CompositeDevice;
use baton_core::backend::{Device, IntoDevice};
use baton_core::sync::WaitPolicy;

fn composites_with(policy: WaitPolicy) -> Vec<Arc<dyn Device>> {
    let inner: Vec<Arc<dyn Device>> =
        baton_cpu::open_with(&["cpu:0", "cpu:1"], &baton_cpu::OpenOptions::default().with_policy(policy))
            .expect("two CPU devices")
            .into_iter()
            .map(IntoDevice::into_device)
            .collect();
    CompositeDevice::conformance_pair(inner, policy).expect("composites")
}

fn block() -> Vec<Arc<dyn Device>> {
    composites_with(WaitPolicy::Block)
}

fn spin() -> Vec<Arc<dyn Device>> {
    composites_with(WaitPolicy::SpinThenBlock { spin: Duration::from_micros(50) })
}

fn poll() -> Vec<Arc<dyn Device>> {
    composites_with(WaitPolicy::Poll { bound: Duration::from_secs(30) })
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

mod contract_chaos {
    baton_conformance::chaos_contract_tests!(super::block, 4);
}
