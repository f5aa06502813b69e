//! `baton bench gates`: two-device collectives per wait policy, and the
//! price a spinning waiter makes a compute-bound core pay.
//!
//! Collectives run over cpu:0 and cpu:1 on their own streams, relying only
//! on the copy contract (`C-ORDER`): each iteration, each device copies the
//! peer's `x` (waiting on the peer's producer point) and combines it; then it
//! waits for the peer's copy of its own `x` before it produces the next `x`
//! (so nothing overwrites what the peer still reads). The host waits with
//! the policy for both devices' result points every `--host-every`
//! iterations (default: every iteration); the time per iteration is the
//! total over the measured iterations divided by their number. Values are
//! checked after the last iteration, and the safe streams must have
//! inserted no implicit wait (every cross-device access ordered by hand).

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use baton_core::backend::{Bindings, Device, Stream, TensorRef};
use baton_core::graph::{Flags, Graph, GraphError, NodeId};
use baton_core::sync::{HostTimeline, SyncPoint, WaitPolicy};
use baton_core::DType;
use baton_cpu::CpuDevice;
use clap::Args;

use crate::pair::{host_core, on_host_thread, open_pair, policies, Probe, TIMEOUT};
use crate::stats::percentile;

/// Arguments of `baton bench gates`.
#[derive(Args)]
pub struct GatesArgs {
    /// Measured iterations of each collective and policy (after a warm-up).
    #[arg(long, default_value_t = 500)]
    iterations: usize,
    /// f32 elements of each device's tensor.
    #[arg(long, default_value_t = 4096)]
    elements: usize,
    /// The host waits for the results every this many iterations.
    #[arg(long, default_value_t = 1)]
    host_every: usize,
    /// Seconds of each matmul throughput measurement (0.1 to 5).
    #[arg(long, default_value_t = 1.0)]
    spin_secs: f64,
    /// Print one JSON object per result instead of the tables.
    #[arg(long)]
    json: bool,
}

/// The matmul of the spinning test: x [M, K] · W [N, K]ᵀ.
const MATMUL: (usize, usize, usize) = (64, 576, 1536);

/// Time per iteration of one collective under one policy.
struct GateTime {
    mean_us: f64,
    p50_us: f64,
    implicit_waits: u64,
}

