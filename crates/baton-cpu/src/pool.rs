//! A persistent fork-join pool pinned to a device's cores.
//!
//! The thread that calls [`ThreadPool::run`] takes part as worker 0, so a
//! device of `n` cores has `n - 1` pool threads and a one-core device has
//! none. Jobs are serialised (one `run` at a time per device).
//!
//! Dispatch is two [`Bell`]s: workers wait for the job generation to change,
//! the caller waits for the busy count to reach zero. Both spin before they
//! sleep and neither update makes a system call unless someone sleeps, so
//! the back-to-back ops of a graph cost a few cache-line transfers each, not
//! a futex wake (the reference CPU engines get the same with a spinning
//! barrier between ops).

use baton_core::loom::Mutex;
use std::any::Any;
use std::cell::UnsafeCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use baton_core::Parallel;

use crate::bell::Bell;

/// Polls of a bell before a waiting thread sleeps (about 100 µs to 1 ms:
/// longer than the gap between two ops, shorter than a human notices).
const SPIN_POLLS: u32 = 20_000;

/// A job as the workers see it: a lifetime-erased pointer to the closure.
#[derive(Clone, Copy)]
struct JobPtr(*const (dyn Fn(usize) + Sync + 'static));

struct Shared {
    /// The current job. Written by `run` only while no worker is busy (the
    /// busy count is zero) and before the generation it belongs to is
    /// published; read by workers only after they see that generation.
    job: UnsafeCell<Option<JobPtr>>,
    shutdown: AtomicBool,
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    /// Bumped once per job (and once at shutdown).
    generation: Bell,
    /// Workers that have not finished the current job.
    busy: Bell,
}

// SAFETY: `job` is the only field that is not `Sync`. It is written only by
// `run`, which holds the pool's run lock and has seen the busy count at
// zero (every worker is done reading it), before publishing the next
// generation with a release; workers read it only after acquiring that
// generation and before they decrement the busy count. The pointee is
// `Sync` and outlives every read (see `run`).
unsafe impl Sync for Shared {}
// SAFETY: as above; the pointer is only dereferenced under that protocol.
unsafe impl Send for Shared {}

/// The worker threads of one CPU device.
pub struct ThreadPool {
    shared: Arc<Shared>,
    threads: usize,
    run_lock: Mutex<()>,
    handles: Vec<JoinHandle<()>>,
}

impl ThreadPool {
    /// A pool of `threads` workers in all (the caller is one of them), the
    /// others pinned to `cores[1..]` when given.
    pub fn new(name: &str, threads: usize, cores: &[usize]) -> std::io::Result<ThreadPool> {
        let threads = threads.max(1);
        let shared = Arc::new(Shared {
            job: UnsafeCell::new(None),
            shutdown: AtomicBool::new(false),
            panic: Mutex::new(None),
            generation: Bell::new(0),
            busy: Bell::new(0),
        });
        let mut handles = Vec::new();
        for index in 1..threads {
            let shared = shared.clone();
            let core = cores.get(index).copied();
            let handle = std::thread::Builder::new().name(format!("{name}-worker-{index}")).spawn(move || {
                if let Some(core) = core {
                    crate::topology::pin_current_thread(core);
                }
                worker_loop(&shared, index);
            })?;
            handles.push(handle);
        }
        Ok(ThreadPool { shared, threads, run_lock: Mutex::new(()), handles })
    }
}

fn worker_loop(shared: &Shared, index: usize) {
    let mut seen = 0u64;
    loop {
        seen = shared.generation.wait_until(SPIN_POLLS, |g| g != seen);
        if shared.shutdown.load(Ordering::Acquire) {
            return;
        }
        // SAFETY: generation `seen` was published after the job was written
        // (acquired by `wait_until`), and `run` does not touch the cell again
        // until this worker has decremented the busy count below.
        let job = unsafe { *shared.job.get() };
        if let Some(JobPtr(ptr)) = job {
            // SAFETY: `run` keeps the closure alive until the busy count is
            // zero, which happens only after this call returns.
            let task = unsafe { &*ptr };
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| task(index))) {
                *shared.panic.lock() = Some(payload);
            }
        }
        shared.busy.add(u64::MAX);
    }
}

impl Parallel for ThreadPool {
    fn threads(&self) -> usize {
        self.threads
    }

    fn run(&self, task: &(dyn Fn(usize) + Sync)) {
        if self.threads == 1 {
            task(0);
            return;
        }
        let _one_job = self.run_lock.lock();
        // SAFETY: only the lifetime is erased. This function does not return
        // before the busy count is zero, i.e. before every worker is done
        // with the pointer (a worker decrements it after its last use).
        let ptr: *const (dyn Fn(usize) + Sync + 'static) = unsafe { std::mem::transmute(task) };
        // SAFETY: the run lock is held and the previous `run` returned only
        // after the busy count reached zero, so no worker reads the cell now
        // (they read it only after the generation bump below).
        unsafe { *self.shared.job.get() = Some(JobPtr(ptr)) };
        self.shared.busy.set_quietly(self.threads as u64 - 1);
        self.shared.generation.add(1);
        let own = catch_unwind(AssertUnwindSafe(|| task(0)));
        self.shared.busy.wait_until(SPIN_POLLS, |busy| busy == 0);
        let worker_panic = self.shared.panic.lock().take();
        if let Err(payload) = own {
            std::panic::resume_unwind(payload);
        }
        if let Some(payload) = worker_panic {
            std::panic::resume_unwind(payload);
        }
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        let _one_job = self.run_lock.lock();
        self.shared.shutdown.store(true, Ordering::Release);
        self.shared.generation.add(1);
        for handle in self.handles.drain(..) {
            // A worker only exits through the shutdown flag; joining is quick.
            if handle.join().is_err() {
                tracing::warn!("a CPU pool worker ended by panic");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn every_worker_runs_each_job_once() {
        let pool = ThreadPool::new("test", 3, &[]).unwrap();
        for _ in 0..200 {
            let hits: Vec<AtomicUsize> = (0..3).map(|_| AtomicUsize::new(0)).collect();
            pool.run(&|i| {
                hits[i].fetch_add(1, Ordering::Relaxed);
            });
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
        }
    }

    #[test]
    fn a_panicking_task_reaches_the_caller_and_the_pool_survives() {
        let pool = ThreadPool::new("test", 2, &[]).unwrap();
        let r = catch_unwind(AssertUnwindSafe(|| pool.run(&|i| assert_ne!(i, 1, "worker 1 fails"))));
        assert!(r.is_err());
        let count = AtomicUsize::new(0);
        pool.run(&|_| {
            count.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(count.load(Ordering::Relaxed), 2);
    }
}
