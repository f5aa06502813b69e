//! The conformance suite on two CPU devices (`cpu:0,cpu:1`).

use std::sync::Arc;

use baton_core::backend::Device;

fn two_cpu_devices() -> Vec<Arc<dyn Device>> {
    baton_cpu::open(&["cpu:0", "cpu:1"], None)
        .expect("two CPU devices")
        .into_iter()
        .map(|d| d as Arc<dyn Device>)
        .collect()
}

mod contract {
    baton_conformance::contract_tests!(super::two_cpu_devices);
}

mod ops {
    baton_conformance::op_tests!(super::two_cpu_devices);
}
