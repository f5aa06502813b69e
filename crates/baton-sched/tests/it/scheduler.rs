//! The scheduler against sequential execution on one device: every result
//! bit-exact (the same kernels run the same ops), over random graphs, random
//! device assignments, several splits per device, and 1, 2 or 4 runs in
//! flight whose inputs and outputs are reused between runs.

use std::collections::HashMap;
use std::sync::Arc;

use baton_core::backend::{Bindings, Device, IntoDevice, Stream, TensorRef};
use baton_core::graph::{Flags, Graph, NodeId};
use baton_core::DType;
use baton_sched::{Plan, Runner};

const WIDTH: usize = 24;
const ROWS: usize = 5;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn values(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| (self.next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5).collect()
    }
}

/// A random graph over `x [ROWS, WIDTH]` with weights, every node in a
/// random placement group; returns it with its weight values.
fn random_graph(rng: &mut Rng, groups: u32) -> (Graph, HashMap<String, Vec<f32>>) {
    let mut g = Graph::new();
    let mut weights = HashMap::new();
    g.set_group(Some(0));
    let x = g.leaf("x", DType::F32, &[ROWS, WIDTH], Flags::INPUT).expect("leaf");
    let mut live = vec![x];
    for i in 0..12 {
        g.set_group(Some(rng.below(groups as usize) as u32));
        let a = live[rng.below(live.len())];
        let b = live[rng.below(live.len())];
        let node = match rng.below(6) {
            0 => g.add(a, b),
            1 => g.mul(a, b),
            2 => g.scale(a, 0.5),
            3 => g.silu(a),
            4 => g.rms_norm(a, 1e-5),
            _ => {
                let name = format!("w{i}");
                weights.insert(name.clone(), rng.values(WIDTH * WIDTH));
                let w = g.leaf(&name, DType::F32, &[WIDTH, WIDTH], Flags::WEIGHT).expect("leaf");
                g.matmul(a, w)
            }
        }
        .expect("op");
        live.push(node);
    }
    let out = *live.last().expect("nodes");
    let second = live[live.len() / 2];
    g.set_group(None);
    let y = g.add(out, second).expect("add");
    g.mark(y, Flags::OUTPUT).expect("mark");
    g.set_name(y, "y").expect("name");
    (g, weights)
}

fn open(names: &[&str]) -> Vec<Arc<dyn Device>> {
    baton_cpu::open(names).expect("devices").into_iter().map(IntoDevice::into_device).collect()
}

fn upload(stream: &Stream, device: &Arc<dyn Device>, values: &[f32], dims: &[usize]) -> TensorRef {
    let t = device.alloc_tensor(DType::F32, dims).expect("alloc");
    stream.write_async(&t, values.to_vec()).expect("write").wait().expect("write");
    t
}

/// Plain sequential execution on one device.
fn sequential(graph: &Arc<Graph>, weights: &HashMap<String, Vec<f32>>, inputs: &[Vec<f32>]) -> Vec<Vec<f32>> {
    let device = open(&["cpu"]).remove(0);
    let s = device.new_stream().expect("stream");
    let mut out = Vec::new();
    for x in inputs {
        let mut b = Bindings::new(graph);
        for (name, w) in weights {
            b.bind_name(name, upload(&s, &device, w, &[WIDTH, WIDTH])).expect("bind");
        }
        b.bind_name("x", upload(&s, &device, x, &[ROWS, WIDTH])).expect("bind");
        let y = device.alloc_tensor(DType::F32, &[ROWS, WIDTH]).expect("y");
        b.bind_name("y", y.clone()).expect("bind");
        s.compute(b).expect("compute");
        out.push(s.read_into_async(&y, vec![0f32; ROWS * WIDTH]).expect("read").wait().expect("read"));
    }
    out
}

/// The same runs through the scheduler on `cpu:0,cpu:1` with `copies` runs
/// in flight; the caller's input and output buffers are reused by every
/// run: each run's input is written after the previous run that used that
/// buffer is done with it (its point), each output is read at its own point.
fn scheduled(
    graph: &Arc<Graph>,
    weights: &HashMap<String, Vec<f32>>,
    inputs: &[Vec<f32>],
    groups: &[usize],
    copies: usize,
) -> (Vec<Vec<f32>>, usize) {
    scheduled_on(open(&["cpu:0", "cpu:1"]), graph, weights, inputs, groups, copies)
}

