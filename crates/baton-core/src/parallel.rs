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

/// Chunks per thread that [`Chunks`] aims at: enough that a thread held up
/// (a busy core, a preempted vCPU) leaves its share to the others, few
/// enough that taking a chunk costs nothing next to computing it.
const CHUNKS_PER_THREAD: usize = 4;

/// `0..len` in chunks, handed out to whichever thread asks next: each
/// chunk goes to exactly one caller of [`next`](Self::next). Work split
/// this way finishes when the threads together are done, instead of when
/// the slowest thread's fixed share is ([`split_range`]).
#[derive(Debug)]
pub struct Chunks {
    next: std::sync::atomic::AtomicUsize,
    len: usize,
    chunk: usize,
}

impl Chunks {
    /// `0..len` in chunks that are multiples of `align` (the last one takes
    /// the rest), about [`CHUNKS_PER_THREAD`] per thread of `threads`.
    pub fn new(len: usize, threads: usize, align: usize) -> Chunks {
        let align = align.max(1);
        let units = len.div_ceil(align);
        let chunk = align * units.div_ceil(threads.max(1) * CHUNKS_PER_THREAD).max(1);
        Chunks { next: std::sync::atomic::AtomicUsize::new(0), len, chunk }
    }

    /// The next chunk nobody has taken, or `None` when all are taken.
    pub fn next(&self) -> Option<std::ops::Range<usize>> {
        // Relaxed: the counter only hands out disjoint indices; what the
        // chunks' work writes is ordered by the fork-join around it.
        let start = self.next.fetch_add(self.chunk, std::sync::atomic::Ordering::Relaxed);
        (start < self.len).then(|| start..(start + self.chunk).min(self.len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_everything_once_whoever_takes_them() {
        for len in [0, 1, 7, 64, 100, 1000] {
            for threads in 1..5 {
                for align in [1, 8, 32] {
                    let chunks = Chunks::new(len, threads, align);
                    let taken = std::sync::Mutex::new(Vec::new());
                    ScopedThreads(threads).run(&|_| {
                        while let Some(r) = chunks.next() {
                            assert!(r.start.is_multiple_of(align) && r.start < r.end, "{r:?}");
                            taken.lock().unwrap().push(r);
                        }
                    });
                    let mut taken = taken.into_inner().unwrap();
                    taken.sort_by_key(|r| r.start);
                    let mut next = 0;
                    for r in &taken {
                        assert_eq!(r.start, next, "len {len} threads {threads} align {align}");
                        next = r.end;
                    }
                    assert_eq!(next, len);
                    assert!(taken.len() <= threads * CHUNKS_PER_THREAD, "{} chunks", taken.len());
                }
            }
        }
    }

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
