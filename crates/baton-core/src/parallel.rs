//! The fork-join interface kernels use to spread work over a device's threads.

/// A set of worker threads that runs one closure on each of them at once.
///
/// Kernels are written against this trait so that they do not depend on how a
/// backend manages its threads (a CPU device pins its own pool; a test may use
/// scoped threads).
pub trait Parallel: Sync {
    /// Number of threads `run` calls the closure on.
    fn threads(&self) -> usize;

    /// Calls `task(i)` once for every `i` in `0..self.threads()`, concurrently,
    /// and returns when every call has returned.
    fn run(&self, task: &(dyn Fn(usize) + Sync));
}

/// Runs everything on the calling thread: `threads() == 1`.
#[derive(Clone, Copy, Debug, Default)]
pub struct SingleThread;

impl Parallel for SingleThread {
    fn threads(&self) -> usize {
        1
    }

    fn run(&self, task: &(dyn Fn(usize) + Sync)) {
        task(0)
    }
}

/// Spawns `n` scoped threads per call; simple and slow to start, for tests and
/// benchmarks that have no device pool.
#[derive(Clone, Copy, Debug)]
pub struct ScopedThreads(pub usize);

impl Parallel for ScopedThreads {
    fn threads(&self) -> usize {
        self.0.max(1)
    }

    fn run(&self, task: &(dyn Fn(usize) + Sync)) {
        let n = self.threads();
        std::thread::scope(|s| {
            for i in 1..n {
                s.spawn(move || task(i));
            }
            task(0);
        });
    }
}

/// The sub-range of `0..len` that worker `index` of `threads` should take,
/// in chunks that are multiples of `align` (the last one takes the rest).
pub fn split_range(len: usize, threads: usize, index: usize, align: usize) -> std::ops::Range<usize> {
    let align = align.max(1);
    let units = len.div_ceil(align);
    let threads = threads.max(1);
    let per = units / threads;
    let extra = units % threads;
    let start_unit = index * per + index.min(extra);
    let end_unit = start_unit + per + usize::from(index < extra);
    (start_unit * align).min(len)..(end_unit * align).min(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_range_covers_everything_once() {
        for len in [0, 1, 7, 64, 100] {
            for threads in 1..5 {
                for align in [1, 4, 32] {
                    let mut next = 0;
                    for i in 0..threads {
                        let r = split_range(len, threads, i, align);
                        assert_eq!(r.start, next, "len {len} threads {threads} align {align}");
                        next = r.end;
                    }
                    assert_eq!(next, len);
                }
            }
        }
    }
}