fn scheduled_on(
    devices: Vec<Arc<dyn Device>>,
    graph: &Arc<Graph>,
    weights: &HashMap<String, Vec<f32>>,
    inputs: &[Vec<f32>],
    groups: &[usize],
    copies: usize,
) -> (Vec<Vec<f32>>, usize) {
    let mut runner = Runner::new(devices.clone(), copies).expect("runner");
    // Weights live on the device of their group.
    let mut bound: HashMap<String, TensorRef> = HashMap::new();
    for node in graph.nodes() {
        if let (Some(name), Some(group)) = (&node.name, node.group) {
            if let Some(w) = weights.get(name) {
                let d = groups[group as usize];
                bound.insert(name.clone(), upload(runner.stream(d), &devices[d], w, &[WIDTH, WIDTH]));
            }
        }
    }
    let group_of_y = graph.node(graph.find("y").expect("y")).group;
    let plan = Plan::new(graph.clone(), &runner, &|g| Some(groups[g as usize]), &|id: NodeId| {
        let name = graph.node(id).name.as_deref()?;
        if name == "x" {
            return Some(0);
        }
        bound.get(name).map(|t| if t.buffer().device() == "cpu:0" { 0 } else { 1 })
    })
    .expect("plan");
    let y_device = plan.splits.iter().find(|s| !s.outputs.is_empty()).expect("the output's split").device;
    let _ = group_of_y;
    // `copies` input and output buffers, reused round-robin.
    let xs: Vec<TensorRef> =
        (0..copies).map(|_| devices[0].alloc_tensor(DType::F32, &[ROWS, WIDTH]).expect("x")).collect();
    let ys: Vec<TensorRef> =
        (0..copies).map(|_| devices[y_device].alloc_tensor(DType::F32, &[ROWS, WIDTH]).expect("y")).collect();
    let mut reads = Vec::new();
    let mut host = vec![0f32; ROWS * WIDTH];
    let mut last_readers: Vec<Vec<baton_core::SyncPoint>> = vec![Vec::new(); copies];
    for (r, x) in inputs.iter().enumerate() {
        let slot = r % copies;
        host.copy_from_slice(x);
        // The previous run that used this input buffer may still read it.
        for p in &last_readers[slot] {
            runner.stream(0).wait_or_relay(p, runner.stream(0).wait_policy()).expect("wait");
        }
        let write = runner.stream(0).write_async(&xs[slot], host).expect("write");
        let (xt, yt) = (xs[slot].clone(), ys[slot].clone());
        let bind = |id: NodeId| -> Option<TensorRef> {
            match graph.node(id).name.as_deref()? {
                "x" => Some(xt.clone()),
                "y" => Some(yt.clone()),
                name => bound.get(name).cloned(),
            }
        };
        let ready = write.point().clone();
        last_readers[slot] = runner.submit(&plan, &bind, Some(&ready)).expect("submit").inputs_read;
        host = write.wait().expect("the input buffer comes back");
        reads.push(runner.stream(y_device).read_into_async(&ys[slot], vec![0f32; ROWS * WIDTH]).expect("read"));
    }
    let out = reads.into_iter().map(|r| r.wait().expect("read")).collect();
    let implicit: u64 = (0..2).map(|d| runner.stream(d).implicit_waits()).sum();
    (out, implicit as usize)
}

#[test]
fn random_graphs_over_random_devices_match_sequential_execution() {
    let mut rng = Rng(0x5eed_cafe);
    for case in 0..24 {
        let groups_n = 2 + rng.below(3) as u32;
        let (graph, weights) = random_graph(&mut rng, groups_n);
        let graph = Arc::new(graph);
        let groups: Vec<usize> = (0..groups_n).map(|_| rng.below(2)).collect();
        let inputs: Vec<Vec<f32>> = (0..6).map(|_| rng.values(ROWS * WIDTH)).collect();
        let expected = sequential(&graph, &weights, &inputs);
        for copies in [1, 2, 4] {
            let (got, implicit) = scheduled(&graph, &weights, &inputs, &groups, copies);
            assert_eq!(got, expected, "case {case}: groups {groups:?}, {copies} copies");
            assert_eq!(implicit, 0, "case {case}: the scheduler ordered every access itself");
        }
    }
}

