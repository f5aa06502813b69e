//! `baton bench sync` and `baton bench gates`: what each wait policy costs.
//!
//! `sync` measures single hand-offs (wake latency) between the host and CPU
//! streams under each policy; `gates` (in `gates.rs`) measures
//! collectives over two CPU devices and what a spinning waiter costs a
//! compute-bound core.
//!
//! Method of `sync`: every iteration measures exactly one hand-off, with
//! nothing else queued, so queueing never inflates a latency. The waiting
//! side first announces that it is about to wait (an `armed` counter); the
//! releasing side sees that, busy-waits a further `--settle-us` (default 20
//! µs, long enough for a blocking waiter to be parked in the kernel and
//! shorter than the 50 µs spin of `spin`, so `spin` is measured in its fast
//! path), then takes t0 just before it releases. t1 is taken by the woken
//! side as its first action. Both are `Instant`s (CLOCK_MONOTONIC, one clock
//! for all threads). The host thread is pinned to a core that no device
//! stream runs on when the machine has one (else to cpu:1's core), and the
//! devices are opened with the measured policy, so their workers' idle
//! waits use it too.
//!
//! With `--devices vulkan:N` (Vulkan devices only; the CPU rows always run
//! on cpu:0,cpu:1) each Vulkan device adds a row: one host->device->host
//! hand-off through timeline semaphores (a batch waits on a value the host
//! signals, then signals one the host waits for) beside the same hand-off
//! through the fence shader (a batch spins on a word the host writes). The
//! host submits the batch, busy-waits the settle time, takes t0 just before
//! it releases, and t1 when its `vkWaitSemaphores` returns. On a driver
//! that runs on the CPU (lavapipe) the rows measure at most
//! [`CPU_DRIVER_ITERATIONS`] hand-offs: its shaders spin on the host's
//! cores.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use baton_core::backend::{Device, Stream};
use baton_core::sync::{HostTimeline, PointStatus, Release, SyncPoint, WaitPolicy};
use baton_cpu::CpuDevice;
use clap::Args;

use crate::pair::{host_core, on_host_thread, open_pair, policies, spin_for, Probe, TIMEOUT};
use crate::stats::percentile;

/// Arguments of `baton bench sync`.
#[derive(Args)]
pub struct SyncArgs {
    /// Measured hand-offs per measurement and policy (after a warm-up).
    #[arg(long, default_value_t = 2000)]
    iterations: usize,
    /// Microseconds the releasing side waits after the waiter is armed.
    #[arg(long, default_value_t = 20)]
    settle_us: u64,
    /// Print one JSON object per (measurement, policy) instead of the table.
    #[arg(long)]
    json: bool,
    /// Vulkan devices whose host->device->host hand-offs to add (timeline
    /// semaphore and fence shader), e.g. `vulkan:0`.
    #[arg(long)]
    devices: Option<String>,
}

/// Most hand-offs of a Vulkan row on a driver that runs on the CPU.
const CPU_DRIVER_ITERATIONS: usize = 200;

/// Most polls of one fence wait: a dead producer costs a bounded spin (on
/// lavapipe, llvmpipe's loop limit ends a wait after about a million polls
/// anyway).
const FENCE_POLLS: u32 = 1 << 22;

/// One Vulkan device's row: its name, description, hand-offs measured, and
/// (p50, p99) in µs of the semaphore and fence hand-offs, and the fence
/// waits that timed out.
struct VulkanRow {
    name: String,
    description: String,
    iterations: usize,
    semaphore: Quantiles,
    fence: Quantiles,
    fence_timeouts: usize,
}

