//! Matmul throughput (GFLOP/s = 2 m n k / time) at the shapes of a 135M
//! llama (hidden 576, FFN 1536, vocabulary 49152), for every weight type,
//! on 1 thread and on 2 threads (a persistent spinning pool, and
//! `ScopedThreads(2)` whose per-call spawn cost shows at m = 1). Then the
//! K-quants (Q2_K to Q6_K) against Q8_0 and Q4_1 at the shapes of stories110M (hidden 768,
//! FFN 2048: K-quant rows must be multiples of 256), with each type's
//! single-thread speed as a ratio to Q4_1's in the same run.
//!
//! Run with `cargo bench -p baton-kernels`; set `BATON_BENCH_QUICK=1` to skip
//! m = 512, `BATON_BENCH_KQUANT=1` to run the K-quant table only,
//! `BATON_BENCH_TYPES=q4_1,q5_0` to time only the listed types (the ratio
//! column needs q4_1 among them), `BATON_BENCH_ISAS=1` for the per-level
//! table only: single-thread GFLOP/s of every instruction-set level this CPU
//! has, side by side (m = 1 and 64), at the shapes of both models, each the
//! best of 3 alternating rounds (`BATON_BENCH_ISAS=simd` leaves out the
//! scalar level). That table counts the thread's CPU time where Linux gives
//! it (`/proc/thread-self/schedstat`), so time the thread spent waiting for
//! a core shared with other jobs does not count. With `BATON_BENCH_ISAS`,
//! `BATON_BENCH_SHAPES=640x2048,2048x640` (n x k) times those shapes instead,
//! for every type whose blocks divide each `k`. `BATON_BENCH_PACKED_K=1`
//! times the packed K-quants (`matmul_packed`) against the unpacked ones,
//! side by side, on 1 and 2 threads (the spinning pool), at the shapes of
//! stories110M and Gemma 3 270M's 2048-wide rows (640x2048);
//! `BATON_BENCH_PACKED_K=levels` times only the packed tiles, 1 thread, at
//! every SIMD level side by side (m = 1, 2, 4, 64): the fastest batch of
//! calls (about 0.2 ms each) over 5 alternating rounds, which leaves out
//! the batches other jobs on a shared machine slowed.
//! `BATON_BENCH_PACKED=1` times the packed 32-value formats against the
//! unpacked ones (`matmul/packed.rs`). `BATON_BENCH_DECODE=1` times the
//! single-row products at a mixture of experts' decode shapes against the
//! memory's read bandwidth (`matmul/decode.rs`).

use std::cell::UnsafeCell;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use baton_core::parallel::{ScopedThreads, SingleThread};
use baton_kernels::{matmul, matmul_packed, quantize_row, with_isa, DType, Isa, MatMut, MatRef, Parallel};
use baton_kernels::{PackedWeights, Scratch, WeightMatrix};

#[path = "matmul/decode.rs"]
mod decode;
#[path = "matmul/packed.rs"]
mod packed;

type Task = *const (dyn Fn(usize) + Sync);

struct Shared {
    generation: AtomicU64,
    remaining: AtomicUsize,
    stop: AtomicBool,
    task: UnsafeCell<Option<Task>>,
}

// SAFETY: `task` is written only by `Pool::run` before it bumps `generation`
// (release) and while no worker is running a task (it waited for
// `remaining == 0`); workers read it only after seeing the new generation
// (acquire). All other fields are atomics.
unsafe impl Sync for Shared {}
// SAFETY: as above; the raw pointer is only dereferenced under that protocol.
unsafe impl Send for Shared {}

