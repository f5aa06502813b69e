//! The scheduler against sequential execution on one device: every result
//! bit-exact (the same kernels run the same ops), over random graphs, random
//! device assignments, several splits per device, and 1, 2 or 4 runs in
//! flight whose inputs and outputs are reused between runs.

use std::collections::HashMap;
use std::sync::Arc;

use baton_core::backend::{Bindings, Device, Stream, TensorRef};
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
    baton_cpu::open(names, None).expect("devices").into_iter().map(|d| d as Arc<dyn Device>).collect()
}

fn upload(stream: &Stream, device: &Arc<dyn Device>, values: &[f32], dims: &[usize]) -> TensorRef {
    let t = TensorRef::new(&device.alloc(values.len() * 4).expect("alloc"), 0, DType::F32, dims).expect("tensor");
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
            b.bind_name(graph, name, upload(&s, &device, w, &[WIDTH, WIDTH])).expect("bind");
        }
        b.bind_name(graph, "x", upload(&s, &device, x, &[ROWS, WIDTH])).expect("bind");
        let y =
            TensorRef::new(&device.alloc(ROWS * WIDTH * 4).expect("alloc"), 0, DType::F32, &[ROWS, WIDTH]).expect("y");
        b.bind_name(graph, "y", y.clone()).expect("bind");
        s.compute(graph, b).expect("compute");
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
    let names = vec!["cpu:0".to_string(), "cpu:1".to_string()];
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
    let plan = Plan::new(graph.clone(), names, &|g| Some(groups[g as usize]), &|id: NodeId| {
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
    let xs: Vec<TensorRef> = (0..copies)
        .map(|_| {
            TensorRef::new(&devices[0].alloc(ROWS * WIDTH * 4).expect("alloc"), 0, DType::F32, &[ROWS, WIDTH])
                .expect("x")
        })
        .collect();
    let ys: Vec<TensorRef> = (0..copies)
        .map(|_| {
            TensorRef::new(&devices[y_device].alloc(ROWS * WIDTH * 4).expect("alloc"), 0, DType::F32, &[ROWS, WIDTH])
                .expect("y")
        })
        .collect();
    let mut reads = Vec::new();
    let mut host = vec![0f32; ROWS * WIDTH];
    let mut last_readers: Vec<Vec<baton_core::SyncPoint>> = vec![Vec::new(); copies];
    for (r, x) in inputs.iter().enumerate() {
        let slot = r % copies;
        host.copy_from_slice(x);
        // The previous run that used this input buffer may still read it.
        for p in &last_readers[slot] {
            runner.stream(0).wait(p).expect("wait");
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
    // Groups alternate devices: 0, 1, 0, 1 -> at least four splits, two per
    // device, each reading crossings from the other.
    let mut rng = Rng(42);
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
        let n = g.rms_norm(m, 1e-5).expect("norm");
        cur = g.add(n, cur).expect("residual");
    }
    g.mark(cur, Flags::OUTPUT).expect("mark");
    g.set_name(cur, "y").expect("name");
    let graph = Arc::new(g);
    let inputs: Vec<Vec<f32>> = (0..8).map(|_| rng.values(ROWS * WIDTH)).collect();
    let expected = sequential(&graph, &weights, &inputs);
    for copies in [1, 2, 4] {
        let (got, implicit) = scheduled(&graph, &weights, &inputs, &[0, 1, 0, 1], copies);
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

/// The mutation check of issue 5: leave out, one at a time, each wait the
/// scheduler queues, and count how many removals the streams' hazard
/// tracking (the always-on sanitizer) catches. All streams are held at a
/// host gate until every run is submitted, so no point is reached early and
/// a missing order cannot hide behind timing.
#[test]
fn every_wait_the_scheduler_inserts_is_needed_and_caught_when_removed() {
    use baton_core::sync::HostTimeline;
    let mut rng = Rng(7);
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
    let graph = Arc::new(g);
    let groups = [0usize, 1, 0, 1];
    let runs = 3;
    let inputs: Vec<Vec<f32>> = (0..runs).map(|_| rng.values(ROWS * WIDTH)).collect();
    let expected = sequential(&graph, &weights, &inputs);
    // Returns (outputs, implicit waits, waits per run).
    let attempt = |copies: usize, leave_out: Option<u64>| -> (Vec<Vec<f32>>, u64, u64) {
        let devices = open(&["cpu:0", "cpu:1"]);
        let mut runner = Runner::new(devices.clone(), copies).expect("runner");
        runner.set_max_in_flight(runs);
        runner.leave_out_wait(leave_out);
        let mut bound: HashMap<String, TensorRef> = HashMap::new();
        for (i, name) in ["w0", "w1", "w2", "w3"].iter().enumerate() {
            let d = groups[i];
            bound.insert(name.to_string(), upload(runner.stream(d), &devices[d], &weights[*name], &[WIDTH, WIDTH]));
        }
        let xs: Vec<TensorRef> =
            inputs.iter().map(|x| upload(runner.stream(0), &devices[0], x, &[ROWS, WIDTH])).collect();
        let plan = Plan::new(
            graph.clone(),
            vec!["cpu:0".into(), "cpu:1".into()],
            &|g| Some(groups[g as usize]),
            &|id: NodeId| match graph.node(id).name.as_deref()? {
                "x" => Some(0),
                name => bound.get(name).map(|t| usize::from(t.buffer().device() == "cpu:1")),
            },
        )
        .expect("plan");
        let y_device = plan.splits.last().expect("splits").device;
        let ys: Vec<TensorRef> = (0..runs)
            .map(|_| {
                TensorRef::new(
                    &devices[y_device].alloc(ROWS * WIDTH * 4).expect("alloc"),
                    0,
                    DType::F32,
                    &[ROWS, WIDTH],
                )
                .expect("y")
            })
            .collect();
        let host = HostTimeline::new("mutation-gate");
        let gate = host.reserve();
        for d in 0..2 {
            runner.stream(d).wait(&gate.point()).expect("gate");
        }
        let mut reads = Vec::new();
        for r in 0..runs {
            let (xt, yt) = (xs[r].clone(), ys[r].clone());
            let bind = |id: NodeId| -> Option<TensorRef> {
                match graph.node(id).name.as_deref()? {
                    "x" => Some(xt.clone()),
                    "y" => Some(yt.clone()),
                    name => bound.get(name).cloned(),
                }
            };
            runner.submit(&plan, &bind, None).expect("submit");
            reads.push(runner.stream(y_device).read_into_async(&ys[r], vec![0f32; ROWS * WIDTH]).expect("read"));
        }
        let waits = runner.stats().last_run_waits;
        let implicit = (0..2).map(|d| runner.stream(d).implicit_waits()).sum();
        gate.signal();
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
        println!("{copies} copies: {caught} of {waits} removed waits caught by the hazard tracking");
        assert_eq!(caught, waits, "{copies} copies: a removed wait went unnoticed (a redundant wait or a blind spot)");
    }
}
