//! The conformance suite on Vulkan (Mesa's lavapipe in CI): every contract
//! rule on one logical device (all streams on it, so waits between them are
//! native semaphore waits), on two logical devices of the same physical
//! device (copies through imported memory, or through the host), and with
//! staging memory forced; the op cases on one device.
//!
//! Each case ends with the validation layer's verdict when
//! `BATON_VK_VALIDATION=1` (scripts/test.sh sets it): any error fails it.
//! On a machine without a Vulkan driver the cases print a notice and pass,
//! unless `CI` or `BATON_REQUIRE_VULKAN=1` is set: then they fail.

use std::sync::Arc;

use baton_core::backend::{Device, IntoDevice};
use baton_testkit::env::vulkan_required;
use baton_vulkan::OpenOptions;

fn open(names: &[&str], options: &OpenOptions) -> Option<Vec<Arc<dyn Device>>> {
    match baton_vulkan::open_with(names, options) {
        Ok(devices) => Some(devices.into_iter().map(IntoDevice::into_device).collect()),
        Err(e) if e.is_unavailable() && !vulkan_required() => {
            eprintln!("skipped: {e} (set BATON_REQUIRE_VULKAN=1 to make this a failure)");
            None
        }
        Err(e) => panic!("opening Vulkan devices {names:?}: {e}"),
    }
}

/// One logical device, given to the suite twice.
fn one_device() -> Option<Vec<Arc<dyn Device>>> {
    let device = open(&["vulkan:0"], &OpenOptions::default())?.remove(0);
    Some(vec![device.clone(), device])
}

/// Two logical devices of one physical device, sharing memory through fds.
fn two_devices() -> Option<Vec<Arc<dyn Device>>> {
    open(&["vulkan:0", "vulkan:0"], &OpenOptions::default())
}

/// Two logical devices whose copies go through the host.
fn two_devices_host_bounce() -> Option<Vec<Arc<dyn Device>>> {
    open(&["vulkan:0", "vulkan:0"], &OpenOptions::default().with_external_memory(false))
}

/// One logical device that never maps its memory (a discrete GPU's paths).
fn one_device_staging() -> Option<Vec<Arc<dyn Device>>> {
    let device = open(&["vulkan:0"], &OpenOptions::default().with_staging(true))?.remove(0);
    Some(vec![device.clone(), device])
}

#[test]
fn the_driver_is_there_where_it_is_required() {
    if vulkan_required() {
        let devices = baton_vulkan::open(&["vulkan:0"]).expect("a Vulkan driver (CI installs Mesa's lavapipe)");
        assert_eq!(devices[0].info().name, "vulkan:0");
        drop(devices);
        baton_vulkan::validation::assert_clean();
    }
}

mod contract_one_device {
    baton_conformance::contract_tests!(super::one_device, after: baton_vulkan::validation::assert_clean);
}

mod contract_staging {
    baton_conformance::contract_tests!(super::one_device_staging, after: baton_vulkan::validation::assert_clean);
}

// Two logical devices cannot wait natively on each other's semaphores: the
// driver exports no semaphore fds, so `Stream::wait` refuses a point of the
// other device (W-FOREIGN) and the core's relay bridges it
// (`Stream::wait_or_relay`, which copies, the hazard tracking and the
// scheduler use). W-ORDER and M-ORDER call `Stream::wait` on such a point:
// `baton_conformance::expected_failures` lists them for such a pair (the
// test below checks that it does), so they must fail here.
mod contract_two_devices {
    baton_conformance::contract_tests!(super::two_devices, after: baton_vulkan::validation::assert_clean);
}

mod contract_two_devices_host_bounce {
    baton_conformance::contract_tests!(super::two_devices_host_bounce, after: baton_vulkan::validation::assert_clean);
}

#[test]
fn two_logical_devices_may_fail_w_order_and_m_order_and_one_device_fails_none() {
    let rules = |devices: Vec<Arc<dyn Device>>| -> Vec<&'static str> {
        let expected = baton_conformance::expected_failures(&devices).expect("probing streams");
        expected.iter().map(|e| e.rule).collect()
    };
    let Some(two) = two_devices() else { return };
    assert_eq!(rules(two), ["w_order", "m_order"]);
    let Some(one) = one_device() else { return };
    assert_eq!(rules(one), Vec::<&str>::new());
    baton_vulkan::validation::assert_clean();
}

mod ops {
    baton_conformance::op_tests!(super::one_device, after: baton_vulkan::validation::assert_clean);
}