/// Spins briefly, then yields the CPU (so an oversubscribed machine does not
/// leave a preempted peer waiting a whole scheduler quantum).
fn backoff(spins: &mut u32) {
    *spins += 1;
    if *spins < 2000 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

/// A fork-join pool whose workers spin between calls (no spawn per call).
struct Pool {
    shared: Arc<Shared>,
    threads: usize,
    workers: Vec<JoinHandle<()>>,
}

impl Pool {
    fn new(threads: usize) -> Pool {
        let shared = Arc::new(Shared {
            generation: AtomicU64::new(0),
            remaining: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            task: UnsafeCell::new(None),
        });
        let workers = (1..threads)
            .map(|index| {
                let shared = Arc::clone(&shared);
                std::thread::spawn(move || {
                    let mut seen = 0;
                    loop {
                        let mut generation = shared.generation.load(Ordering::Acquire);
                        let mut spins = 0u32;
                        while generation == seen {
                            backoff(&mut spins);
                            generation = shared.generation.load(Ordering::Acquire);
                        }
                        seen = generation;
                        if shared.stop.load(Ordering::Acquire) {
                            return;
                        }
                        // SAFETY: the acquire load of the new generation
                        // happens after `run` stored the task; `run` keeps the
                        // closure alive until `remaining` reaches 0.
                        let task = unsafe { (*shared.task.get()).expect("task set before generation bump") };
                        // SAFETY: as above, the closure outlives this call.
                        unsafe { (*task)(index) };
                        shared.remaining.fetch_sub(1, Ordering::Release);
                    }
                })
            })
            .collect();
        Pool { shared, threads, workers }
    }
}

impl Parallel for Pool {
    fn threads(&self) -> usize {
        self.threads
    }

    fn run(&self, task: &(dyn Fn(usize) + Sync)) {
        // SAFETY: erasing the lifetime is sound because this function does not
        // return before every worker has finished with the task (the spin on
        // `remaining` below), and no worker is running one now.
        let task: Task = unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync), Task>(task) };
        // SAFETY: no worker reads `task` until the generation changes.
        unsafe { *self.shared.task.get() = Some(task) };
        self.shared.remaining.store(self.threads - 1, Ordering::Relaxed);
        self.shared.generation.fetch_add(1, Ordering::Release);
        // SAFETY: the closure is alive for this whole call.
        unsafe { (*task)(0) };
        let mut spins = 0u32;
        while self.shared.remaining.load(Ordering::Acquire) != 0 {
            backoff(&mut spins);
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.generation.fetch_add(1, Ordering::Release);
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }
}

/// Median seconds per call of `f`, after a warm-up, over at least 3 calls
/// and about 0.3 s.
fn time(f: &mut dyn FnMut()) -> f64 {
    f();
    let mut samples = Vec::new();
    let start = Instant::now();
    while samples.len() < 3 || (start.elapsed() < Duration::from_millis(300) && samples.len() < 1000) {
        let t = Instant::now();
        f();
        samples.push(t.elapsed().as_secs_f64());
    }
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn main() {
    let quick = std::env::var_os("BATON_BENCH_QUICK").is_some();
    let kquant_only = std::env::var_os("BATON_BENCH_KQUANT").is_some();
    let ms: &[usize] = if quick { &[1, 64] } else { &[1, 64, 512] };
    println!("cpu: {}; isa: {:?}; GFLOP/s = 2 m n k / median time", cpu_model(), baton_kernels::Isa::detected());
    if std::env::var("BATON_BENCH_PACKED_K").is_ok_and(|v| v == "levels") {
        bench_packed_k_levels();
        return;
    }
    if std::env::var_os("BATON_BENCH_PACKED_K").is_some() {
        bench_packed_k();
        return;
    }
    if std::env::var_os("BATON_BENCH_DECODE").is_some() {
        decode::bench_decode();
        return;
    }
    if std::env::var_os("BATON_BENCH_PACKED").is_some() {
        packed::bench_packed();
        return;
    }
    if std::env::var_os("BATON_BENCH_ISAS").is_some() {
        if let Some(shapes) = listed_shapes() {
            let types = [DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0];
            let more = [DType::Q5_1, DType::MXFP4, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K];
            let types: Vec<DType> = types.into_iter().chain(more).collect();
            // Only the types whose blocks divide every listed `k`.
            let fit = |t: &DType| shapes.iter().all(|&(_, k)| t.row_bytes(k).is_some());
            bench_levels(&shapes, &selected(&types).into_iter().filter(fit).collect::<Vec<_>>());
            return;
        }
        let types =
            [DType::F32, DType::F16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::MXFP4];
        bench_levels(&[(1536, 576), (576, 1536)], &selected(&types));
        let types = [DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_0];
        bench_levels(&[(2048, 768), (768, 2048)], &selected(&types));
        return;
    }
    if !kquant_only {
        let types = [DType::F32, DType::F16, DType::Q8_0, DType::Q4_1, DType::Q4_0, DType::Q5_0, DType::Q5_1];
        bench_table(&[(1536, 576), (576, 1536), (49152, 576)], &selected(&types), ms);
    }
    let types = [DType::Q8_0, DType::Q4_1, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K];
    bench_table(&[(2048, 768), (768, 2048)], &selected(&types), ms);
}

/// The `(n, k)` shapes `BATON_BENCH_SHAPES` lists (`640x2048,2048x640`), if set.
fn listed_shapes() -> Option<Vec<(usize, usize)>> {
    let list = std::env::var("BATON_BENCH_SHAPES").ok()?;
    let shape = |s: &str| -> Option<(usize, usize)> {
        let (n, k) = s.trim().split_once('x')?;
        Some((n.parse().ok()?, k.parse().ok()?))
    };
    Some(list.split(',').map(|s| shape(s).unwrap_or_else(|| panic!("BATON_BENCH_SHAPES: not NxK: {s:?}"))).collect())
}

/// The CPU's model name (`/proc/cpuinfo`), so figures say what they ran on.
fn cpu_model() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let line = info.lines().find(|l| l.starts_with("model name"));
    line.and_then(|l| l.split(':').nth(1)).map_or_else(|| std::env::consts::ARCH.to_string(), |m| m.trim().to_string())
}

