//! Whether the process's Vulkan objects are gone: the count of live
//! instances (each one outlives every object made from it), and the wait
//! for it to reach zero.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Instances alive now (each one outlives every object made from it).
pub(crate) static LIVE: AtomicUsize = AtomicUsize::new(0);

/// How many instances are alive: 0 once every Vulkan object is gone.
pub(crate) fn live_instances() -> usize {
    LIVE.load(Ordering::SeqCst)
}

/// Blocks until every Vulkan device of the process is torn down (its
/// streams drained their queues and the last handles are gone), for at most
/// `timeout`; returns whether they are. Call it before the process exits
/// once the devices are dropped: a device torn down on a stream's thread
/// while the process exits can crash the driver's own teardown.
pub fn wait_for_teardown(timeout: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if live_instances() == 0 {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}
