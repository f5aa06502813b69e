//! The Vulkan backend's tests, one test binary (`--test it`): the
//! conformance suite, errors, the llama path, and mixed devices. On a
//! machine without a Vulkan driver they print a notice and pass, unless
//! `CI` or `BATON_REQUIRE_VULKAN=1` is set.

mod batch;
mod conformance;
mod errors;
mod exit;
mod llama;
mod mixed;

use std::sync::Arc;

use baton_core::backend::{Device, IntoDevice};
use baton_testkit::env::vulkan_required;

/// `vulkan:0`, or `None` with a notice where no driver is installed and
/// none is required ([`vulkan_required`]); a failure to open it otherwise.
fn vulkan() -> Option<Arc<dyn Device>> {
    match baton_vulkan::open(&["vulkan:0"]) {
        Ok(mut d) => Some(d.remove(0).into_device()),
        Err(e) if e.is_unavailable() && !vulkan_required() => {
            eprintln!("skipped: {e} (set BATON_REQUIRE_VULKAN=1 to make this a failure)");
            None
        }
        Err(e) => panic!("opening vulkan:0: {e}"),
    }
}
