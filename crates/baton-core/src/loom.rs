//! The one facade through which the sync core reaches atomics, locks and
//! threads. Under `--cfg loom` every item comes from the `loom` model checker,
//! so the same code that runs in production is explored exhaustively by the
//! models in `tests/loom_*.rs` (tokio's `src/loom` and crossbeam's `primitive`
//! module follow the same pattern).

#[cfg(loom)]
pub(crate) use loom::sync::{
    atomic::{AtomicU64, AtomicUsize, Ordering},
    Arc, Condvar, Mutex, MutexGuard,
};

#[cfg(not(loom))]
pub(crate) use std::sync::{
    atomic::{AtomicU64, AtomicUsize, Ordering},
    Arc, Condvar, Mutex, MutexGuard,
};

/// `std::hint::spin_loop`, or a loom yield so that models of spinning waiters
/// terminate.
#[inline]
pub(crate) fn spin_loop() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}

/// Gives the core to another runnable thread.
#[inline]
pub(crate) fn yield_now() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::thread::yield_now();
}

/// Locks `mutex`, recovering the data if a panicking thread poisoned it: the
/// state the sync core keeps behind locks is valid after every statement, so a
/// panic elsewhere never leaves it half-updated.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}