#[test]
fn several_splits_per_device_with_prefetched_inputs() {
    // Groups alternate devices: 0, 1, 0, 1 -> four splits, two per device,
    // each reading crossings from the other.
    let (graph, weights, inputs, expected) = alternating_case(42, 8);
    for copies in [1, 2, 4] {
        let (got, implicit) = scheduled(&graph, &weights, &inputs, &ALTERNATING, copies);
        assert_eq!(got, expected, "{copies} copies");
        assert_eq!(implicit, 0);
    }
}

/// The same random graphs with every queued item delayed by a seeded random
/// amount (the chaos wrapper): results stay bit-exact and the scheduler
/// still orders every access itself. A failure names its seed.
#[test]
fn random_graphs_under_chaos_match_sequential_execution() {
    let seeds = baton_conformance::chaos::seed_count(6);
    for seed in 0..seeds {
        let mut rng = Rng(0xc4a0_5eed ^ (seed + 1));
        let groups_n = 2 + rng.below(3) as u32;
        let (graph, weights) = random_graph(&mut rng, groups_n);
        let graph = Arc::new(graph);
        let groups: Vec<usize> = (0..groups_n).map(|_| rng.below(2)).collect();
        let inputs: Vec<Vec<f32>> = (0..5).map(|_| rng.values(ROWS * WIDTH)).collect();
        let expected = sequential(&graph, &weights, &inputs);
        for copies in [1, 2] {
            let devices =
                baton_conformance::chaos::wrap(open(&["cpu:0", "cpu:1"]), seed, std::time::Duration::from_micros(300));
            let (got, implicit) = scheduled_on(devices, &graph, &weights, &inputs, &groups, copies);
            assert_eq!(got, expected, "chaos seed {seed}: groups {groups:?}, {copies} copies");
            assert_eq!(implicit, 0, "chaos seed {seed}: the scheduler left an access unordered");
        }
    }
}

/// A residual chain whose four steps alternate devices (groups 0, 1, 0, 1).
fn alternating_graph(rng: &mut Rng) -> (Arc<Graph>, HashMap<String, Vec<f32>>) {
    let mut g = Graph::new();
    let mut weights = HashMap::new();
    g.set_group(Some(0));
    let x = g.leaf("x", DType::F32, &[ROWS, WIDTH], Flags::INPUT).expect("leaf");
    let mut cur = x;
    for i in 0..4u32 {
        g.set_group(Some(i));
        let name = format!("w{i}");
        weights.insert(name.clone(), rng.values(WIDTH * WIDTH));
        let w = g.leaf(&name, DType::F32, &[WIDTH, WIDTH], Flags::WEIGHT).expect("leaf");
        let m = g.matmul(cur, w).expect("matmul");
        cur = g.add(m, cur).expect("residual");
    }
    g.mark(cur, Flags::OUTPUT).expect("mark");
    g.set_name(cur, "y").expect("name");
    (Arc::new(g), weights)
}

const ALTERNATING: [usize; 4] = [0, 1, 0, 1];

/// The alternating graph, `runs` random inputs, and their results by
/// sequential execution on one device.
#[allow(clippy::type_complexity)]
fn alternating_case(seed: u64, runs: usize) -> (Arc<Graph>, HashMap<String, Vec<f32>>, Vec<Vec<f32>>, Vec<Vec<f32>>) {
    let mut rng = Rng(seed);
    let (graph, weights) = alternating_graph(&mut rng);
    let inputs: Vec<Vec<f32>> = (0..runs).map(|_| rng.values(ROWS * WIDTH)).collect();
    let expected = sequential(&graph, &weights, &inputs);
    (graph, weights, inputs, expected)
}

/// A runner on cpu:0,cpu:1 with the alternating graph's weights, a plan,
/// one input and output buffer per run, and every stream held at a host
/// gate (signal it to start).
struct Rig {
    runner: Runner,
    plan: Plan,
    bound: HashMap<String, TensorRef>,
    xs: Vec<TensorRef>,
    ys: Vec<TensorRef>,
    y_device: usize,
    gate: Option<baton_core::sync::Release>,
}

