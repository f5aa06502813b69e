//! The in-order queue of a stream: submitting threads push, the stream's
//! worker pops. Items are numbered 1, 2, … (their timeline values) under the
//! same lock that appends them, so numbers follow queue order.

use baton_core::loom::{Condvar, Mutex, MutexGuard};
use std::collections::VecDeque;

struct State<T> {
    items: VecDeque<(u64, T)>,
    next_value: u64,
    closed: bool,
}

/// A multi-producer, single-consumer FIFO of numbered items.
pub(crate) struct WorkQueue<T> {
    state: Mutex<State<T>>,
    wake: Condvar,
}

/// The queue was closed: nothing more is accepted.
#[derive(Debug)]
pub(crate) struct Closed;

impl<T> WorkQueue<T> {
    pub(crate) fn new() -> Self {
        WorkQueue {
            state: Mutex::new(State { items: VecDeque::new(), next_value: 1, closed: false }),
            wake: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock()
    }

    /// Appends `item` and returns its number; never waits for the worker.
    pub(crate) fn push(&self, item: T) -> Result<u64, Closed> {
        let mut state = self.lock();
        if state.closed {
            return Err(Closed);
        }
        let value = state.next_value;
        state.next_value += 1;
        state.items.push_back((value, item));
        drop(state);
        self.wake.notify_one();
        Ok(value)
    }

    /// Accepts nothing more; the worker drains what is queued, then `pop`
    /// returns `None`.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.wake.notify_one();
    }

    /// The next item, blocking while the queue is empty and open.
    pub(crate) fn pop(&self) -> Option<(u64, T)> {
        let mut state = self.lock();
        loop {
            if let Some(item) = state.items.pop_front() {
                return Some(item);
            }
            if state.closed {
                return None;
            }
            state = self.wake.wait(state);
        }
    }
}
