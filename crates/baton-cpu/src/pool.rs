//! A persistent fork-join pool pinned to a device's cores.
//!
//! The thread that calls [`ThreadPool::run`] takes part as worker 0, so a
//! device of `n` cores has `n - 1` pool threads and a one-core device has
//! none. Jobs are serialised (one `run` at a time per device). Workers spin
//! briefly on a generation counter before parking, so back-to-back ops of a
//! graph do not pay a futex wake each.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use baton_core::Parallel;

/// Polls of the generation counter before a worker parks.
const SPIN_POLLS: u32 = 20_000;

/// A job as the workers see it: a lifetime-erased pointer to the closure.
#[derive(Clone, Copy)]
struct JobPtr(*const (dyn Fn(usize) + Sync + 'static));

// SAFETY: the pointee is `Sync`, and `run` keeps it alive until every worker
// has finished with it (see `ThreadPool::run`), so sharing the pointer with
// the workers is sound.
unsafe impl Send for JobPtr {}

struct JobState {
    job: Option<JobPtr>,
    shutdown: bool,
    panic: Option<Box<dyn Any + Send>>,
}

struct Shared {
    state: Mutex<JobState>,
    wake: Condvar,
    generation: AtomicU64,
    pending: AtomicUsize,
    done: Mutex<()>,
    done_wake: Condvar,
}

/// The worker threads of one CPU device.
pub struct ThreadPool {
    shared: Arc<Shared>,
    threads: usize,
    run_lock: Mutex<()>,
    handles: Vec<JoinHandle<()>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ThreadPool {
    /// A pool of `threads` workers in all (the caller is one of them), the
    /// others pinned to `cores[1..]` when given.
    pub fn new(name: &str, threads: usize, cores: &[usize]) -> std::io::Result<ThreadPool> {
        let threads = threads.max(1);
        let shared = Arc::new(Shared {
            state: Mutex::new(JobState { job: None, shutdown: false, panic: None }),
            wake: Condvar::new(),
            generation: AtomicU64::new(0),
            pending: AtomicUsize::new(0),
            done: Mutex::new(()),
            done_wake: Condvar::new(),
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

/// One poll's pause: a spin hint, and every 64th poll a yield, so that a
/// spinning thread gives its core to the thread it waits for when the
/// machine is oversubscribed (more runnable threads than cores).
fn relax(polls: u32) {
    if polls % 64 == 63 {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

fn worker_loop(shared: &Shared, index: usize) {
    let mut seen = 0u64;
    loop {
        let mut polls = 0;
        while shared.generation.load(Ordering::Acquire) == seen && polls < SPIN_POLLS {
            relax(polls);
            polls += 1;
        }
        let job = {
            let mut state = lock(&shared.state);
            while shared.generation.load(Ordering::Acquire) == seen && !state.shutdown {
                state = shared.wake.wait(state).unwrap_or_else(|p| p.into_inner());
            }
            if state.shutdown {
                return;
            }
            seen = shared.generation.load(Ordering::Acquire);
            state.job
        };
        if let Some(JobPtr(ptr)) = job {
            // SAFETY: `run` published this pointer for generation `seen` and
            // does not return (so the closure stays alive) until `pending`
            // reaches zero, which happens only after this call returns.
            let task = unsafe { &*ptr };
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| task(index))) {
                lock(&shared.state).panic = Some(payload);
            }
        }
        if shared.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            drop(lock(&shared.done));
            shared.done_wake.notify_all();
        }
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
        let _one_job = lock(&self.run_lock);
        // SAFETY: only the lifetime is erased. This function does not return
        // before `pending` is zero, i.e. before every worker is done with the
        // pointer (a worker decrements `pending` after its last use of it).
        let ptr: *const (dyn Fn(usize) + Sync + 'static) = unsafe { std::mem::transmute(task) };
        self.shared.pending.store(self.threads - 1, Ordering::Release);
        {
            let mut state = lock(&self.shared.state);
            state.job = Some(JobPtr(ptr));
            self.shared.generation.fetch_add(1, Ordering::AcqRel);
        }
        self.shared.wake.notify_all();
        let own = catch_unwind(AssertUnwindSafe(|| task(0)));
        let mut polls = 0;
        while self.shared.pending.load(Ordering::Acquire) != 0 && polls < SPIN_POLLS {
            relax(polls);
            polls += 1;
        }
        {
            let mut done = lock(&self.shared.done);
            while self.shared.pending.load(Ordering::Acquire) != 0 {
                done = self.shared.done_wake.wait(done).unwrap_or_else(|p| p.into_inner());
            }
        }
        let worker_panic = {
            let mut state = lock(&self.shared.state);
            state.job = None;
            state.panic.take()
        };
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
        lock(&self.shared.state).shutdown = true;
        self.shared.wake.notify_all();
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