/// Measures the hand-offs of the Vulkan devices of `list`.
fn measure_vulkan(list: &str, args: &SyncArgs) -> Result<Vec<VulkanRow>> {
    let names: Vec<&str> = list.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    if let Some(bad) = names.iter().find(|n| baton_vulkan::parse_name(n).is_err()) {
        bail!(
            "--devices {bad:?}: bench sync takes Vulkan devices (`vulkan:N`); its CPU rows always run on cpu:0,cpu:1"
        );
    }
    let devices = baton_vulkan::open(&names).with_context(|| format!("opening {}", names.join(",")))?;
    let quantiles = |ns: &[u64]| {
        let mut us: Vec<f64> = ns.iter().map(|&n| n as f64 / 1000.0).collect();
        us.sort_by(f64::total_cmp);
        (percentile(&us, 0.5), percentile(&us, 0.99))
    };
    let mut rows = Vec::new();
    for device in &devices {
        let info = device.info();
        let mut iterations = args.iterations.max(1);
        if device.is_cpu_implementation() {
            iterations = iterations.min(CPU_DRIVER_ITERATIONS);
        }
        let settle = Duration::from_micros(args.settle_us);
        let h = baton_vulkan::latency::hand_offs(device, iterations, settle, FENCE_POLLS)
            .with_context(|| format!("hand-offs on {}", info.name))?;
        rows.push(VulkanRow {
            name: info.name.clone(),
            description: info.description.clone(),
            iterations,
            semaphore: quantiles(&h.semaphore_ns),
            fence: quantiles(&h.fence_ns),
            fence_timeouts: h.fence_timeouts,
        });
    }
    Ok(rows)
}

/// Waits for `point` by sleeping between checks, for a host wait that is
/// not measured: a blocking waiter would count as a sleeper of the stream's
/// timeline, and the stream's worker would then pay a futex wake (a
/// syscall) inside the measured hand-off when it advances an earlier value.
fn nap_until(point: &SyncPoint) -> Result<()> {
    let start = Instant::now();
    loop {
        match point.status() {
            PointStatus::Reached => return Ok(()),
            PointStatus::Failed(cause) => bail!("{point} failed: {cause}"),
            PointStatus::Pending if start.elapsed() > TIMEOUT => bail!("{point} not reached after {TIMEOUT:?}"),
            PointStatus::Pending => std::thread::sleep(Duration::from_micros(50)),
        }
    }
}

/// The four hand-offs measured.
#[derive(Clone, Copy)]
enum Measure {
    HostToStream,
    StreamToHost,
    StreamToStream,
    RoundTrip,
}

impl Measure {
    const ALL: [Measure; 4] =
        [Measure::HostToStream, Measure::StreamToHost, Measure::StreamToStream, Measure::RoundTrip];

    /// The JSON name and the table row's title.
    fn names(self) -> (&'static str, &'static str) {
        match self {
            Measure::HostToStream => ("host_to_stream", "host releases cpu:0 stream"),
            Measure::StreamToHost => ("stream_to_host", "cpu:0 stream signals host"),
            Measure::StreamToStream => ("stream_to_stream", "cpu:0 stream releases cpu:1 stream"),
            Measure::RoundTrip => ("round_trip", "round trip host->cpu:0->host"),
        }
    }
}

/// One policy's devices, streams and probe.
struct Rig {
    _devices: Vec<Arc<CpuDevice>>,
    s0: Stream,
    s1: Stream,
    policy: WaitPolicy,
    probe: Arc<Probe>,
    settle: Duration,
}

impl Rig {
    /// Queues on `stream` a host function that runs `f` on the probe.
    fn probe_fn(
        &self,
        stream: &Stream,
        f: impl FnOnce(&Probe) -> Result<(), String> + Send + 'static,
    ) -> Result<SyncPoint> {
        let probe = self.probe.clone();
        Ok(stream.host_fn(move || f(&probe))?)
    }

    /// Queues on `stream` a host function that announces iteration `i`.
    fn arm(&self, stream: &Stream, i: u64) -> Result<SyncPoint> {
        self.probe_fn(stream, move |p| {
            p.armed.store(i, Ordering::Release);
            Ok(())
        })
    }

    /// Spins until iteration `i` is armed, then for the settle time.
    fn until_waiting(&self, i: u64) -> Result<()> {
        self.probe.until_armed(i).map_err(anyhow::Error::msg)?;
        spin_for(self.settle);
        Ok(())
    }