impl Rig {
    fn new(graph: &Arc<Graph>, weights: &HashMap<String, Vec<f32>>, inputs: &[Vec<f32>], copies: usize) -> Rig {
        let devices = open(&["cpu:0", "cpu:1"]);
        let mut runner = Runner::new(devices.clone(), copies).expect("runner");
        runner.set_max_in_flight(inputs.len());
        let mut bound: HashMap<String, TensorRef> = HashMap::new();
        for (i, d) in ALTERNATING.iter().enumerate() {
            let name = format!("w{i}");
            bound.insert(name.clone(), upload(runner.stream(*d), &devices[*d], &weights[&name], &[WIDTH, WIDTH]));
        }
        let xs: Vec<TensorRef> =
            inputs.iter().map(|x| upload(runner.stream(0), &devices[0], x, &[ROWS, WIDTH])).collect();
        let plan = Plan::new(graph.clone(), &runner, &|g| Some(ALTERNATING[g as usize]), &|id: NodeId| match graph
            .node(id)
            .name
            .as_deref()?
        {
            "x" => Some(0),
            name => bound.get(name).map(|t| usize::from(t.buffer().device() == "cpu:1")),
        })
        .expect("plan");
        let y_device = plan.splits.last().expect("splits").device;
        let ys =
            (0..inputs.len()).map(|_| devices[y_device].alloc_tensor(DType::F32, &[ROWS, WIDTH]).expect("y")).collect();
        let host = baton_core::sync::HostTimeline::new("rig-gate");
        let gate = host.reserve();
        for d in 0..2 {
            runner.stream(d).wait(&gate.point()).expect("gate");
        }
        Rig { runner, plan, bound, xs, ys, y_device, gate: Some(gate) }
    }

    fn submit(&mut self, r: usize) -> baton_sched::Run {
        let graph = self.plan.graph.clone();
        let (xt, yt, bound) = (self.xs[r].clone(), self.ys[r].clone(), &self.bound);
        let bind = |id: NodeId| -> Option<TensorRef> {
            match graph.node(id).name.as_deref()? {
                "x" => Some(xt.clone()),
                "y" => Some(yt.clone()),
                name => bound.get(name).cloned(),
            }
        };
        self.runner.submit_run(&self.plan, &bind, None).expect("submit")
    }

    fn read(&self, r: usize) -> baton_core::backend::Pending<Vec<f32>> {
        self.runner.stream(self.y_device).read_into_async(&self.ys[r], vec![0f32; ROWS * WIDTH]).expect("read")
    }

    /// Lets the streams start.
    fn open_gate(&mut self) {
        if let Some(g) = self.gate.take() {
            g.signal();
        }
    }

    /// Fails the gate: both streams fail with its cause.
    fn fail_gate(&mut self, message: &str) {
        if let Some(g) = self.gate.take() {
            g.fail(message);
        }
    }

    fn implicit_waits(&self) -> u64 {
        (0..2).map(|d| self.runner.stream(d).implicit_waits()).sum()
    }

    /// The sanitizer's reports of both streams.
    fn reports(&self) -> Vec<baton_core::backend::HazardReport> {
        (0..2).flat_map(|d| self.runner.stream(d).hazard_reports()).collect()
    }
}

/// The mutation check of issue 5: leave out, one at a time, each wait the
/// scheduler queues, and count how many removals the streams' hazard
/// tracking (the always-on sanitizer) catches. All streams are held at a
/// host gate until every run is submitted, so no point is reached early and
/// a missing order cannot hide behind timing.
#[test]
fn every_wait_the_scheduler_inserts_is_needed_and_caught_when_removed() {
    let (graph, weights, inputs, expected) = alternating_case(7, 3);
    // Returns (outputs, sanitizer reports, waits per run).
    let attempt = |copies: usize, leave_out: Option<u64>| -> (Vec<Vec<f32>>, usize, u64) {
        let mut rig = Rig::new(&graph, &weights, &inputs, copies);
        rig.runner.leave_out_wait(leave_out);
        let mut reads = Vec::new();
        let mut runs = Vec::new();
        for r in 0..inputs.len() {
            runs.push(rig.submit(r));
            reads.push(rig.read(r));
        }
        let waits = rig.runner.stats().last_run_waits;
        let reports = rig.reports();
        assert_eq!(reports.is_empty(), rig.implicit_waits() == 0, "a wait is inserted exactly when a race is reported");
        for r in &reports {
            assert_ne!(r.earlier.stream, r.later.stream, "a report names two streams: {r}");
        }
        let implicit = reports.len();
        rig.open_gate();
        (reads.into_iter().map(|r| r.wait().expect("read")).collect(), implicit, waits)
    };
    for copies in [1, 2] {
        let (got, implicit, waits) = attempt(copies, None);
        assert_eq!(got, expected);
        assert_eq!(implicit, 0, "{copies} copies: the scheduler orders everything itself");
        assert!(waits > 0, "the plan crosses devices, so the scheduler waits");
        let mut caught = 0;
        for i in 0..waits {
            let (got, implicit, _) = attempt(copies, Some(i));
            assert_eq!(got, expected, "{copies} copies, wait {i} removed: the tracking kept the results right");
            if implicit > 0 {
                caught += 1;
            }
        }
        println!("{copies} copies: {caught} of {waits} removed waits reported by the sanitizer");
        assert_eq!(caught, waits, "{copies} copies: a removed wait went unnoticed (a redundant wait or a blind spot)");
    }
}

