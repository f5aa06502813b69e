//! The conformance suite on two CPU devices (`cpu:0,cpu:1`): the op cases
//! once, and every contract rule under each wait policy (block, spin, poll),
//! since a policy changes how every waiter waits, and under the chaos
//! wrapper (8 seeds per rule in CI; `BATON_CHAOS_SEEDS` for more).

use baton_core::sync::WaitPolicy;
use baton_testkit::devices::{cpus, Devices};

fn two_cpu_devices_with(policy: WaitPolicy) -> Devices {
    cpus(&["cpu:0", "cpu:1"], policy)
}

baton_testkit::conformance_under_every_policy!(two_cpu_devices_with, chaos_seeds: 8);
