//! A counter that threads can wait on, spinning first and sleeping only when
//! the wait is long, and whose updates make no system call unless someone
//! sleeps (an "eventcount").
//!
//! The pool uses two per device: the job generation, which workers wait to
//! change, and the count of workers still busy, which the caller waits to
//! reach zero. Between the ops of one graph both waits are short, so the
//! common case is a few polls of a cache line and no futex at all.
//!
//! # Protocol
//!
//! A sleeper registers in `sleepers` (a read-modify-write), then re-reads
//! the word (a read-modify-write too) under `lock` before each sleep; an
//! updater changes the word (read-modify-write) and then reads `sleepers`
//! (read-modify-write). All four are `SeqCst` read-modify-writes, so in
//! their single total order either the updater's read sees the sleeper,
//! and it takes `lock` (which the sleeper holds from its re-read until it
//! sleeps) before notifying, or the sleeper's re-read comes after the update
//! and it does not sleep. Plain `SeqCst` loads would do in the C++ model;
//! the read-modify-writes make the argument hold in loom's model as well,
//! and they are only on the slow path.

use baton_core::loom::{AtomicU64, Condvar, Mutex, Ordering};

/// A waitable u64 counter (see the module doc).
#[derive(Debug)]
pub struct Bell {
    word: AtomicU64,
    sleepers: AtomicU64,
    lock: Mutex<()>,
    wake: Condvar,
}

impl Default for Bell {
    fn default() -> Self {
        Bell::new(0)
    }
}

impl Bell {
    /// A bell whose word starts at `value`.
    pub fn new(value: u64) -> Bell {
        Bell { word: AtomicU64::new(value), sleepers: AtomicU64::new(0), lock: Mutex::new(()), wake: Condvar::new() }
    }

    /// Sets the word without waking anyone: for a value no waiter waits for
    /// (the pool resets its busy count before it publishes a job).
    pub fn set_quietly(&self, value: u64) {
        self.word.store(value, Ordering::Release);
    }

    /// Adds `delta` (wrapping; pass `u64::MAX` to subtract one), wakes the
    /// sleepers if there are any, and returns the previous value.
    pub fn add(&self, delta: u64) -> u64 {
        let previous = self.word.fetch_add(delta, Ordering::SeqCst);
        if self.sleepers.fetch_add(0, Ordering::SeqCst) > 0 {
            // Taking the lock orders this notify after a registered sleeper's
            // re-read: it is then inside `wait`, and the notify reaches it.
            drop(self.lock.lock());
            self.wake.notify_all();
        }
        previous
    }

    /// Waits until `ready(word)` holds and returns that word: `spins` polls
    /// first (with a yield every 64, so that an oversubscribed machine
    /// still runs the thread being waited for), then sleeps.
    pub fn wait_until(&self, spins: u32, ready: impl Fn(u64) -> bool) -> u64 {
        for poll in 0..spins {
            let word = self.word.load(Ordering::Acquire);
            if ready(word) {
                return word;
            }
            if poll % 64 == 63 {
                baton_core::loom::yield_now();
            } else {
                baton_core::loom::spin_loop();
            }
        }
        let mut guard = self.lock.lock();
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        let word = loop {
            let word = self.word.fetch_add(0, Ordering::SeqCst);
            if ready(word) {
                break word;
            }
            guard = self.wake.wait(guard);
        };
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        word
    }
}

#[cfg(all(test, loom))]
mod loom_tests;

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_sleeping_waiter_is_woken_by_an_add() {
        let bell = Arc::new(Bell::new(0));
        let waiter = {
            let bell = bell.clone();
            std::thread::spawn(move || bell.wait_until(0, |w| w >= 3))
        };
        for _ in 0..3 {
            std::thread::sleep(std::time::Duration::from_millis(5));
            bell.add(1);
        }
        assert_eq!(waiter.join().unwrap(), 3);
    }

    #[test]
    fn subtracting_wraps_back_to_zero() {
        let bell = Bell::new(2);
        assert_eq!(bell.add(u64::MAX), 2);
        assert_eq!(bell.add(u64::MAX), 1);
        assert_eq!(bell.wait_until(1, |w| w == 0), 0);
    }
}
