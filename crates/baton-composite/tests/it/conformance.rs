//! The conformance suite on composite devices: two composites, each over
//! `cpu:0,cpu:1` (`CompositeDevice::conformance_pair`, as `baton
//! conformance -sm tensor` builds them). Every contract rule under each
//! wait policy, every op case, and the rules under the chaos wrapper.

use baton_composite::CompositeDevice;
use baton_core::sync::WaitPolicy;
use baton_testkit::devices::{cpus, Devices};

fn composites_with(policy: WaitPolicy) -> Devices {
    CompositeDevice::conformance_pair(cpus(&["cpu:0", "cpu:1"], policy), policy).expect("composites")
}

baton_testkit::conformance_under_every_policy!(composites_with, chaos_seeds: 4);
