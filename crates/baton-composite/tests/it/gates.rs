//! Split computation with gates: `y = (x · w1ᵀ) · w2ᵀ + x` with `w1` split
//! by rows and `w2` by columns, so the second product is partial sums that
//! an all-reduce gate brings together before the residual add. Checked
//! against a host reference on 2 and 3 devices, uneven shares, block and
//! poll gates, folded all-reduces (CPU devices add each other's partials in
//! place) and the butterfly's, under the chaos wrapper (inner devices delayed at random),
//! with no access left for the streams' hazard tracking to order; and a
//! device failing in the middle of a gate fails the computation on every
//! device with its error, without a hang.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_composite::{Butterfly, Collective, CompositeDevice, CompositeError, GateIo, GateSpec, TensorSplit};
use baton_conformance::{chaos, random};
use baton_core::backend::{
    Bindings, Buffer, BufferRange, Device, DeviceError, DeviceInfo, IntoDevice, RawStream, Stream, StreamError,
    StreamOp,
};
use baton_core::graph::{Flags, Graph, Op};
use baton_core::sync::{SyncPoint, Timeline, WaitPolicy};
use baton_core::DType;

const T: usize = 2;
const D: usize = 64;
const F: usize = 96;

fn graph() -> Arc<Graph> {
    let mut g = Graph::new();
    let x = g.leaf("x", DType::F32, &[T, D], Flags::INPUT).expect("x");
    let w1 = g.leaf("w1", DType::F32, &[F, D], Flags::WEIGHT).expect("w1");
    let w2 = g.leaf("w2", DType::F32, &[D, F], Flags::WEIGHT).expect("w2");
    let h = g.matmul(x, w1).expect("h");
    let p = g.matmul(h, w2).expect("p");
    let y = g.add(x, p).expect("y");
    g.mark(y, Flags::OUTPUT).expect("mark");
    g.set_name(y, "y").expect("name");
    Arc::new(g)
}

fn reference(x: &[f32], w1: &[f32], w2: &[f32]) -> Vec<f32> {
    let mut y = x.to_vec();
    for t in 0..T {
        let h: Vec<f64> =
            (0..F).map(|i| (0..D).map(|k| f64::from(x[t * D + k]) * f64::from(w1[i * D + k])).sum()).collect();
        for j in 0..D {
            y[t * D + j] += (0..F).map(|i| h[i] * f64::from(w2[j * F + i])).sum::<f64>() as f32;
        }
    }
    y
}

