//! Latencies of the sync primitives a Vulkan stream is made of, measured on
//! a device (`cargo run --release -p baton-vulkan --example latency`).

use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_core::backend::Device;
use baton_core::sync::HostTimeline;
use baton_core::DType;

use crate::device::VulkanDevice;
use crate::error::VulkanError;
use crate::timeline::StreamTimeline;

/// Median latencies, in nanoseconds.
#[derive(Clone, Debug)]
pub struct Latency {
    /// `vkSignalSemaphore` on the host to a thread blocked in
    /// `vkWaitSemaphores` waking up.
    pub host_signal_to_wake_ns: u64,
    /// An empty batch that signals a value, submitted, to `vkWaitSemaphores`
    /// returning on the same thread.
    pub submit_to_wait_ns: u64,
    /// A stream's host function queued to its point observed by the host
    /// (the worker's round trip for host work, mirror included).
    pub host_item_ns: u64,
    /// A 4-byte copy on the device queued to its point observed by the host.
    pub device_item_ns: u64,
    /// A host release to a stream of the device that waits natively on
    /// another stream waiting on that release: the point of the second
    /// observed by the host.
    pub native_handoff_ns: u64,
    /// The device-side fence: the host writes the word a spinning shader
    /// polls, to the batch's semaphore wait ending on the host (0 when every
    /// wait ran out of polls first).
    pub fence_release_to_done_ns: u64,
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

fn vk(device: &VulkanDevice) -> impl Fn(&str) -> VulkanError + '_ {
    move |m| VulkanError::Unsuitable { device: device.info().name.clone(), missing: format!("latency probe: {m}") }
}

/// Measures every latency `rounds` times on `device`; returns the medians.
pub fn measure(device: &Arc<VulkanDevice>, rounds: usize) -> Result<Latency, VulkanError> {
    let fail = vk(device);
    let ctx = device.context().clone();
    let (timeline, _writer) = StreamTimeline::new(&ctx, "latency".into())?;
    let timeline = Arc::new(timeline);
    // Host signal to wake.
    let mut wakes = Vec::with_capacity(rounds);
    let (tx, rx) = mpsc::channel::<Instant>();
    let waiter = timeline.clone();
    let thread = std::thread::spawn(move || {
        for v in 1..=rounds as u64 {
            if reached(&waiter, v).is_err() {
                return;
            }
            if tx.send(Instant::now()).is_err() {
                return;
            }
        }
    });
    for v in 1..=rounds as u64 {
        std::thread::sleep(Duration::from_micros(200));
        let start = Instant::now();
        timeline.signal_host(v).map_err(|r| fail(&r.to_string()))?;
        let woke = rx.recv().map_err(|e| fail(&e.to_string()))?;
        wakes.push(woke.duration_since(start).as_nanos() as u64);
    }
    let _ = thread.join();
    // Submit to wait.
    let mut submits = Vec::with_capacity(rounds);
    for i in 1..=rounds as u64 {
        let v = rounds as u64 + i;
        let start = Instant::now();
        ctx.submit(None, &[], (timeline.semaphore, v)).map_err(|r| fail(&r.to_string()))?;
        reached(&timeline, v).map_err(|m| fail(&m))?;
        submits.push(start.elapsed().as_nanos() as u64);
    }
    // The device-side fence.
    let fence = crate::fence::DeviceFence::new(&ctx, device.pipelines())?;
    let mut commands = crate::commands::Commands::new(&ctx)?;
    let mut fences = Vec::with_capacity(rounds);
    for i in 1..=rounds as u64 {
        let v = 2 * rounds as u64 + i;
        fence.reset();
        let cmd = commands.begin().map_err(|r| fail(&r.to_string()))?;
        fence.record_wait(cmd, 1, u32::MAX);
        let cmd = commands.end().map_err(|r| fail(&r.to_string()))?;
        ctx.submit(Some(cmd), &[], (timeline.semaphore, v)).map_err(|r| fail(&r.to_string()))?;
        // Spin rather than sleep: with the shader spinning on a CPU device
        // (lavapipe), a sleeping host could wait a scheduler tick for a core.
        let until = Instant::now() + Duration::from_micros(100);
        while Instant::now() < until {
            std::hint::spin_loop();
        }
        let start = Instant::now();
        fence.release(1);
        reached(&timeline, v).map_err(|m| fail(&m))?;
        if !fence.result().timed_out {
            fences.push(start.elapsed().as_nanos() as u64);
        }
    }
    drop(commands);
    // Stream items.
    let stream = device.new_stream().map_err(|e| fail(&e.to_string()))?;
    let other = device.new_stream().map_err(|e| fail(&e.to_string()))?;
    let ta = device.alloc_tensor(DType::F32, &[1]).map_err(|e| fail(&e.to_string()))?;
    let tb = device.alloc_tensor(DType::F32, &[1]).map_err(|e| fail(&e.to_string()))?;
    let (mut host_items, mut device_items, mut handoffs) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let start = Instant::now();
        stream.host_fn(|| Ok(())).and_then(|p| Ok(p.wait()?)).map_err(|e| fail(&e.to_string()))?;
        host_items.push(start.elapsed().as_nanos() as u64);
        let start = Instant::now();
        stream.copy(&ta, &tb, None).and_then(|p| Ok(p.wait()?)).map_err(|e| fail(&e.to_string()))?;
        device_items.push(start.elapsed().as_nanos() as u64);
        let host = HostTimeline::new("latency-gate");
        let release = host.reserve();
        stream.wait(&release.point()).map_err(|e| fail(&e.to_string()))?;
        let gated = stream.host_fn(|| Ok(())).map_err(|e| fail(&e.to_string()))?;
        let last = other.wait(&gated).map_err(|e| fail(&e.to_string()))?;
        std::thread::sleep(Duration::from_micros(500));
        let start = Instant::now();
        release.signal();
        last.wait().map_err(|e| fail(&e.to_string()))?;
        handoffs.push(start.elapsed().as_nanos() as u64);
    }
    Ok(Latency {
        host_signal_to_wake_ns: median(wakes),
        submit_to_wait_ns: median(submits),
        host_item_ns: median(host_items),
        device_item_ns: median(device_items),
        native_handoff_ns: median(handoffs),
        fence_release_to_done_ns: median(fences),
    })
}