    /// One hand-off of `measure` in iteration `i`, in nanoseconds.
    fn once(&self, measure: Measure, i: u64, release: Release) -> Result<u64> {
        match measure {
            Measure::HostToStream => {
                self.arm(&self.s0, i)?;
                self.s0.wait_with(&release.point(), self.policy)?;
                let done = self.probe_fn(&self.s0, Probe::stamp)?;
                self.until_waiting(i)?;
                let t0 = self.probe.now();
                release.signal();
                nap_until(&done).context("waiting for the released stream")?;
                Ok(self.probe.stamped().saturating_sub(t0))
            }
            Measure::StreamToHost => {
                release.signal(); // unused here; dropping it would abandon it
                let settle = self.settle;
                let point = self.probe_fn(&self.s0, move |p| {
                    p.until_armed(i)?;
                    spin_for(settle);
                    p.stamp()
                })?;
                self.probe.armed.store(i, Ordering::Release);
                point.wait_with(self.policy, None).context("waiting for the signalling stream")?;
                let t1 = self.probe.now();
                Ok(t1.saturating_sub(self.probe.stamped()))
            }
            Measure::StreamToStream => {
                // cpu:1 holds at a host gate until everything is queued, so
                // the host is parked before cpu:1 arms and cpu:0 stamps.
                let settle = self.settle;
                self.s1.wait_with(&release.point(), WaitPolicy::Block)?;
                self.arm(&self.s1, i)?;
                let from = self.probe_fn(&self.s0, move |p| {
                    p.until_armed(i)?;
                    spin_for(settle);
                    p.start.store(p.now(), Ordering::Release);
                    Ok(())
                })?;
                self.s1.wait_with(&from, self.policy)?;
                let done = self.probe_fn(&self.s1, Probe::stamp)?;
                release.signal();
                nap_until(&done).context("waiting for the released stream")?;
                Ok(self.probe.stamped().saturating_sub(self.probe.start.load(Ordering::Acquire)))
            }
            Measure::RoundTrip => {
                self.arm(&self.s0, i)?;
                let waited = self.s0.wait_with(&release.point(), self.policy)?;
                self.until_waiting(i)?;
                let t0 = self.probe.now();
                release.signal();
                waited.wait_with(self.policy, Some(TIMEOUT)).context("waiting for the stream's wait")?;
                Ok(self.probe.now().saturating_sub(t0))
            }
        }
    }

    /// Warms up, then measures `iterations` hand-offs; sorted µs.
    fn measure(&self, measure: Measure, iterations: usize) -> Result<Vec<f64>> {
        let warmup = (iterations / 10).max(20);
        let host = HostTimeline::new(format!("bench-{}", measure.names().0));
        let releases: Vec<Release> = (0..warmup + iterations).map(|_| host.reserve()).collect();
        let base = self.probe.armed.load(Ordering::Acquire);
        let mut samples = Vec::with_capacity(iterations);
        for (n, release) in releases.into_iter().enumerate() {
            let ns = self.once(measure, base + n as u64 + 1, release).with_context(|| measure.names().1)?;
            if n >= warmup {
                samples.push(ns as f64 / 1000.0);
            }
        }
        samples.sort_by(f64::total_cmp);
        Ok(samples)
    }
}

/// (p50, p99) of one (measurement, policy), in µs.
type Quantiles = (f64, f64);

/// Measures every hand-off under `policy`, on a pinned host thread:
/// (p50, p99) in µs per measurement, and the host's core.
fn measure_policy(policy: WaitPolicy, args: &SyncArgs) -> Result<(Vec<Quantiles>, Option<usize>)> {
    let devices = open_pair(policy)?;
    let core = host_core(&devices);
    let rig = Rig {
        s0: devices[0].new_stream().context("stream on cpu:0")?,
        s1: devices[1].new_stream().context("stream on cpu:1")?,
        _devices: devices,
        policy,
        probe: Probe::new(),
        settle: Duration::from_micros(args.settle_us),
    };
    let iterations = args.iterations.max(1);
    let rows = on_host_thread(core, || {
        Measure::ALL
            .iter()
            .map(|&m| {
                let s = rig.measure(m, iterations)?;
                Ok((percentile(&s, 0.5), percentile(&s, 0.99)))
            })
            .collect::<Result<Vec<_>>>()
    })?;
    Ok((rows, core))
}

