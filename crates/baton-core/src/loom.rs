//! The one facade through which Baton's concurrent code reaches atomics,
//! locks and threads. Under `--cfg loom` every item comes from the `loom`
//! model checker, so the same code that runs in production is explored
//! exhaustively by the loom models (`sync::loom_tests` here, `bell` and
//! `queue` in baton-cpu); tokio's `src/loom` and crossbeam's `primitive`
//! module follow the same pattern.
//!
//! The sync core and the CPU backend's queue and pool use it; every crate
//! above the core takes its [`Mutex`] and [`Condvar`] from here too, which
//! never report poisoning.
//!
//! # Poisoning
//!
//! A lock is poisoned when a thread panics while holding it. Baton ignores
//! that, on purpose. Its critical sections push, pop, take, insert, bump a
//! counter or assign a field, each step leaving the data a valid value of
//! its type, and its caches and scratch space are rebuilt or overwritten by
//! their next user; so a panic inside one leaves nothing a later holder
//! could misread. Two run a caller's closure under the lock (the composite's
//! `GateKept::with`, a host slot's bytes): a panic there can leave that
//! caller's own value half-updated, which is the caller's to avoid either
//! way. What a panic means is reported where it happens (a stream's
//! failure, a test's failure); refusing every later locker would only turn
//! it into more panics, in unrelated threads or in `Drop`, which the
//! contract forbids (E-NOPANIC).

mod lock;

#[cfg(loom)]
pub use loom::sync::{
    atomic::{AtomicU64, AtomicUsize, Ordering},
    Arc,
};

#[cfg(not(loom))]
pub use std::sync::{
    atomic::{AtomicU64, AtomicUsize, Ordering},
    Arc,
};

#[cfg(loom)]
pub use lock::loom::{Condvar, Mutex, MutexGuard};
#[cfg(not(loom))]
pub use lock::plain::{Condvar, Mutex, MutexGuard};

/// The standard library's poison-free locks even under `--cfg loom`, for
/// statics: loom's locks have no `const` constructor (and no model reaches
/// a static's lock).
pub mod plain {
    pub use super::lock::plain::{Condvar, Mutex, MutexGuard};
}

/// `std::hint::spin_loop`, or a loom yield so that models of spinning waiters
/// terminate.
#[inline]
pub fn spin_loop() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}

/// Gives the core to another runnable thread.
#[inline]
pub fn yield_now() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::thread::yield_now();
}

/// Explores every interleaving of `f` within a preemption bound of 3 (the
/// bound every Baton model uses: enough for the two- and three-thread
/// protocols they check, small enough to finish in seconds).
#[cfg(loom)]
#[doc(hidden)]
pub fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(f);
}