/// The types of `types` that `BATON_BENCH_TYPES` lists (all when unset).
fn selected(types: &[DType]) -> Vec<DType> {
    let Ok(list) = std::env::var("BATON_BENCH_TYPES") else { return types.to_vec() };
    let wanted: Vec<DType> = list
        .split(',')
        .map(|name| DType::from_name(name.trim()).unwrap_or_else(|| panic!("BATON_BENCH_TYPES: unknown type {name:?}")))
        .collect();
    types.iter().copied().filter(|t| wanted.contains(t)).collect()
}

/// Times every type at every shape `(n, k)` and activation count `m`; the
/// last column is the single-thread speed relative to Q4_1's at the same
/// shape and `m`, measured in this run (NaN until Q4_1 has run).
fn bench_table(shapes: &[(usize, usize)], types: &[DType], ms: &[usize]) {
    println!(
        "{:<6} {:>6} {:>5} {:>4} | {:>9} {:>9} {:>9} | {:>8} {:>10} | {:>7}",
        "type", "n", "k", "m", "1 thread", "2 (pool)", "2 (scoped)", "pool/1T", "us/call 2T", "vs q4_1"
    );
    let mut seed = 1u32;
    let mut rand = move || {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        (seed as f32 / u32::MAX as f32) - 0.5
    };
    for &(n, k) in shapes {
        let w_f32: Vec<f32> = (0..n * k).map(|_| rand()).collect();
        let max_m = *ms.last().expect("at least one m");
        let x: Vec<f32> = (0..max_m * k).map(|_| rand()).collect();
        let mut y = vec![0.0f32; max_m * n];
        // Single-thread seconds of Q4_1 per m, the baseline of the ratios.
        let mut baseline = vec![f64::NAN; ms.len()];
        for &dtype in types {
            let row_bytes = dtype.row_bytes(k).expect("k is whole blocks");
            let mut w_bytes = vec![0u8; n * row_bytes];
            for (row, out) in w_f32.chunks_exact(k).zip(w_bytes.chunks_exact_mut(row_bytes)) {
                quantize_row(dtype, row, out).expect("row sizes match");
            }
            let w = WeightMatrix::contiguous(dtype, &w_bytes, n, k).expect("whole blocks");
            let mut scratch = Scratch::new();
            for (mi, &m) in ms.iter().enumerate() {
                let x = MatRef::contiguous(&x[..m * k], m, k);
                let mut run = |parallel: &dyn Parallel| {
                    let mut y = MatMut::contiguous(&mut y[..m * n], m, n);
                    time(&mut || {
                        matmul(parallel, &w, &x, &mut y, &mut scratch).expect("shapes match");
                        black_box(&mut y);
                    })
                };
                let single = run(&SingleThread);
                let pool = Pool::new(2);
                let pooled = run(&pool);
                drop(pool);
                let scoped = run(&ScopedThreads(2));
                if dtype == DType::Q4_1 {
                    baseline[mi] = single;
                }
                let gflops = |t: f64| 2.0 * (m * n * k) as f64 / t / 1e9;
                println!(
                    "{:<6} {:>6} {:>5} {:>4} | {:>9.1} {:>9.1} {:>9.1} | {:>7.2}x {:>10.1} | {:>6.2}x",
                    dtype.name(),
                    n,
                    k,
                    m,
                    gflops(single),
                    gflops(pooled),
                    gflops(scoped),
                    single / pooled,
                    pooled * 1e6,
                    baseline[mi] / single,
                );
            }
        }
    }
}

/// `n x k` random weights of `dtype`, encoded, and `m_max x k` activations.
fn problem(dtype: DType, n: usize, k: usize, m_max: usize) -> (Vec<u8>, Vec<f32>) {
    let mut seed = 7u32;
    let mut rand = move || {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        (seed as f32 / u32::MAX as f32) - 0.5
    };
    let row_bytes = dtype.row_bytes(k).expect("k is whole blocks");
    let mut w_bytes = vec![0u8; n * row_bytes];
    for out in w_bytes.chunks_exact_mut(row_bytes) {
        let row: Vec<f32> = (0..k).map(|_| rand()).collect();
        quantize_row(dtype, &row, out).expect("row sizes match");
    }
    (w_bytes, (0..m_max * k).map(|_| rand()).collect())
}