fn cpus(n: usize, policy: WaitPolicy) -> Vec<Arc<dyn Device>> {
    let names: Vec<String> = (0..n).map(|i| format!("cpu:{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    baton_cpu::open_with(&names, &baton_cpu::OpenOptions::default().with_policy(policy))
        .expect("cpus")
        .into_iter()
        .map(IntoDevice::into_device)
        .collect()
}

/// The butterfly, but leaving no all-reduce to its consumers: every gate
/// runs its exchanges and adds.
struct Unfolded(Butterfly);

impl Collective for Unfolded {
    fn name(&self) -> &'static str {
        "butterfly, unfolded"
    }
    fn scratch(&self, spec: &GateSpec, devices: usize) -> Vec<Vec<Vec<usize>>> {
        self.0.scratch(spec, devices)
    }
    fn run(
        &self,
        streams: &[Stream],
        spec: &GateSpec,
        io: &GateIo<'_>,
        policy: WaitPolicy,
    ) -> Result<(), CompositeError> {
        self.0.run(streams, spec, io, policy)
    }
}

/// Computes the graph on a composite over `inner` (see `compute_with`).
fn compute(inner: Vec<Arc<dyn Device>>, shares: &[f32], policy: WaitPolicy) -> Result<Vec<f32>, StreamError> {
    compute_with(CompositeDevice::new(inner, policy).expect("composite"), shares)
}

/// Computes the graph on `device` three times, as a decode loop does: twice
/// with the same tensors (the partition, its prepared memory and the gates'
/// kept graphs are reused), then with x in another buffer; checks y against
/// the host reference and that the hazard tracking inserted no wait (the
/// next run's writes of the gates' memory are ordered after this run's
/// reads of it) after each. Returns the last y.
fn compute_with(device: CompositeDevice, shares: &[f32]) -> Result<Vec<f32>, StreamError> {
    let n = device.inner().len();
    let rows = TensorSplit::proportional(0, F, n, shares, 1).expect("shares");
    let TensorSplit::Split { parts, .. } = rows.clone() else { unreachable!("proportional splits") };
    let cols = TensorSplit::Split { axis: 1, parts };
    let s = device.new_stream().expect("stream");
    // CPU devices address each other's memory: the collective decides.
    assert_eq!(device.folds_gates(), Some(device.collective().sums_in_consumers()));
    let x = device.alloc_tensor(DType::F32, &[T, D]).expect("x");
    let y = device.alloc_tensor(DType::F32, &[T, D]).expect("y");
    let w1 = device.alloc_split(DType::F32, &[F, D], rows).expect("w1");
    let w2 = device.alloc_split(DType::F32, &[D, F], cols).expect("w2");
    let (xv, w1v, w2v) = (random(T * D, 1), random(F * D, 2), random(D * F, 3));
    drop(s.write_async(&x, xv.clone())?);
    drop(s.write_async(&w1, w1v.clone())?);
    drop(s.write_async(&w2, w2v.clone())?);
    let moved = device.alloc_tensor(DType::F32, &[T, D]).expect("x");
    let xv2 = random(T * D, 4);
    drop(s.write_async(&moved, xv2.clone())?);
    let g = graph();
    // Queued back to back, each followed by a read of y (no host wait in
    // between), so a run's gates may still be read while the next is queued.
    let mut pending = Vec::new();
    for (input, values) in [(&x, &xv), (&x, &xv), (&moved, &xv2)] {
        let mut b = Bindings::new(&g);
        for (name, t) in [("x", input), ("w1", &w1), ("w2", &w2), ("y", &y)] {
            b.bind_name(name, t.clone())?;
        }
        s.compute(b)?;
        pending.push((s.read_into_async(&y, vec![0f32; T * D])?, values));
    }
    let mut got = Vec::new();
    for (run, (read, values)) in pending.into_iter().enumerate() {
        got = read.wait().map_err(|e| e.error)?;
        let want = reference(values, &w1v, &w2v);
        let worst = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(worst < 1e-4, "run {run}: largest error {worst} against the host reference");
    }
    assert_eq!(device.inner_implicit_waits(), 0, "{:?}", device.inner_hazard_reports());
    Ok(got)
}

#[test]
fn partial_sums_meet_an_all_reduce_gate() {
    let poll = WaitPolicy::Poll { bound: Duration::from_secs(30) };
    for policy in [WaitPolicy::Block, poll] {
        for (n, shares) in [(2, &[][..]), (2, &[1.0, 3.0][..]), (3, &[][..]), (3, &[2.0, 1.0, 1.0][..])] {
            compute(cpus(n, policy), shares, policy).expect("computes");
            let butterfly = Arc::new(Unfolded(Butterfly::new()));
            let device = CompositeDevice::with_collective(cpus(n, policy), policy, butterfly).expect("composite");
            compute_with(device, shares).expect("computes");
        }
    }
}

#[test]
fn any_inner_device_can_lead_and_a_leader_out_of_range_is_refused() {
    // Over MPI ranks each rank leads with its own device (the others are
    // stand-ins that run nothing): every leader gives the same results.
    let policy = WaitPolicy::Block;
    for n in [2, 3] {
        let first = compute(cpus(n, policy), &[], policy).expect("leader 0");
        for leader in 1..n {
            let device = CompositeDevice::new(cpus(n, policy), policy).expect("composite");
            let device = device.with_leader(leader).expect("a leader in range");
            assert_eq!(device.leader(), leader);
            assert_eq!(compute_with(device, &[]).expect("computes"), first, "leader {leader} of {n}");
        }
        let device = CompositeDevice::new(cpus(n, policy), policy).expect("composite");
        assert!(device.with_leader(n).is_err(), "leader {n} of {n} devices");
    }
}

#[test]
fn the_partition_has_one_gate_and_two_segments() {
    let g = graph();
    let mut bound = vec![None; g.nodes().len()];
    let rows = TensorSplit::proportional(0, F, 2, &[], 1).expect("rows");
    let TensorSplit::Split { parts, .. } = rows.clone() else { unreachable!("split") };
    bound[g.find("w1").expect("w1").0] = Some(rows);
    bound[g.find("w2").expect("w2").0] = Some(TensorSplit::Split { axis: 1, parts });
    let collective = baton_composite::Butterfly::new();
    for fold in [false, true] {
        let p = baton_composite::Partition::build_with(&g, bound.clone(), 2, &collective, fold).expect("partition");
        assert_eq!((p.segments(), p.gates().count()), (2, 1));
        let gate = p.gates().next().expect("gate");
        assert_eq!(gate.spec.kind, baton_composite::GateKind::AllReduce);
        assert!(matches!(g.node(gate.node).op, Op::MatMul), "the gate reduces the second product");
        assert_eq!(gate.folded, fold);
        assert_eq!(gate.outputs.is_empty(), fold, "a folded gate has no memory of its own");
    }
}

#[test]
fn gates_hold_under_chaos() {
    for seed in 0..chaos::seed_count(6) {
        for n in [2, 3] {
            let inner = chaos::wrap(cpus(n, WaitPolicy::Block), seed, Duration::from_micros(200));
            compute(inner, &[], WaitPolicy::Block).unwrap_or_else(|e| panic!("seed {seed}, {n} devices: {e}"));
        }
    }
}

/// A device whose streams fail their `fail_at`-th gate item: a copy, or a
/// computation right after a wait on another device (a gate's add, which
/// reads the peer's sum in place where memory is shared). A device lost in
/// the middle of a gate.
struct Failing {
    inner: Arc<dyn Device>,
    fail_at: usize,
    /// Instead of failing, go silent: block (no error) until this point.
    silent_until: Option<SyncPoint>,
}

struct FailingStream {
    inner: Arc<dyn RawStream>,
    copies: AtomicUsize,
    fail_at: usize,
    after_wait: std::sync::atomic::AtomicBool,
    silent_until: Option<SyncPoint>,
}

// SAFETY: every item goes to the inner stream, which keeps the contract; a
// gate item is replaced by a host function that fails, which touches no
// memory.
unsafe impl RawStream for FailingStream {
    fn label(&self) -> &str {
        self.inner.label()
    }
    fn timeline(&self) -> &Timeline {
        self.inner.timeline()
    }
    fn can_wait_on(&self, point: &SyncPoint) -> bool {
        self.inner.can_wait_on(point)
    }
    fn can_access(&self, range: &BufferRange) -> bool {
        self.inner.can_access(range)
    }
    fn can_compute_on(&self, range: &BufferRange) -> bool {
        self.inner.can_compute_on(range)
    }
    unsafe fn submit(&self, op: StreamOp) -> Result<u64, StreamError> {
        let after_wait = self.after_wait.swap(matches!(op, StreamOp::Wait { .. }), Ordering::Relaxed);
        let gate_item = matches!(op, StreamOp::Copy { .. }) || (after_wait && matches!(op, StreamOp::Compute { .. }));
        let op = match op {
            _ if gate_item && self.copies.fetch_add(1, Ordering::Relaxed) + 1 == self.fail_at => {
                match self.silent_until.clone() {
                    // Silent: no error, no progress, until the test resumes
                    // it (bounded, so a broken test cannot hang the suite).
                    Some(resume) => StreamOp::HostFn(Box::new(move || {
                        resume.wait_timeout(Duration::from_secs(60)).map_err(|e| e.to_string())
                    })),
                    None => StreamOp::HostFn(Box::new(|| Err("device lost in the middle of a gate".to_string()))),
                }
            }
            other => other,
        };
        // SAFETY: the caller's guarantees pass through unchanged.
        unsafe { self.inner.submit(op) }
    }
}

impl Device for Failing {
    fn info(&self) -> &DeviceInfo {
        self.inner.info()
    }
    fn alloc(&self, bytes: usize) -> Result<Buffer, DeviceError> {
        self.inner.alloc(bytes)
    }
    fn new_stream(&self) -> Result<Stream, DeviceError> {
        let s = self.inner.new_stream()?;
        let raw = FailingStream {
            inner: s.raw().clone(),
            copies: AtomicUsize::new(0),
            fail_at: self.fail_at,
            after_wait: Default::default(),
            silent_until: self.silent_until.clone(),
        };
        Ok(Stream::with_policy(Arc::new(raw), s.wait_policy()))
    }
    fn supports(&self, op: &Op, dtype: DType) -> bool {
        self.inner.supports(op, dtype)
    }
}

#[test]
fn a_device_failing_mid_gate_fails_the_run_on_every_device() {
    let poll = WaitPolicy::Poll { bound: Duration::from_secs(3600) };
    for policy in [WaitPolicy::Block, poll] {
        let mut inner = cpus(2, policy);
        inner[1] = Arc::new(Failing { inner: inner[1].clone(), fail_at: 1, silent_until: None });
        let start = Instant::now();
        let err = compute(inner, &[], policy).expect_err("the lost device fails the computation");
        let text = err.to_string();
        assert!(text.contains("device lost in the middle of a gate"), "{policy:?}: {text}");
        assert!(start.elapsed() < Duration::from_secs(20), "{policy:?}: took {:?}", start.elapsed());
        eprintln!("{policy:?}: failed in {:?}: {text}", start.elapsed());
    }
}

/// A device that goes silent in the middle of a gate (it stops, with no
/// error) fails the gate on the other devices with `TimedOut`, naming the
/// point they waited on, once the composite's wait deadline has passed:
/// under the policies that never time out by themselves too.
#[test]
fn a_device_going_silent_mid_gate_times_out_the_gate() {
    let spin = WaitPolicy::SpinThenBlock { spin: Duration::from_micros(50) };
    for policy in [WaitPolicy::Block, spin] {
        let host = baton_core::sync::HostTimeline::new("resume");
        let resume = host.reserve();
        let mut inner = cpus(2, policy);
        let silent = Failing { inner: inner[1].clone(), fail_at: 1, silent_until: Some(resume.point()) };
        inner[1] = Arc::new(silent);
        let deadline = Duration::from_millis(300);
        let device = CompositeDevice::new(inner, policy).expect("composite").with_wait_deadline(Some(deadline));
        let start = Instant::now();
        let err = compute_with(device, &[]).expect_err("a silent peer fails the gate");
        let took = start.elapsed();
        let text = err.to_string();
        assert!(text.contains("timed out"), "{policy:?}: expected a timeout, got {text}");
        assert!(text.contains("cpu:1/stream-"), "{policy:?}: the point of the silent device is named: {text}");
        assert!(took >= deadline && took < Duration::from_secs(20), "{policy:?}: failed after {took:?}");
        eprintln!("{policy:?}: failed in {took:?}: {text}");
        resume.signal();
    }
}

#[test]
fn every_inner_stream_reports_the_failure() {
    let mut inner = cpus(2, WaitPolicy::Block);
    inner[1] = Arc::new(Failing { inner: inner[1].clone(), fail_at: 1, silent_until: None });
    let device = CompositeDevice::new(inner, WaitPolicy::Block).expect("composite");
    let s = device.new_stream().expect("stream");
    let a = device.alloc_tensor(DType::F32, &[16]).expect("a");
    let b = device.alloc_tensor(DType::F32, &[16]).expect("b");
    // A mirrored copy: every device copies its part; device 1's copy fails.
    let done = s.copy(&a, &b, None).expect("queued");
    let failure = done.wait_timeout(Duration::from_secs(20)).expect_err("fails");
    assert!(failure.to_string().contains("device lost"), "{failure}");
    let later = s.write_async(&a, vec![0f32; 16]);
    assert!(later.is_err(), "the composite stream is failed for later work");
    let failures = device.inner_failures();
    assert_eq!(failures.len(), 2);
    for (stream, failure) in failures {
        let cause = failure.unwrap_or_else(|| panic!("{stream} did not fail"));
        assert!(cause.message().contains("device lost"), "{stream}: {cause}");
    }
}
