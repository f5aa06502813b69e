//! Locks that never report poisoning, over the standard library's (`plain`)
//! or loom's (`loom`), as tokio's `loom/std/mutex.rs` does.
//!
//! Why ignoring poison is sound in Baton: see the facade's doc
//! ([`crate::loom`]).

/// Defines `Mutex`, `MutexGuard` and `Condvar` over the `$imp` module's
/// (`std::sync` or `loom::sync`); `$($const)?` makes `Mutex::new` a `const
/// fn` where the inner one is.
macro_rules! poison_free_locks {
    ($imp:path, $($const:tt)?) => {
        use std::time::Duration;

        use $imp as imp;

        /// A mutual-exclusion lock whose [`lock`](Mutex::lock) returns the
        /// guard even when a panicking holder poisoned it (see the module
        /// docs of [`crate::loom`] for why that is sound in Baton).
        #[derive(Debug, Default)]
        pub struct Mutex<T>(imp::Mutex<T>);

        /// The guard of a locked [`Mutex`].
        pub type MutexGuard<'a, T> = imp::MutexGuard<'a, T>;

        impl<T> Mutex<T> {
            /// A new, unlocked lock around `value`.
            pub $($const)? fn new(value: T) -> Self {
                Mutex(imp::Mutex::new(value))
            }

            /// Locks, blocking until the lock is free.
            pub fn lock(&self) -> MutexGuard<'_, T> {
                self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
            }

            /// The data, through an exclusive borrow (no locking needed).
            pub fn get_mut(&mut self) -> &mut T {
                self.0.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner)
            }

            /// The data, consuming the lock.
            pub fn into_inner(self) -> T {
                self.0.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner)
            }
        }

        /// A condition variable for [`Mutex`] guards, poison-free like it.
        #[derive(Debug, Default)]
        pub struct Condvar(imp::Condvar);

        impl Condvar {
            /// A new condition variable.
            pub fn new() -> Self {
                Condvar(imp::Condvar::new())
            }

            /// Releases `guard`, sleeps until notified (or spuriously), and
            /// locks again.
            pub fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
                self.0.wait(guard).unwrap_or_else(std::sync::PoisonError::into_inner)
            }

            /// As [`wait`](Condvar::wait), for at most `timeout`; the caller
            /// checks its condition and its clock again.
            pub fn wait_timeout<'a, T>(&self, guard: MutexGuard<'a, T>, timeout: Duration) -> MutexGuard<'a, T> {
                match self.0.wait_timeout(guard, timeout) {
                    Ok((guard, _)) => guard,
                    Err(poisoned) => poisoned.into_inner().0,
                }
            }

            /// Wakes one waiter.
            pub fn notify_one(&self) {
                self.0.notify_one();
            }

            /// Wakes every waiter.
            pub fn notify_all(&self) {
                self.0.notify_all();
            }
        }
    };
}

/// Over the standard library's locks.
pub mod plain {
    poison_free_locks!(std::sync, const);
}

/// Over loom's locks, for the models.
#[cfg(loom)]
pub mod loom {
    poison_free_locks!(::loom::sync,);
}