/// Deterministic pseudo-random f32s in `[-1, 1)` (a multiplicative hash).
fn random(n: usize, seed: u64) -> Vec<f32> {
    let hash = |i: u64| ((i + 1) ^ (seed << 32)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
    (0..n as u64).map(|i| hash(i) as f32 / (1u64 << 23) as f32 - 1.0).collect()
}

/// A zeroed f32 tensor of `dims` alone in a new buffer of `device`.
fn tensor(device: &CpuDevice, dims: &[usize]) -> Result<TensorRef> {
    Ok(device.alloc_tensor(DType::F32, dims)?)
}

/// Writes `values` into `t` on `stream` and waits.
fn upload(stream: &Stream, t: &TensorRef, values: Vec<f32>) -> Result<()> {
    stream.write_async(t, values)?.wait().map_err(|e| e.error).context("uploading")?;
    Ok(())
}

/// Reads `t` back as f32s.
fn download(stream: &Stream, t: &TensorRef) -> Result<Vec<f32>> {
    let pending = stream.read_into_async(t, vec![0f32; t.bytes() / 4])?;
    pending.wait().map_err(|e| e.error).context("reading back")
}

/// A one-op graph over the f32 leaves `(name, dims)`; its output is `out`.
fn graph(
    leaves: &[(&str, &[usize])],
    op: impl FnOnce(&mut Graph, &[NodeId]) -> Result<NodeId, GraphError>,
) -> Result<Arc<Graph>> {
    let mut g = Graph::new();
    let mut ids = Vec::new();
    for (name, dims) in leaves {
        ids.push(g.leaf(name, DType::F32, dims, Flags::INPUT)?);
    }
    let out = op(&mut g, &ids)?;
    g.mark(out, Flags::OUTPUT)?;
    g.set_name(out, "out")?;
    Ok(Arc::new(g))
}

/// `out = in * factor` over `n` elements.
fn scale_graph(n: usize, factor: f32) -> Result<Arc<Graph>> {
    graph(&[("in", &[n])], |g, l| g.scale(l[0], factor))
}

/// Binds tensors to `graph` by name.
fn bind(graph: &Arc<Graph>, tensors: &[(&str, &TensorRef)]) -> Result<Bindings> {
    let mut b = Bindings::new(graph);
    for (name, t) in tensors {
        b.bind_name(name, (*t).clone())?;
    }
    Ok(b)
}

/// Runs `total` iterations of `step` (which queues iteration `i` and returns
/// its result points); the host waits for them every `every` iterations and
/// after the last. The first `warmup` iterations are not timed.
fn time_loop(
    total: usize,
    warmup: usize,
    every: usize,
    policy: WaitPolicy,
    mut step: impl FnMut(usize) -> Result<Vec<SyncPoint>>,
) -> Result<(f64, f64)> {
    let mut samples = Vec::new();
    let (mut start, mut block) = (Instant::now(), Instant::now());
    for i in 0..total {
        if i == warmup {
            (start, block) = (Instant::now(), Instant::now());
        }
        let points = step(i)?;
        if (i + 1 - warmup.min(i + 1)).is_multiple_of(every) || i + 1 == total {
            for p in &points {
                p.wait_with(policy, Some(TIMEOUT)).context("waiting for a gate's results")?;
            }
            if i >= warmup {
                samples.push(block.elapsed().as_secs_f64() * 1e6 / every as f64);
            }
            block = Instant::now();
        }
    }
    let mean = start.elapsed().as_secs_f64() * 1e6 / (total - warmup) as f64;
    samples.sort_by(f64::total_cmp);
    Ok((mean, percentile(&samples, 0.5)))
}

/// Fails unless `got` equals `want` (to f32 rounding).
fn check(what: &str, got: &[f32], want: &[f32]) -> Result<()> {
    let bad = got.iter().zip(want).position(|(g, w)| (g - w).abs() > 1e-6 * w.abs().max(1.0));
    match (bad, got.len() == want.len()) {
        (None, true) => Ok(()),
        (Some(i), _) => bail!("{what} is WRONG at element {i}: got {}, expected {}", got[i], want[i]),
        (None, false) => bail!("{what} is WRONG: {} values, expected {}", got.len(), want.len()),
    }
}

/// All-reduce (sum) of x0 on cpu:0 and x1 on cpu:1 by a butterfly of copies
/// and adds; the next x_d is y_d scaled by 0.75 (cpu:0) or 0.25 (cpu:1), so
/// the two inputs differ and the sum stays bounded.
fn all_reduce(devices: &[Arc<CpuDevice>], policy: WaitPolicy, args: &GatesArgs) -> Result<GateTime> {
    let e = args.elements;
    let s = [devices[0].new_stream()?, devices[1].new_stream()?];
    let pair = || -> Result<[TensorRef; 2]> { Ok([tensor(&devices[0], &[e])?, tensor(&devices[1], &[e])?]) };
    let (x, scratch, y) = (pair()?, pair()?, pair()?);
    let add = graph(&[("a", &[e]), ("b", &[e])], |g, l| g.add(l[0], l[1]))?;
    let next = [scale_graph(e, 0.75)?, scale_graph(e, 0.25)?];
    let mut add_b = Vec::new();
    let mut next_b = Vec::new();
    let mut produced = Vec::new();
    for d in 0..2 {
        add_b.push(bind(&add, &[("a", &x[d]), ("b", &scratch[d]), ("out", &y[d])])?);
        next_b.push(bind(&next[d], &[("in", &y[d]), ("out", &x[d])])?);
        upload(&s[d], &x[d], random(e, d as u64 + 1))?;
        produced.push(s[d].last_point());
    }
    let (warmup, total) = (50, 50 + args.iterations.max(1));
    let (mean_us, p50_us) = time_loop(total, warmup, args.host_every.max(1), policy, |i| {
        let copies =
            [s[0].copy(&x[1], &scratch[0], Some(&produced[1]))?, s[1].copy(&x[0], &scratch[1], Some(&produced[0]))?];
        let sums = vec![s[0].compute(add_b[0].clone())?, s[1].compute(add_b[1].clone())?];
        if i + 1 < total {
            for d in 0..2 {
                s[d].wait(&copies[1 - d])?; // the peer has read x_d
                produced[d] = s[d].compute(next_b[d].clone())?;
            }
        }
        Ok(sums)
    })?;
    let (x0, x1) = (download(&s[0], &x[0])?, download(&s[1], &x[1])?);
    let want: Vec<f32> = x0.iter().zip(&x1).map(|(a, b)| a + b).collect();
    check("all-reduce y on cpu:0", &download(&s[0], &y[0])?, &want)?;
    check("all-reduce y on cpu:1", &download(&s[1], &y[1])?, &want)?;
    Ok(GateTime { mean_us, p50_us, implicit_waits: s[0].implicit_waits() + s[1].implicit_waits() })
}

/// All-gather: device d's x lives in row d of its [2, E] buffer; each
/// iteration it copies the peer's row in, then (once the peer has read its
/// row) swaps: its next x is the peer's, so a missed ordering shows up in
/// the values.
fn all_gather(devices: &[Arc<CpuDevice>], policy: WaitPolicy, args: &GatesArgs) -> Result<GateTime> {
    let e = args.elements;
    let s = [devices[0].new_stream()?, devices[1].new_stream()?];
    let mut rows: Vec<[TensorRef; 2]> = Vec::new();
    let mut whole = Vec::new();
    for device in devices {
        let buffer = device.alloc(2 * e * 4)?;
        rows.push([TensorRef::new(&buffer, 0, DType::F32, &[e])?, TensorRef::new(&buffer, e * 4, DType::F32, &[e])?]);
        whole.push(TensorRef::new(&buffer, 0, DType::F32, &[2, e])?);
    }
    let swap = scale_graph(e, 1.0)?;
    let inputs = [random(e, 11), random(e, 12)];
    let mut swap_b = Vec::new();
    let mut produced = Vec::new();
    for d in 0..2 {
        swap_b.push(bind(&swap, &[("in", &rows[d][1 - d]), ("out", &rows[d][d])])?);
        upload(&s[d], &rows[d][d], inputs[d].clone())?;
        produced.push(s[d].last_point());
    }
    let (warmup, total) = (50, 50 + args.iterations.max(1));
    let (mean_us, p50_us) = time_loop(total, warmup, args.host_every.max(1), policy, |i| {
        let gathered = vec![
            s[0].copy(&rows[1][1], &rows[0][1], Some(&produced[1]))?,
            s[1].copy(&rows[0][0], &rows[1][0], Some(&produced[0]))?,
        ];
        if i + 1 < total {
            for d in 0..2 {
                s[d].wait(&gathered[1 - d])?; // the peer has read row d
                produced[d] = s[d].compute(swap_b[d].clone())?;
            }
        }
        Ok(gathered)
    })?;
    // Iteration k gathers the inputs swapped k times; the last is total - 1.
    let first = (total - 1) % 2;
    let want: Vec<f32> = inputs[first].iter().chain(&inputs[1 - first]).copied().collect();
    check("all-gather on cpu:0", &download(&s[0], &whole[0])?, &want)?;
    check("all-gather on cpu:1", &download(&s[1], &whole[1])?, &want)?;
    Ok(GateTime { mean_us, p50_us, implicit_waits: s[0].implicit_waits() + s[1].implicit_waits() })
}

/// GFLOP/s of `stream` computing the matmul back to back for `secs`
/// (three computes kept in flight; the host blocks).
fn matmul_rate(stream: &Stream, bindings: &Bindings, secs: f64) -> Result<f64> {
    let (m, k, n) = MATMUL;
    let flop = 2.0 * (m * k * n) as f64;
    let mut inflight = VecDeque::new();
    let mut count = 0u64;
    let start = Instant::now();
    while start.elapsed().as_secs_f64() < secs {
        if inflight.len() >= 3 {
            let p: SyncPoint = inflight.pop_front().context("in flight")?;
            p.wait_with(WaitPolicy::Block, Some(TIMEOUT)).context("matmul")?;
        }
        inflight.push_back(stream.compute(bindings.clone())?);
        count += 1;
    }
    for p in inflight {
        p.wait_with(WaitPolicy::Block, Some(TIMEOUT)).context("matmul")?;
    }
    Ok(count as f64 * flop / start.elapsed().as_secs_f64() / 1e9)
}

/// Runs `f` while a new stream of `device` waits with `policy` on a host
/// release that is signalled only after `f` returns.
fn with_spinner(device: &CpuDevice, policy: WaitPolicy, f: impl FnOnce() -> Result<f64>) -> Result<f64> {
    let stream = device.new_stream()?;
    let probe = Probe::new();
    let host = HostTimeline::new("spinner");
    let release = host.reserve();
    let armed = probe.clone();
    stream.host_fn(move || {
        armed.armed.store(1, Ordering::Release);
        Ok(())
    })?;
    let waited = stream.wait_with(&release.point(), policy)?;
    probe.until_armed(1).map_err(anyhow::Error::msg)?;
    std::thread::sleep(Duration::from_millis(2));
    let rate = f()?;
    release.signal();
    waited.wait_with(WaitPolicy::Block, Some(TIMEOUT)).context("the spinner (did its poll bound run out?)")?;
    Ok(rate)
}

/// Matmul GFLOP/s on cpu:0 alone, with a spinner on cpu:0, with one on cpu:1.
fn spin_price(devices: &[Arc<CpuDevice>], policy: WaitPolicy, secs: f64) -> Result<[f64; 3]> {
    let (m, k, n) = MATMUL;
    let graph = graph(&[("x", &[m, k]), ("w", &[n, k])], |g, l| g.matmul(l[0], l[1]))?;
    let stream = devices[0].new_stream()?;
    let (x, w, y) = (tensor(&devices[0], &[m, k])?, tensor(&devices[0], &[n, k])?, tensor(&devices[0], &[m, n])?);
    upload(&stream, &x, random(m * k, 21))?;
    upload(&stream, &w, random(n * k, 22))?;
    let b = bind(&graph, &[("x", &x), ("w", &w), ("out", &y)])?;
    matmul_rate(&stream, &b, 0.1)?; // warm-up
    let alone = matmul_rate(&stream, &b, secs)?;
    let same = with_spinner(&devices[0], policy, || matmul_rate(&stream, &b, secs))?;
    let other = with_spinner(&devices[1], policy, || matmul_rate(&stream, &b, secs))?;
    Ok([alone, same, other])
}

/// Runs `baton bench gates`.
pub fn run(args: GatesArgs) -> Result<()> {
    let secs = args.spin_secs.clamp(0.1, 5.0);
    let mut gates = Vec::new();
    let mut rates = Vec::new();
    let mut core = None;
    for policy in policies() {
        let devices = open_pair(policy)?;
        core = host_core(&devices);
        let (reduce, gather, rate) = on_host_thread(core, || {
            let reduce = all_reduce(&devices, policy, &args).context("all-reduce")?;
            let gather = all_gather(&devices, policy, &args).context("all-gather")?;
            Ok((reduce, gather, spin_price(&devices, policy, secs).context("price of spinning")?))
        })
        .with_context(|| format!("policy {}", policy.name()))?;
        gates.push((policy, [reduce, gather]));
        rates.push((policy, rate));
    }
    print_results(&args, core, &gates, &rates);
    Ok(())
}

/// Prints the tables, or JSON lines.
fn print_results(
    args: &GatesArgs,
    core: Option<usize>,
    gates: &[(WaitPolicy, [GateTime; 2])],
    rates: &[(WaitPolicy, [f64; 3])],
) {
    let names = [("all_reduce", "all-reduce (sum)"), ("all_gather", "all-gather")];
    let loss = |r: &[f64; 3], i: usize| 100.0 * (1.0 - r[i] / r[0]);
    if args.json {
        let (e, n, every) = (args.elements, args.iterations, args.host_every);
        for (policy, times) in gates {
            for (j, t) in times.iter().enumerate() {
                let (gate, name, ratio) = (names[j].0, policy.name(), t.mean_us / gates[0].1[j].mean_us);
                let (mean, p50, implicit) = (t.mean_us, t.p50_us, t.implicit_waits);
                println!("{{\"bench\":\"gates\",\"gate\":\"{gate}\",\"policy\":\"{name}\",\"elements\":{e},\"iterations\":{n},\"host_every\":{every},\"mean_us\":{mean:.3},\"p50_us\":{p50:.3},\"ratio_to_block\":{ratio:.3},\"implicit_waits\":{implicit},\"checked\":true}}");
            }
        }
        for (policy, r) in rates {
            for (i, place) in ["alone", "spinner_same_core", "spinner_other_core"].iter().enumerate() {
                let (name, gflops, loss) = (policy.name(), r[i], loss(r, i));
                println!("{{\"bench\":\"spin_price\",\"policy\":\"{name}\",\"placement\":\"{place}\",\"gflops\":{gflops:.3},\"loss_pct\":{loss:.2}}}");
            }
        }
        return;
    }
    let host = core.map_or("unpinned".to_string(), |c| format!("core {c}"));
    println!("gates over cpu:0,cpu:1: µs per iteration, mean (p50) [ratio of means to block]; {} iterations of {} f32, host waits every {} on {host}", args.iterations, args.elements, args.host_every);
    println!("| gate | block | spin (50 µs) | poll |");
    println!("| --- | ---: | ---: | ---: |");
    for (j, (_, title)) in names.iter().enumerate() {
        let cells: Vec<String> = gates
            .iter()
            .map(|(_, t)| {
                format!("{:.2} ({:.2}) [{:.2}x]", t[j].mean_us, t[j].p50_us, t[j].mean_us / gates[0].1[j].mean_us)
            })
            .collect();
        println!("| {title} | {} |", cells.join(" | "));
    }
    let implicit: u64 = gates.iter().flat_map(|(_, t)| t.iter().map(|g| g.implicit_waits)).sum();
    println!("results checked; implicit waits inserted by the streams: {implicit}");
    println!();
    println!(
        "price of spinning: matmul [{}x{}]·[{}x{}]ᵀ f32 on cpu:0, GFLOP/s (loss)",
        MATMUL.0, MATMUL.1, MATMUL.2, MATMUL.1
    );
    println!("| policy | alone | spinner on cpu:0 (same core) | spinner on cpu:1 (other core) |");
    println!("| --- | ---: | ---: | ---: |");
    for (policy, r) in rates {
        println!(
            "| {} | {:.2} | {:.2} ({:.1}%) | {:.2} ({:.1}%) |",
            policy.name(),
            r[0],
            r[1],
            loss(r, 1),
            r[2],
            loss(r, 2)
        );
    }
}
