//! loom models of the CPU stream queue: FIFO numbering, no lost wake-up of
//! a parked worker, and closing drains what is queued.
//!
//! Built only under `--cfg loom` in tests: `scripts/loom.sh` runs them.

use std::time::Duration;

use baton_core::loom::model;

use super::WorkQueue;
use loom::sync::Arc;
use loom::thread;

/// Two producers and a worker that parks at once: every item arrives, each
/// producer's items in order, numbered 1, 2, 3 without gaps.
#[test]
fn a_parked_worker_gets_every_item_in_order() {
    model(|| {
        let q = Arc::new(WorkQueue::<u32>::new());
        let (q1, q2) = (q.clone(), q.clone());
        let a = thread::spawn(move || {
            q1.push(10).expect("open");
            q1.push(11).expect("open");
        });
        let b = thread::spawn(move || {
            q2.push(20).expect("open");
        });
        let mut taken = 0;
        let mut got = Vec::new();
        while got.len() < 3 {
            got.push(q.pop(&mut taken, Duration::ZERO).expect("an item"));
        }
        a.join().expect("a");
        b.join().expect("b");
        let values: Vec<u64> = got.iter().map(|(v, _)| *v).collect();
        assert_eq!(values, vec![1, 2, 3], "numbered in order");
        let a_items: Vec<u32> = got.iter().map(|(_, i)| *i).filter(|i| *i < 20).collect();
        assert_eq!(a_items, vec![10, 11], "one producer's items stay in order");
        assert_eq!(taken, 3);
    });
}

/// Closing wakes a parked worker; what was queued before is still popped.
#[test]
fn closing_drains_then_ends() {
    model(|| {
        let q = Arc::new(WorkQueue::<u32>::new());
        let producer = q.clone();
        let t = thread::spawn(move || {
            producer.push(1).expect("open");
            producer.close();
            assert!(producer.push(2).is_err(), "closed");
        });
        let mut taken = 0;
        assert_eq!(q.pop(&mut taken, Duration::ZERO).map(|(_, i)| i), Some(1));
        assert_eq!(q.pop(&mut taken, Duration::ZERO), None);
        t.join().expect("producer");
    });
}

/// A worker that polls before parking misses nothing either.
#[test]
fn a_polling_worker_gets_the_item() {
    model(|| {
        let q = Arc::new(WorkQueue::<u32>::new());
        let producer = q.clone();
        let t = thread::spawn(move || producer.push(7).expect("open"));
        let mut taken = 0;
        assert_eq!(q.pop(&mut taken, Duration::from_micros(1)).map(|(_, i)| i), Some(7));
        t.join().expect("producer");
    });
}