/// A number for JSON: `null` when there is none (every fence wait timed
/// out).
fn json_num(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.3}")
    } else {
        "null".into()
    }
}

/// Runs `baton bench sync`.
pub fn run(args: SyncArgs) -> Result<()> {
    // The Vulkan rows first: a device that does not open fails at once.
    let vulkan = match &args.devices {
        Some(list) => measure_vulkan(list, &args)?,
        None => Vec::new(),
    };
    let mut results = Vec::new();
    let mut core = None;
    for policy in policies() {
        let (rows, c) = measure_policy(policy, &args).with_context(|| format!("policy {}", policy.name()))?;
        results.push((policy, rows));
        core = c;
    }
    let block: Vec<f64> = results[0].1.iter().map(|l| l.0).collect();
    if args.json {
        for (policy, rows) in &results {
            for ((m, l), b) in Measure::ALL.iter().zip(rows).zip(&block) {
                let (key, name, ratio) = (m.names().0, policy.name(), l.0 / b);
                let (n, settle) = (args.iterations, args.settle_us);
                println!("{{\"bench\":\"sync\",\"measurement\":\"{key}\",\"policy\":\"{name}\",\"p50_us\":{:.3},\"p99_us\":{:.3},\"ratio_to_block\":{ratio:.3},\"iterations\":{n},\"settle_us\":{settle}}}", l.0, l.1);
            }
        }
        for r in &vulkan {
            for (mechanism, l) in [("timeline_semaphore", r.semaphore), ("fence_shader", r.fence)] {
                let (name, ratio, settle, n) = (&r.name, l.0 / r.semaphore.0, args.settle_us, r.iterations);
                let (p50, p99, ratio) = (json_num(l.0), json_num(l.1), json_num(ratio));
                println!("{{\"bench\":\"sync\",\"measurement\":\"host_device_host\",\"device\":\"{name}\",\"mechanism\":\"{mechanism}\",\"p50_us\":{p50},\"p99_us\":{p99},\"ratio_to_semaphore\":{ratio},\"iterations\":{n},\"settle_us\":{settle},\"fence_timeouts\":{}}}", r.fence_timeouts);
            }
        }
        return Ok(());
    }
    let host = core.map_or("unpinned".to_string(), |c| format!("core {c}"));
    println!("hand-off latency, µs (p50 / p99, p50 ratio to block); {} iterations, host on {host}", args.iterations);
    println!("| hand-off | block | spin (50 µs) | poll |");
    println!("| --- | ---: | ---: | ---: |");
    for (i, m) in Measure::ALL.iter().enumerate() {
        let cells: Vec<String> = results
            .iter()
            .map(|(_, rows)| format!("{:.2} / {:.2} ({:.2}x)", rows[i].0, rows[i].1, rows[i].0 / block[i]))
            .collect();
        println!("| {} | {} |", m.names().1, cells.join(" | "));
    }
    for r in &vulkan {
        println!();
        println!(
            "{} ({}): host->device->host hand-off, µs (p50 / p99, p50 ratio to the semaphore); {} iterations",
            r.name, r.description, r.iterations
        );
        println!("| hand-off | timeline semaphore | fence shader |");
        println!("| --- | ---: | ---: |");
        let cell = |l: Quantiles| format!("{:.2} / {:.2} ({:.2}x)", l.0, l.1, l.0 / r.semaphore.0);
        println!("| round trip host->{}->host | {} | {} |", r.name, cell(r.semaphore), cell(r.fence));
        if r.fence_timeouts > 0 {
            println!("({} fence waits ran out of polls before the release and are left out)", r.fence_timeouts);
        }
    }
    Ok(())
}
