//! The in-order queue of a CPU stream: the submitting threads push, one
//! worker pops. Model-checked by `loom_tests` (`scripts/loom.sh`).
//!
//! # Protocol
//!
//! Items are pushed under the lock, and `pushed` counts them. The worker
//! first polls `pushed` (lock-free) for its idle spin time, then takes the
//! lock; if the queue is empty it sets `parked` and waits on the condvar,
//! which releases the lock atomically. A pusher holds the lock while it
//! pushes and reads `parked`, so it either sees the worker parked (and
//! notifies) or the worker sees the item before parking: no lost wake-up.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use baton_core::loom::{AtomicU64, Condvar, Mutex, MutexGuard, Ordering};

struct State<T> {
    items: VecDeque<(u64, T)>,
    next_value: u64,
    closing: bool,
    parked: bool,
}

/// A multi-producer, single-consumer FIFO that numbers its items 1, 2, …
pub struct WorkQueue<T> {
    state: Mutex<State<T>>,
    wake: Condvar,
    pushed: AtomicU64,
}

/// The queue was closed: nothing more is accepted.
#[derive(Debug, PartialEq, Eq)]
pub struct Closed;

impl<T> Default for WorkQueue<T> {
    fn default() -> Self {
        WorkQueue {
            state: Mutex::new(State { items: VecDeque::new(), next_value: 1, closing: false, parked: false }),
            wake: Condvar::new(),
            pushed: AtomicU64::new(0),
        }
    }
}

impl<T> WorkQueue<T> {
    /// An empty, open queue.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock()
    }

    /// Appends `item` and returns its number; never blocks on the worker.
    pub fn push(&self, item: T) -> Result<u64, Closed> {
        let mut state = self.lock();
        if state.closing {
            return Err(Closed);
        }
        let value = state.next_value;
        state.next_value += 1;
        state.items.push_back((value, item));
        self.pushed.fetch_add(1, Ordering::Release);
        if state.parked {
            self.wake.notify_one();
        }
        Ok(value)
    }

    /// Accepts nothing more; the worker drains what is queued, then `pop`
    /// returns `None`.
    pub fn close(&self) {
        let state = &mut *self.lock();
        state.closing = true;
        self.wake.notify_one();
    }

    /// The next item, in order: polls for up to `spin` while the queue is
    /// empty, then parks until an item comes; `None` once closed and empty.
    /// `taken` counts the items popped so far (the caller keeps it).
    pub fn pop(&self, taken: &mut u64, spin: Duration) -> Option<(u64, T)> {
        self.poll(*taken, spin);
        let mut state = self.lock();
        loop {
            if let Some(item) = state.items.pop_front() {
                *taken += 1;
                return Some(item);
            }
            if state.closing {
                return None;
            }
            state.parked = true;
            state = self.wake.wait(state);
            state.parked = false;
        }
    }

    fn poll(&self, taken: u64, spin: Duration) {
        if spin.is_zero() || self.pushed.load(Ordering::Acquire) != taken {
            return;
        }
        let until = Instant::now() + spin;
        let mut polls = 0u32;
        while self.pushed.load(Ordering::Acquire) == taken {
            baton_core::loom::spin_loop();
            polls = polls.wrapping_add(1);
            if polls.is_multiple_of(64) {
                if Instant::now() >= until {
                    return;
                }
                baton_core::loom::yield_now();
            }
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests;