/// Single-thread GFLOP/s of every level this CPU has, side by side, with
/// each SIMD level's speed-up over the one below it.
fn bench_levels(shapes: &[(usize, usize)], types: &[DType]) {
    let lowest = if std::env::var("BATON_BENCH_ISAS").is_ok_and(|v| v == "simd") { Isa::Avx2 } else { Isa::Scalar };
    let levels: Vec<Isa> = Isa::available().into_iter().filter(|&l| l >= lowest).collect();
    print!("{:<6} {:>6} {:>5} {:>4} |", "type", "n", "k", "m");
    for level in &levels {
        print!(" {:>9}", format!("{level:?}"));
    }
    println!(" | speed-up over the level below");
    for &(n, k) in shapes {
        for &dtype in types {
            let (w_bytes, x) = problem(dtype, n, k, 64);
            let w = WeightMatrix::contiguous(dtype, &w_bytes, n, k).expect("whole blocks");
            for m in [1, 64] {
                let x = MatRef::contiguous(&x[..m * k], m, k);
                let mut y = vec![0.0f32; m * n];
                let mut scratch = Scratch::new();
                let seconds = best_per_level(&levels, 3, cpu_time, &mut || {
                    let mut y = MatMut::contiguous(&mut y, m, n);
                    matmul(&SingleThread, &w, &x, &mut y, &mut scratch).expect("shapes match");
                    black_box(&mut y);
                });
                print!("{:<6} {:>6} {:>5} {:>4} |", dtype.name(), n, k, m);
                for t in &seconds {
                    print!(" {:>9.1}", 2.0 * (m * n * k) as f64 / t / 1e9);
                }
                print!(" |");
                for pair in seconds.windows(2) {
                    print!(" {:>5.2}x", pair[0] / pair[1]);
                }
                println!();
            }
        }
    }
}

/// The fewest seconds per call of `call` at each of `levels`, over
/// `rounds` rounds that take the levels in turn (so a slow spell of the
/// machine hits every level alike), each call timed by `timer`.
fn best_per_level(
    levels: &[Isa],
    rounds: usize,
    timer: fn(&mut dyn FnMut()) -> f64,
    call: &mut dyn FnMut(),
) -> Vec<f64> {
    let mut best = vec![f64::INFINITY; levels.len()];
    for _round in 0..rounds {
        for (best, &level) in best.iter_mut().zip(levels) {
            *best = best.min(with_isa(level, || timer(&mut *call)));
        }
    }
    best
}

/// Nanoseconds this thread has run on a CPU, if Linux says.
fn thread_cpu_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().next()?.parse().ok()
}

/// CPU seconds per call of `f` on this thread, over at least 0.2 s of CPU
/// time after a warm-up call (wall-clock [`time`] where the count is missing).
/// The count is read after batches of calls that double in size: reading
/// it costs microseconds, as much as a small matmul.
fn cpu_time(f: &mut dyn FnMut()) -> f64 {
    f();
    let Some(start) = thread_cpu_ns() else { return time(f) };
    let (mut calls, mut batch) = (0u32, 1u32);
    loop {
        for _ in 0..batch {
            f();
        }
        calls += batch;
        batch = batch.saturating_mul(2).min(4096);
        let spent = thread_cpu_ns().unwrap_or(start) - start;
        if spent >= 200_000_000 || calls >= 100_000 {
            return spent as f64 / 1e9 / f64::from(calls);
        }
    }
}