/// A run cancelled while K runs are in flight fails its waiters at once;
/// the others, and a run submitted after, finish with the right results.
#[test]
fn a_cancelled_run_fails_at_once_and_the_others_finish_right() {
    use baton_core::sync::{FailureKind, WaitError};
    let (graph, weights, inputs, expected) = alternating_case(9, 5);
    let mut rig = Rig::new(&graph, &weights, &inputs, 4);
    let mut runs: Vec<Option<baton_sched::Run>> = (0..4).map(|r| Some(rig.submit(r))).collect();
    let cancelled_point = runs[1].as_ref().expect("run 1").point().clone();
    if let Some(run) = runs[1].take() {
        run.cancel();
    }
    match cancelled_point.wait_timeout(std::time::Duration::from_secs(20)) {
        Err(WaitError::Failed { cause, .. }) => assert_eq!(cause.kind(), FailureKind::Abandoned),
        other => panic!("a waiter of the cancelled run must fail at once, got {other:?}"),
    }
    rig.open_gate();
    for (r, run) in runs.iter().enumerate() {
        if let Some(run) = run {
            run.wait().expect("an uncancelled run finishes");
            assert_eq!(rig.read(r).wait().expect("read"), expected[r], "run {r}");
        }
    }
    let later = rig.submit(4);
    let y = later.output("y").expect("y is an output").clone();
    assert!(later.output("x").is_none(), "x is not an output");
    y.wait().expect("the output's own point");
    later.wait().expect("a later run is unaffected");
    assert_eq!(rig.read(4).wait().expect("read"), expected[4]);
    assert_eq!(rig.implicit_waits(), 0);
}

/// A run whose streams fail fails its own point at once, with the streams'
/// first cause, while the caller still holds the `Run` (not only once it is
/// dropped).
#[test]
fn a_failed_run_fails_its_point_at_once_with_the_first_cause() {
    use baton_core::sync::{FailureKind, WaitError};
    let (graph, weights, inputs, _) = alternating_case(11, 2);
    let mut rig = Rig::new(&graph, &weights, &inputs, 2);
    let run = rig.submit(0);
    rig.fail_gate("the device stopped");
    for (what, point) in
        [("run.point()", run.point().clone()), ("the output's point", run.output("y").expect("y").clone())]
    {
        match point.wait_timeout(std::time::Duration::from_secs(20)) {
            Err(WaitError::Failed { cause, .. }) => {
                assert_eq!(cause.kind(), FailureKind::WorkFailed, "{what}: {cause}");
                assert!(cause.message().contains("the device stopped"), "{what}: the first cause, got {cause}");
            }
            other => panic!("{what} of a failed run must fail at once, got {other:?}"),
        }
    }
    assert!(run.wait().is_err(), "waiting on a failed run is an error");
}

