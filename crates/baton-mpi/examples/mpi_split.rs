//! A plan split over ranks (SPMD, one device per rank), against the same
//! plan over as many devices in one process: every output bit for bit.
//! Launched by `scripts/test-mpi.sh` under `scripts/mpirun.sh -np 2` and
//! `-np 3`: `mpi_split` prints `rank R: split ok (...)` or exits non-zero
//! with what differed.
//!
//! The graph's groups alternate over the ranks (0, 1, .., 0, 1, ..), so
//! activations cross ranks in both directions several times a run, and the
//! input `x` (bound on rank 0's device) is read by a group of every rank
//! (a caller's tensor crossing ranks). Each rank uploads only the weights
//! of its own groups; 1 and 2 runs are in flight, with the input and
//! output buffers reused between runs. Rank 0 submits 600 ms late: the
//! other ranks' first submission must return within half of that (their
//! streams wait on the receives, not their hosts).

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_core::backend::{Device, IntoDevice};
use baton_core::graph::{Flags, Graph, NodeId};
use baton_core::{DType, SyncPoint, TensorRef};
use baton_mpi::{RankEdges, RemoteDevice, World};
use baton_sched::{Plan, RemoteEdges, Runner};

const WIDTH: usize = 32;
const ROWS: usize = 3;
const GROUPS: u32 = 6;
const RUNS: usize = 5;
/// How late rank 0 submits.
const LATE: Duration = Duration::from_millis(600);

type Check = Result<(), String>;

/// Reproducible values in [-0.5, 0.5).
fn values(seed: u64, n: usize) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect()
}

/// Each group: `h = rms_norm(silu(h @ w_g) + x)`; the output `y` is the
/// last group's.
fn graph() -> Graph {
    let mut g = Graph::new();
    g.set_group(Some(0));
    let x = g.leaf("x", DType::F32, &[ROWS, WIDTH], Flags::INPUT).expect("leaf");
    let mut h = x;
    for group in 0..GROUPS {
        g.set_group(Some(group));
        let w = g.leaf(&format!("w{group}"), DType::F32, &[WIDTH, WIDTH], Flags::WEIGHT).expect("leaf");
        let m = g.matmul(h, w).expect("matmul");
        let s = g.silu(m).expect("silu");
        let a = g.add(s, x).expect("add");
        h = g.rms_norm(a, 1e-5).expect("norm");
    }
    g.mark(h, Flags::OUTPUT).expect("mark");
    g.set_name(h, "y").expect("name");
    g
}

/// What one pass of the runs gave: the outputs where this process computes
/// them (`None` elsewhere), and how long the host spent in the first
/// `submit`.
type Outcome = (Option<Vec<Vec<f32>>>, Duration);

/// Runs `RUNS` inputs through the plan with `copies` in flight, after
/// sleeping `late` before the first submission.
fn run(
    devices: Vec<Arc<dyn Device>>,
    edges: impl FnOnce(&Runner) -> Result<Option<Arc<dyn RemoteEdges>>, String>,
    copies: usize,
    late: Duration,
) -> Result<Outcome, String> {
    let graph = Arc::new(graph());
    let n = devices.len();
    let group_device = |g: u32| g as usize % n;
    let mut runner = Runner::new(devices.clone(), copies).map_err(|e| e.to_string())?;
    let remote = edges(&runner)?;
    runner.set_remote(remote);
    let mut bound: HashMap<String, TensorRef> = HashMap::new();
    for group in 0..GROUPS {
        let d = group_device(group);
        let w = devices[d].alloc_tensor(DType::F32, &[WIDTH, WIDTH]).map_err(|e| e.to_string())?;
        if runner.is_local(d) {
            let write = runner.stream(d).write_async(&w, values(100 + u64::from(group), WIDTH * WIDTH));
            write.map_err(|e| e.to_string())?.wait().map_err(|e| e.to_string())?;
        }
        bound.insert(format!("w{group}"), w);
    }
    let plan = Plan::new(graph.clone(), &runner, &|g| Some(group_device(g)), &|id: NodeId| match graph
        .node(id)
        .name
        .as_deref()?
    {
        "x" => Some(0),
        name => name.strip_prefix('w').and_then(|g| g.parse().ok()).map(group_device),
    })
    .map_err(|e| e.to_string())?;
    let y_device = group_device(GROUPS - 1);
    let alloc = |d: usize| devices[d].alloc_tensor(DType::F32, &[ROWS, WIDTH]).map_err(|e| e.to_string());
    let xs: Vec<TensorRef> = (0..copies).map(|_| alloc(0)).collect::<Result<_, _>>()?;
    let ys: Vec<TensorRef> = (0..copies).map(|_| alloc(y_device)).collect::<Result<_, _>>()?;
    let mut readers: Vec<Vec<SyncPoint>> = vec![Vec::new(); copies];
    let mut reads = Vec::new();
    std::thread::sleep(late);
    let mut first_submit = Duration::ZERO;
    for r in 0..RUNS {
        let slot = r % copies;
        let input = runner.stream(0).clone();
        for p in &readers[slot] {
            input.wait_or_relay(p, input.wait_policy()).map_err(|e| e.to_string())?;
        }
        let write = input.write_async(&xs[slot], values(r as u64 + 1, ROWS * WIDTH)).map_err(|e| e.to_string())?;
        let (xt, yt) = (xs[slot].clone(), ys[slot].clone());
        let bind = |id: NodeId| match graph.node(id).name.as_deref()? {
            "x" => Some(xt.clone()),
            "y" => Some(yt.clone()),
            name => bound.get(name).cloned(),
        };
        let started = Instant::now();
        let points = runner.submit(&plan, &bind, Some(write.point())).map_err(|e| e.to_string())?;
        if r == 0 {
            first_submit = started.elapsed();
        }
        readers[slot] = points.inputs_read;
        if runner.is_local(y_device) {
            let read = runner.stream(y_device).read_into_async(&ys[slot], vec![0f32; ROWS * WIDTH]);
            reads.push(read.map_err(|e| e.to_string())?);
        }
    }
    for d in (0..n).filter(|&d| runner.is_local(d)) {
        runner.stream(d).synchronize().map_err(|e| format!("device {d}: {e}"))?;
    }
    if !runner.is_local(y_device) {
        return Ok((None, first_submit));
    }
    let outputs = reads.into_iter().map(|r| r.wait().map_err(|e| e.to_string())).collect::<Result<_, _>>()?;
    Ok((Some(outputs), first_submit))
}