/// Packed against unpacked K-quants: GFLOP/s of each on 1 thread and on 2
/// (the spinning pool), with the packed/unpacked ratio.
fn bench_packed_k() {
    let stories = [(768, 768), (2048, 768), (768, 2048)];
    let types = [DType::Q4_K, DType::Q6_K, DType::Q5_K, DType::Q3_K, DType::Q2_K];
    let mut cases: Vec<(DType, (usize, usize))> =
        selected(&types).into_iter().flat_map(|t| stories.iter().map(move |&s| (t, s))).collect();
    cases.extend(selected(&[DType::Q4_K, DType::Q6_K]).into_iter().map(|t| (t, (640, 2048))));
    println!(
        "{:<6} {:>5} {:>5} {:>3} | {:>9} {:>9} {:>6} | {:>9} {:>9} {:>6}",
        "type", "n", "k", "m", "1T unpack", "1T packed", "ratio", "2T unpack", "2T packed", "ratio"
    );
    let pool = Pool::new(2);
    for (dtype, (n, k)) in cases {
        let (w_bytes, x) = problem(dtype, n, k, 64);
        let w = WeightMatrix::contiguous(dtype, &w_bytes, n, k).expect("whole blocks");
        let packed = PackedWeights::pack(&w, &SingleThread).expect("valid").expect("packable");
        let mut scratch = Scratch::new();
        for m in [1, 4, 8, 64] {
            let x = MatRef::contiguous(&x[..m * k], m, k);
            let mut y = vec![0.0f32; m * n];
            // 1 thread: CPU time of this thread (other jobs' time does not
            // count), best of 3 alternating rounds; 2 threads: wall time.
            let mut run = |parallel: &dyn Parallel, pack: bool| {
                let mut y = MatMut::contiguous(&mut y, m, n);
                let timer = if parallel.threads() == 1 { cpu_time } else { time };
                let t = timer(&mut || {
                    if pack {
                        matmul_packed(parallel, &packed, &x, &mut y, &mut scratch).expect("shapes match");
                    } else {
                        matmul(parallel, &w, &x, &mut y, &mut scratch).expect("shapes match");
                    }
                    black_box(&mut y);
                });
                2.0 * (m * n * k) as f64 / t / 1e9
            };
            let (mut u1, mut p1) = (0.0f64, 0.0f64);
            for _round in 0..3 {
                u1 = u1.max(run(&SingleThread, false));
                p1 = p1.max(run(&SingleThread, true));
            }
            let (u2, p2) = (run(&pool, false), run(&pool, true));
            println!(
                "{:<6} {:>5} {:>5} {:>3} | {:>9.1} {:>9.1} {:>5.2}x | {:>9.1} {:>9.1} {:>5.2}x",
                dtype.name(),
                n,
                k,
                m,
                u1,
                p1,
                p1 / u1,
                u2,
                p2,
                p2 / u2
            );
        }
    }
}

/// The packed K-quant tiles alone, single-thread GFLOP/s at each SIMD level the CPU has, side by side: the fastest batch over 5
/// alternating rounds ([`fastest_batch`]).
fn bench_packed_k_levels() {
    let shapes = [(2048, 768), (768, 2048), (640, 2048)];
    let types = [DType::Q4_K, DType::Q6_K, DType::Q5_K, DType::Q3_K, DType::Q2_K];
    let levels: Vec<Isa> = Isa::available().into_iter().filter(|&l| l >= Isa::Avx2).collect();
    print!("{:<6} {:>5} {:>5} {:>3} |", "type", "n", "k", "m");
    for level in &levels {
        print!(" {:>9}", format!("{level:?}"));
    }
    println!();
    for dtype in selected(&types) {
        for (n, k) in shapes {
            let (w_bytes, x) = problem(dtype, n, k, 64);
            let w = WeightMatrix::contiguous(dtype, &w_bytes, n, k).expect("whole blocks");
            let packed = PackedWeights::pack(&w, &SingleThread).expect("valid").expect("packable");
            let mut scratch = Scratch::new();
            for m in [1, 2, 4, 64] {
                let x = MatRef::contiguous(&x[..m * k], m, k);
                let mut y = vec![0.0f32; m * n];
                let seconds = best_per_level(&levels, 5, fastest_batch, &mut || {
                    let mut y = MatMut::contiguous(&mut y, m, n);
                    matmul_packed(&SingleThread, &packed, &x, &mut y, &mut scratch).expect("shapes match");
                    black_box(&mut y);
                });
                print!("{:<6} {:>5} {:>5} {:>3} |", dtype.name(), n, k, m);
                for t in seconds {
                    print!(" {:>9.1}", 2.0 * (m * n * k) as f64 / t / 1e9);
                }
                println!();
            }
        }
    }
}

/// The fewest seconds per call of `f` over batches of calls lasting about
/// 0.2 ms, for about 0.1 s: a batch the scheduler preempted or a busy
/// sibling hyperthread slowed does not count (a batch is short next to a
/// time slice, and Linux's thread CPU time only counts whole ticks).
fn fastest_batch(f: &mut dyn FnMut()) -> f64 {
    f();
    let per_batch = {
        let t = Instant::now();
        f();
        (200e-6 / t.elapsed().as_secs_f64().max(1e-9)).clamp(1.0, 10_000.0) as u32
    };
    let mut best = f64::INFINITY;
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(100) {
        let t = Instant::now();
        for _ in 0..per_batch {
            f();
        }
        best = best.min(t.elapsed().as_secs_f64() / f64::from(per_batch));
    }
    best
}