/// The fallback paths, forced by the chaos wrapper: streams that cannot wait
/// natively on other streams' points are bridged by the core's relay, and
/// devices that cannot address each other's memory copy through host memory,
/// with the same results.
#[test]
fn random_graphs_through_the_fallback_paths_match_sequential_execution() {
    // The wrapper really refuses native waits, and the relay bridges them.
    let relay = baton_conformance::chaos::Fallbacks { no_native_waits: true, no_foreign_access: false };
    let devices = baton_conformance::chaos::wrap_with(open(&["cpu:0", "cpu:1"]), 0, std::time::Duration::ZERO, relay);
    let (s0, s1) = (devices[0].new_stream().expect("stream"), devices[1].new_stream().expect("stream"));
    let p = s0.host_fn(|| Ok(())).expect("host fn");
    assert!(matches!(s1.wait(&p), Err(baton_core::StreamError::ForeignPoint { .. })));
    assert!(s1.wait_or_relay(&p, s1.wait_policy()).expect("relay"), "the relay was used");
    s1.synchronize().expect("the relayed wait completes");
    // ... and without foreign access, copies stage through host memory.
    let staged = baton_conformance::chaos::Fallbacks { no_native_waits: false, no_foreign_access: true };
    let devices = baton_conformance::chaos::wrap_with(open(&["cpu:0", "cpu:1"]), 0, std::time::Duration::ZERO, staged);
    let (s0, s1) = (devices[0].new_stream().expect("stream"), devices[1].new_stream().expect("stream"));
    let src = upload(&s0, &devices[0], &[1.0, 2.0, 3.0, 4.0], &[4]);
    let dst = devices[1].alloc_tensor(DType::F32, &[4]).expect("dst");
    assert!(matches!(s1.copy(&src, &dst, None), Err(baton_core::StreamError::InaccessibleBuffer { .. })));
    s1.copy_staged(&s0, &src, &dst, None).expect("staged copy");
    assert_eq!(s1.read_into_async(&dst, vec![0f32; 4]).expect("read").wait().expect("read"), vec![1.0, 2.0, 3.0, 4.0]);
    for seed in 0..baton_conformance::chaos::seed_count(4) {
        let mut rng = Rng(0x7e1a_0000 ^ (seed + 1));
        let groups_n = 2 + rng.below(3) as u32;
        let (graph, weights) = random_graph(&mut rng, groups_n);
        let graph = Arc::new(graph);
        let groups: Vec<usize> = (0..groups_n).map(|_| rng.below(2)).collect();
        let inputs: Vec<Vec<f32>> = (0..4).map(|_| rng.values(ROWS * WIDTH)).collect();
        let expected = sequential(&graph, &weights, &inputs);
        // Both fallbacks at once on odd seeds: relayed waits and copies
        // staged through host memory.
        let fallbacks = baton_conformance::chaos::Fallbacks { no_native_waits: true, no_foreign_access: seed % 2 == 1 };
        let devices = baton_conformance::chaos::wrap_with(
            open(&["cpu:0", "cpu:1"]),
            seed,
            std::time::Duration::from_micros(100),
            fallbacks,
        );
        let (got, implicit) = scheduled_on(devices, &graph, &weights, &inputs, &groups, 2);
        assert_eq!(got, expected, "relay, seed {seed}: groups {groups:?}");
        assert_eq!(implicit, 0, "relay, seed {seed}");
    }
}

/// The plan names the path each cross-device edge takes, as the streams
/// decide it (`Stream::wait_path`, `Stream::copy_path`): a native wait and a
/// direct copy between CPU devices; the relay and host staging where the
/// chaos wrapper refuses native waits and foreign memory.
#[test]
fn the_plan_names_the_path_each_cross_device_edge_takes() {
    use baton_core::backend::{CopyPath, WaitPath};
    use baton_sched::{EdgePath, SyncPath};
    let (graph, _) = alternating_graph(&mut Rng(7));
    for (no_native_waits, no_foreign_access) in [(false, false), (true, false), (false, true), (true, true)] {
        let fallbacks = baton_conformance::chaos::Fallbacks { no_native_waits, no_foreign_access };
        let devices =
            baton_conformance::chaos::wrap_with(open(&["cpu:0", "cpu:1"]), 0, std::time::Duration::ZERO, fallbacks);
        let runner = Runner::new(devices, 1).expect("runner");
        let plan = Plan::new(graph.clone(), &runner, &|g| Some(ALTERNATING[g as usize]), &|id: NodeId| match graph
            .node(id)
            .name
            .as_deref()?
        {
            "x" => Some(0),
            name => name.strip_prefix('w')?.parse::<usize>().ok().map(|i| ALTERNATING[i]),
        })
        .expect("plan");
        let expected = EdgePath {
            wait: if no_native_waits { WaitPath::Relay } else { WaitPath::Native },
            copy: if no_foreign_access { CopyPath::HostStaged } else { CopyPath::Direct },
        };
        let crossing: Vec<SyncPath> =
            plan.copies.iter().map(|c| c.path).filter(|p| *p != SyncPath::StreamOrder).collect();
        assert_eq!(crossing.len(), 3, "the alternating chain crosses three times: {plan}");
        assert!(crossing.iter().all(|p| *p == SyncPath::CrossDevice(expected)), "{fallbacks:?}: {crossing:?}");
        let text = plan.to_string();
        let (wait, copy) = (expected.wait.to_string(), expected.copy.to_string());
        assert!(text.contains(&wait) && text.contains(&copy), "{fallbacks:?}: {wait}, {copy} in\n{text}");
    }
}