/// Samples of the two host->device->host hand-offs of `baton bench sync`,
/// in nanoseconds, in measurement order.
#[derive(Clone, Debug, Default)]
pub struct HandOffs {
    /// Timeline semaphores: a batch waits on a value the host signals
    /// (`vkSignalSemaphore`) and signals a second semaphore; from the host's
    /// signal to its `vkWaitSemaphores` on the second one returning.
    pub semaphore_ns: Vec<u64>,
    /// The fence shader: a batch spins on the word the host writes and then
    /// signals a semaphore; from the host's write to its `vkWaitSemaphores`
    /// returning. Waits that ran out of polls are left out (counted in
    /// [`fence_timeouts`](Self::fence_timeouts)).
    pub fence_ns: Vec<u64>,
    /// Fence waits that ran out of polls before the host's write.
    pub fence_timeouts: usize,
}

/// Busy-waits for `d`: with a shader spinning on a CPU device (lavapipe), a
/// sleeping host could wait a scheduler tick for a core.
fn spin_for(d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}

/// Measures `rounds` hand-offs of each kind on `device`, after a warm-up of
/// a tenth as many (at least 5). Every round has exactly one batch in the
/// queue; the host waits `settle` after submitting it before it releases
/// (time for the batch to reach its wait), then takes the start time just
/// before the release. A fence wait polls at most `max_polls` times.
pub fn hand_offs(
    device: &Arc<VulkanDevice>,
    rounds: usize,
    settle: Duration,
    max_polls: u32,
) -> Result<HandOffs, VulkanError> {
    let fail = vk(device);
    let ctx = device.context().clone();
    let (gate, _gate_writer) = StreamTimeline::new(&ctx, "bench-gate".into())?;
    let (done, _done_writer) = StreamTimeline::new(&ctx, "bench-done".into())?;
    let fence = crate::fence::DeviceFence::new(&ctx, device.pipelines())?;
    let mut commands = crate::commands::Commands::new(&ctx)?;
    let warmup = (rounds / 10).max(5);
    let mut out = HandOffs::default();
    let mut value = 0u64;
    for n in 0..warmup + rounds {
        // Timeline semaphores.
        value += 1;
        ctx.submit(None, &[(gate.semaphore, value)], (done.semaphore, value)).map_err(|r| fail(&r.to_string()))?;
        spin_for(settle);
        let start = Instant::now();
        gate.signal_host(value).map_err(|r| fail(&r.to_string()))?;
        reached(&done, value).map_err(|m| fail(&m))?;
        let semaphore = start.elapsed().as_nanos() as u64;
        // The fence shader.
        value += 1;
        gate.signal_host(value).map_err(|r| fail(&r.to_string()))?;
        fence.reset();
        let cmd = commands.begin().map_err(|r| fail(&r.to_string()))?;
        fence.record_wait(cmd, 1, max_polls);
        let cmd = commands.end().map_err(|r| fail(&r.to_string()))?;
        ctx.submit(Some(cmd), &[], (done.semaphore, value)).map_err(|r| fail(&r.to_string()))?;
        spin_for(settle);
        let start = Instant::now();
        fence.release(1);
        reached(&done, value).map_err(|m| fail(&m))?;
        let fenced = start.elapsed().as_nanos() as u64;
        if n < warmup {
            continue;
        }
        out.semaphore_ns.push(semaphore);
        if fence.result().timed_out {
            out.fence_timeouts += 1;
        } else {
            out.fence_ns.push(fenced);
        }
    }
    Ok(out)
}

/// Waits until `timeline` reaches `value`, for at most 10 s (a measurement
/// on a hung device ends in an error, not a hang).
fn reached(timeline: &StreamTimeline, value: u64) -> Result<(), String> {
    match timeline.wait_reached(value, Some(Instant::now() + Duration::from_secs(10))) {
        Ok(true) => Ok(()),
        Ok(false) => Err(format!("the device did not reach value {value} within 10 s")),
        Err(r) => Err(r.to_string()),
    }
}
