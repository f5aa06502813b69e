//! Process exit waits for the stream workers.
//!
//! Dropping a stream does not block (`D-NOBLOCK`): its worker drains the
//! queue and exits on its own, and the last worker of a device destroys the
//! logical device on its way out. If the process exits meanwhile (a test
//! harness or `main` returning right after dropping its streams), the C
//! runtime's exit handlers tear the driver down (Mesa's stops its own
//! threads and frees its state) while a worker may still be inside a
//! Vulkan call: a crash at exit, after the program's work was done.
//!
//! So every worker is counted while it runs, and once the first logical
//! device exists an exit handler is registered that waits, for at most
//! [`EXIT_GRACE`], until no worker is left. Handlers run in the reverse
//! order of registration, so this one, registered after the driver was
//! loaded and had set up its own, runs before the driver's.

use std::cell::Cell;
use std::sync::{Condvar, Mutex, Once};
use std::time::{Duration, Instant};

/// How long process exit waits for workers still draining their queues.
/// Their items are bounded by wait deadlines, which may be longer; past
/// this the process exits anyway, as it would without the handler.
pub(crate) const EXIT_GRACE: Duration = Duration::from_secs(5);

/// A count of running workers that exit can wait on.
pub(crate) struct Workers {
    running: Mutex<usize>,
    idle: Condvar,
}

/// This process's Vulkan stream workers.
pub(crate) static WORKERS: Workers = Workers::new();
static REGISTER: Once = Once::new();

thread_local! {
    /// Whether this thread is a counted worker (exit called from one must
    /// not wait for itself).
    static IN_WORKER: Cell<bool> = const { Cell::new(false) };
}

/// Counts a worker thread while it lives; made before the thread is
/// spawned, dropped last on it (after the worker and its device handle).
pub(crate) struct WorkerCount<'a>(&'a Workers);

impl Workers {
    const fn new() -> Workers {
        Workers { running: Mutex::new(0), idle: Condvar::new() }
    }

    fn running(&self) -> std::sync::MutexGuard<'_, usize> {
        // The count is a plain integer, valid whatever panicked.
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a worker about to be spawned: called on the spawning thread,
    /// before the spawn, so that an exit right after it (before the new
    /// thread has run a line) still waits for it. The count moves into the
    /// worker thread, which calls [`WorkerCount::on_worker_thread`] first;
    /// if the spawn fails, dropping the count undoes it.
    pub(crate) fn count(&self) -> WorkerCount<'_> {
        *self.running() += 1;
        WorkerCount(self)
    }

    /// Waits until no worker other than the calling thread runs, at most
    /// `grace`; returns whether they all finished.
    pub(crate) fn wait(&self, grace: Duration) -> bool {
        let own = usize::from(IN_WORKER.with(Cell::get));
        let deadline = Instant::now() + grace;
        let mut running = self.running();
        while *running > own {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            running = self.idle.wait_timeout(running, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        true
    }
}

impl WorkerCount<'_> {
    /// Marks the calling thread as this count's worker (exit called on it
    /// does not wait for it).
    pub(crate) fn on_worker_thread(&self) {
        IN_WORKER.with(|w| w.set(true));
    }
}

impl Drop for WorkerCount<'_> {
    fn drop(&mut self) {
        IN_WORKER.with(|w| w.set(false));
        *self.0.running() -= 1;
        self.0.idle.notify_all();
    }
}

/// Registers the exit handler, once per process; called after a logical
/// device was created (the driver is loaded and initialised by then).
pub(crate) fn register_exit_wait() {
    REGISTER.call_once(|| {
        // SAFETY: `wait_at_exit` is an `extern "C"` function without
        // arguments that does not unwind (nothing in it panics: a poisoned
        // lock is taken over) and does not call `exit`.
        let status = unsafe { atexit(wait_at_exit) };
        if status != 0 {
            tracing::warn!("could not register the Vulkan exit handler; exit may race stream workers");
        }
    });
}

extern "C" fn wait_at_exit() {
    WORKERS.wait(EXIT_GRACE);
}

extern "C" {
    /// The C runtime's `atexit` (ISO C): runs `f` at `exit`, handlers in the
    /// reverse order of registration.
    fn atexit(f: extern "C" fn()) -> std::ffi::c_int;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_waits_for_running_workers_but_not_for_itself() {
        static LOCAL: Workers = Workers::new();
        assert!(LOCAL.wait(Duration::ZERO), "no worker yet");
        let (tx, rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let count = LOCAL.count();
        assert!(!LOCAL.wait(Duration::ZERO), "counted before its thread runs");
        let worker = std::thread::spawn(move || {
            count.on_worker_thread();
            let _count = count;
            // Exit called on a worker does not wait for that worker.
            tx.send(LOCAL.wait(Duration::ZERO)).unwrap();
            go_rx.recv().unwrap();
            std::thread::sleep(Duration::from_millis(50));
        });
        assert!(rx.recv().unwrap(), "a worker does not wait for itself");
        assert!(!LOCAL.wait(Duration::from_millis(10)), "a running worker is waited for");
        go_tx.send(()).unwrap();
        assert!(LOCAL.wait(Duration::from_secs(30)), "the worker ended within the grace");
        worker.join().unwrap();
        assert!(!IN_WORKER.with(Cell::get));
    }
}
