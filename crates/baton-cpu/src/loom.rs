//! The facade through which the stream queue reaches its atomics and locks;
//! under `--cfg loom` they come from the loom model checker, so the queue's
//! protocol is model-checked as it runs (`tests/loom_queue.rs`).

#[cfg(loom)]
pub(crate) use loom::sync::{
    atomic::{AtomicU64, Ordering},
    Condvar, Mutex, MutexGuard,
};
#[cfg(not(loom))]
pub(crate) use std::sync::{
    atomic::{AtomicU64, Ordering},
    Condvar, Mutex, MutexGuard,
};

/// A spin hint, or a loom yield so that models of pollers terminate.
pub(crate) fn spin_loop() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}

/// Gives the core away.
pub(crate) fn yield_now() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::thread::yield_now();
}