fn check(world: &World) -> Check {
    let (rank, size) = (world.rank(), world.size());
    // One thread per device (the ranks may outnumber the cores).
    let cpu = || -> Result<Arc<dyn Device>, String> {
        let options = baton_cpu::OpenOptions::default().with_threads(1);
        Ok(baton_cpu::open_with(&["cpu"], &options).map_err(|e| e.to_string())?.remove(0).into_device())
    };
    let device_ranks: Vec<usize> = (0..size).collect();
    let mut compared = 0;
    let mut slowest_submit = Duration::ZERO;
    for copies in [1, 2] {
        // The reference: every device in this process, one thread each.
        let local: Vec<Arc<dyn Device>> = (0..size).map(|_| cpu()).collect::<Result<_, _>>()?;
        let expected =
            run(local, |_| Ok(None), copies, Duration::ZERO)?.0.ok_or("the reference computes every output")?;
        // Over the ranks: this rank's device and stand-ins for the others'.
        let own = cpu()?;
        let devices: Vec<Arc<dyn Device>> = (0..size)
            .map(|r| match r == rank {
                true => own.clone(),
                false => RemoteDevice::new(format!("cpu@{r}"), r, vec![DType::F32]).into_device(),
            })
            .collect();
        let edges = |runner: &Runner| {
            let edges = RankEdges::new(world, runner, &device_ranks, Duration::from_secs(30));
            Ok(Some(Arc::new(edges.map_err(|e| e.to_string())?) as Arc<dyn RemoteEdges>))
        };
        // Rank 0 (which feeds the others) submits late: the others' first
        // submission must still return at once (their streams wait on the
        // receives; their hosts do not: Q-NONBLOCK).
        let late = if rank == 0 && size > 1 { LATE } else { Duration::ZERO };
        let (got, first_submit) = run(devices, edges, copies, late)?;
        slowest_submit = slowest_submit.max(first_submit);
        if rank != 0 && first_submit > LATE / 2 {
            return Err(format!("the first submit blocked the host {first_submit:?} while rank 0 was {LATE:?} late"));
        }
        if let Some(got) = got {
            for (r, (g, e)) in got.iter().zip(&expected).enumerate() {
                if let Some(i) = g.iter().zip(e).position(|(a, b)| a.to_bits() != b.to_bits()) {
                    return Err(format!(
                        "{copies} in flight, run {r}: y[{i}] is {}, expected {} (bit for bit)",
                        g[i], e[i]
                    ));
                }
                compared += 1;
            }
        }
    }
    println!(
        "rank {rank}: split ok ({size} ranks, {GROUPS} groups, {compared} outputs compared bit for bit; first submit {:.1} ms{})",
        slowest_submit.as_secs_f64() * 1e3,
        if rank == 0 { "" } else { " while rank 0 was late" }
    );
    Ok(())
}

fn main() -> ExitCode {
    let world = match World::init() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("FAIL: {e}");
            return ExitCode::FAILURE;
        }
    };
    match check(&world) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("FAIL rank {}: {e}", world.rank());
            world.abort(1)
        }
    }
}
