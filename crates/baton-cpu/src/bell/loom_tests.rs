//! loom models of the pool's [`Bell`]: a waiter that goes to sleep at once
//! is never left asleep after the update it waits for, with one or two
//! waiters, and the words it returns are ones that were written.
//!
//! Built only under `--cfg loom` in tests: `scripts/loom.sh` runs them.

use baton_core::loom::model;

use super::Bell;
use loom::sync::Arc;
use loom::thread;

/// The pool's start signal: a worker sleeps (no spinning) until the
/// generation changes; the update must wake it.
#[test]
fn a_sleeping_waiter_sees_the_update() {
    model(|| {
        let bell = Arc::new(Bell::new(0));
        let waiter = {
            let bell = bell.clone();
            thread::spawn(move || bell.wait_until(0, |g| g != 0))
        };
        assert_eq!(bell.add(1), 0);
        assert_eq!(waiter.join().expect("waiter"), 1);
    });
}

/// The pool's done signal: two workers count down, the caller sleeps until
/// zero and is woken by whichever finishes last.
#[test]
fn a_count_down_wakes_the_caller_at_zero() {
    model(|| {
        let bell = Arc::new(Bell::new(2));
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let bell = bell.clone();
                thread::spawn(move || {
                    bell.add(u64::MAX);
                })
            })
            .collect();
        assert_eq!(bell.wait_until(0, |busy| busy == 0), 0);
        for w in workers {
            w.join().expect("worker");
        }
    });
}

/// A waiter that polls once before sleeping also gets the update.
#[test]
fn a_polling_then_sleeping_waiter_sees_the_update() {
    model(|| {
        let bell = Arc::new(Bell::new(5));
        let waiter = {
            let bell = bell.clone();
            thread::spawn(move || bell.wait_until(1, |g| g == 6))
        };
        bell.add(1);
        assert_eq!(waiter.join().expect("waiter"), 6);
    });
}
