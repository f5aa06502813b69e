//! The MPI tests, one program that every rank runs (SPMD); launched by
//! `scripts/test-mpi.sh` under `scripts/mpirun.sh -np 2` and `-np 3`.
//!
//! - `mpi_check collectives`: all-reduce (MPI's and the butterfly) and
//!   all-gather of f32 tensors of several sizes against the in-process
//!   result, on host buffers and as gates on a CPU device's stream; a
//!   send/receive round trip. Prints `rank R: collectives ok` or exits
//!   non-zero with what differed.
//! - `mpi_check silent RANK DEADLINE_S`: after one good all-reduce, rank
//!   RANK stops itself (`SIGSTOP`); every other rank's next all-reduce gate
//!   must fail within the deadline (plus the liveness grace) with an error
//!   naming RANK, seen by a consumer on another stream. Each prints
//!   `rank R: failed as expected after S s: ...` and exits with code 3
//!   (the job's exit is non-zero); anything else prints `FAIL`.
//! - `mpi_check failing RANK`: rank RANK's stream fails just before an
//!   all-reduce gate; every rank must fail at once (not by the deadline)
//!   with that first cause, naming RANK.
//! - `mpi_check killed RANK`: after one good all-reduce, rank RANK kills
//!   itself (`SIGKILL`); `mpirun` must end the job with a non-zero status
//!   long before the 30 s deadline of the others' next all-reduce.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use baton_core::backend::Device;
use baton_core::sync::WaitPolicy;
use baton_core::{DType, Stream, TensorRef};
use baton_mpi::{tree_sum, Comm, MpiError, RankStream, RemoteBound, Transport, World};

type Check = Result<(), String>;

/// Rank `rank`'s value at `i`: reproducible on every rank, in [-1, 1).
fn value(rank: usize, i: usize) -> f32 {
    let mut x = (rank as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i as u64).wrapping_mul(0xD1B5_4A32_D192_ED03);
    x ^= x >> 31;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 29;
    ((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
}

/// Small integers: their sum is exact in f32 in any order.
fn integer(rank: usize, i: usize) -> f32 {
    ((rank * 31 + i * 7) % 17) as f32 - 8.0
}

fn inputs(size: usize, n: usize, f: fn(usize, usize) -> f32) -> Vec<Vec<f32>> {
    (0..size).map(|r| (0..n).map(|i| f(r, i)).collect()).collect()
}

fn same_bits(what: &str, got: &[f32], want: &[f32]) -> Check {
    if got.len() != want.len() {
        return Err(format!("{what}: {} values, expected {}", got.len(), want.len()));
    }
    match got.iter().zip(want).position(|(g, w)| g.to_bits() != w.to_bits()) {
        None => Ok(()),
        Some(i) => Err(format!("{what}: value {i} is {}, expected {} (bit for bit)", got[i], want[i])),
    }
}

/// Within the error bound of any summation order: `ranks * eps * sum |x|`.
fn close(what: &str, got: &[f32], xs: &[Vec<f32>]) -> Check {
    for (i, g) in got.iter().enumerate() {
        let exact: f64 = xs.iter().map(|x| f64::from(x[i])).sum();
        let scale: f64 = xs.iter().map(|x| f64::from(x[i]).abs()).sum();
        let bound = xs.len() as f64 * f64::from(f32::EPSILON) * scale;
        if (f64::from(*g) - exact).abs() > bound {
            return Err(format!("{what}: value {i} is {g}, expected {exact} within {bound}"));
        }
    }
    Ok(())
}

fn mpi(e: MpiError) -> String {
    e.to_string()
}

/// The host-buffer operations of one size.
fn host_collectives(comm: &Comm, n: usize, bound: &RemoteBound) -> Check {
    let (rank, size) = (comm.rank(), comm.size());
    let xs = inputs(size, n, value);
    let plain: Vec<f32> = (0..n).map(|i| xs.iter().skip(1).fold(xs[0][i], |s, x| s + x[i])).collect();
    let tree: Vec<f32> = (0..n).map(|i| tree_sum(&xs.iter().map(|x| x[i]).collect::<Vec<_>>())).collect();

    let (mut send, mut recv) = (xs[rank].clone(), vec![0f32; n]);
    comm.all_reduce_sum(&mut send, &mut recv, bound).map_err(mpi)?;
    close(&format!("MPI all-reduce of {n}"), &recv, &xs)?;
    if size == 2 {
        same_bits(&format!("MPI all-reduce of {n} (2 ranks)"), &recv, &plain)?;
    }
    let ints = inputs(size, n, integer);
    let int_sum: Vec<f32> = (0..n).map(|i| ints.iter().map(|x| x[i]).sum()).collect();
    let (mut send, mut recv) = (ints[rank].clone(), vec![0f32; n]);
    comm.all_reduce_sum(&mut send, &mut recv, bound).map_err(mpi)?;
    same_bits(&format!("MPI all-reduce of {n} integers"), &recv, &int_sum)?;

    let (mut data, mut scratch) = (xs[rank].clone(), vec![0f32; n]);
    comm.butterfly_all_reduce_sum(&mut data, &mut scratch, bound).map_err(mpi)?;
    same_bits(&format!("butterfly all-reduce of {n}"), &data, &tree)?;

    let (mut send, mut recv) = (xs[rank].clone(), vec![0f32; n * size]);
    comm.all_gather(&mut send, &mut recv, bound).map_err(mpi)?;
    same_bits(&format!("all-gather of {n}"), &recv, &xs.concat())
}

/// Rank 0 sends to the last rank, which adds one and sends it back.
fn round_trip(comm: &Comm, n: usize, bound: &RemoteBound) -> Check {
    let (rank, last) = (comm.rank(), comm.size() - 1);
    let sent: Vec<f32> = (0..n).map(|i| value(7, i)).collect();
    let plus_one: Vec<f32> = sent.iter().map(|x| x + 1.0).collect();
    if rank == 0 {
        comm.send(last, 5, &mut sent.clone(), bound).map_err(mpi)?;
        let mut back = vec![0f32; n];
        comm.recv(last, 6, &mut back, bound).map_err(mpi)?;
        same_bits(&format!("round trip of {n}"), &back, &plus_one)?;
    } else if rank == last {
        let mut got = vec![0f32; n];
        comm.recv(0, 5, &mut got, bound).map_err(mpi)?;
        same_bits(&format!("received {n}"), &got, &sent)?;
        let mut reply: Vec<f32> = got.iter().map(|x| x + 1.0).collect();
        comm.send(0, 6, &mut reply, bound).map_err(mpi)?;
    }
    Ok(())
}

struct OnDevice {
    device: std::sync::Arc<baton_cpu::CpuDevice>,
    gates: RankStream,
    /// The consumer: waits on the gates' points, then reads.
    reader: Stream,
}

fn open_device(world: &World, deadline: Duration) -> Result<OnDevice, String> {
    let options = baton_cpu::OpenOptions::default().with_threads(1);
    let device = baton_cpu::open_with(&["cpu"], &options).map_err(|e| e.to_string())?.remove(0);
    let stream = device.new_stream().map_err(|e| e.to_string())?;
    let reader = device.new_stream().map_err(|e| e.to_string())?;
    let comm = world.communicator().map_err(mpi)?;
    Ok(OnDevice { device, gates: RankStream::new(stream, comm, deadline), reader })
}

fn tensor(d: &OnDevice, n: usize) -> Result<TensorRef, String> {
    d.device.alloc_tensor(DType::F32, &[n]).map_err(|e| e.to_string())
}

/// Reads `t` on the reader stream after `point`: the consumer never waits
/// on the host for the gate, only for its own read.
fn consume(d: &OnDevice, t: &TensorRef, point: &baton_core::SyncPoint) -> Result<Vec<f32>, String> {
    d.reader.wait(point).map_err(|e| e.to_string())?;
    let read = d.reader.read_into_async(t, vec![0f32; t.bytes() / 4]).map_err(|e| e.to_string())?;
    read.wait().map_err(|e| e.to_string())
}

fn device_collectives(d: &OnDevice, n: usize) -> Check {
    let (rank, size) = (d.gates.comm().rank(), d.gates.comm().size());
    let xs = inputs(size, n, value);
    let tree: Vec<f32> = (0..n).map(|i| tree_sum(&xs.iter().map(|x| x[i]).collect::<Vec<_>>())).collect();
    let input = tensor(d, n)?;
    let (native, butterfly, gathered) = (tensor(d, n)?, tensor(d, n)?, tensor(d, n * size)?);
    let stream = d.gates.stream();
    let _lent = stream.write_async(&input, xs[rank].clone()).map_err(|e| e.to_string())?;
    let p1 = d.gates.all_reduce(&input, &native, Transport::Native).map_err(mpi)?;
    let p2 = d.gates.all_reduce(&input, &butterfly, Transport::Butterfly).map_err(mpi)?;
    let p3 = d.gates.all_gather(&input, &gathered).map_err(mpi)?;
    close(&format!("MPI all-reduce gate of {n}"), &consume(d, &native, &p1)?, &xs)?;
    same_bits(&format!("butterfly gate of {n}"), &consume(d, &butterfly, &p2)?, &tree)?;
    same_bits(&format!("all-gather gate of {n}"), &consume(d, &gathered, &p3)?, &xs.concat())?;
    // A send and a receive as gates: rank 0 to the last rank.
    let last = size - 1;
    if rank == 0 {
        d.gates.send(&input, last, 9).map_err(mpi)?;
    } else if rank == last {
        let got = tensor(d, n)?;
        let p = d.gates.recv(&got, 0, 9).map_err(mpi)?;
        same_bits(&format!("received gate of {n}"), &consume(d, &got, &p)?, &xs[0])?;
    }
    d.gates.stream().synchronize().map_err(|e| e.to_string())
}

/// Queueing a gate never blocks the host (`Q-NONBLOCK`): the last rank
/// comes 300 ms late, and rank 0's queueing returns long before that; the
/// consumer then gets the right sum.
fn queueing_does_not_wait_for_peers(d: &OnDevice) -> Check {
    let (rank, size) = (d.gates.comm().rank(), d.gates.comm().size());
    let n = 64;
    let (input, output) = (tensor(d, n)?, tensor(d, n)?);
    let _lent = d.gates.stream().write_async(&input, vec![rank as f32; n]).map_err(|e| e.to_string())?;
    if rank == size - 1 {
        std::thread::sleep(Duration::from_millis(300));
    }
    let started = Instant::now();
    let point = d.gates.all_reduce(&input, &output, Transport::Native).map_err(mpi)?;
    let queued = started.elapsed();
    if rank == 0 && queued > Duration::from_millis(100) {
        return Err(format!("queueing a gate took {queued:?}: it waited for the late rank"));
    }
    let want = (0..size).map(|r| r as f32).sum::<f32>();
    same_bits("the late rank's all-reduce", &consume(d, &output, &point)?, &vec![want; n])
}

fn collectives(world: &World) -> Check {
    let bound = RemoteBound::new(Duration::from_secs(20), WaitPolicy::process_default());
    let comm = world.communicator().map_err(mpi)?;
    let device = open_device(world, bound.deadline)?;
    // Variable-length bytes: rank r says r + 1 words (rank 0 also an
    // empty message first).
    let say = |r: usize| "word ".repeat(r + 1).into_bytes();
    let empty = comm.all_gather_bytes(&[], &bound).map_err(mpi)?;
    if empty != vec![Vec::<u8>::new(); comm.size()] {
        return Err(format!("all-gather of empty bytes: {empty:?}"));
    }
    let said = comm.all_gather_bytes(&say(comm.rank()), &bound).map_err(mpi)?;
    let want: Vec<Vec<u8>> = (0..comm.size()).map(say).collect();
    if said != want {
        return Err(format!("all-gather of bytes: {said:?}, expected {want:?}"));
    }
    // Agreement: the same bytes agree; each rank's own number does not,
    // and every rank names the same differing ranks.
    comm.agree("a constant", b"same everywhere", &bound).map_err(mpi)?;
    match comm.agree("the rank", comm.rank().to_string().as_bytes(), &bound) {
        Err(MpiError::Mismatch { ranks, .. }) if ranks == (1..comm.size()).collect::<Vec<_>>() => {}
        other => return Err(format!("agreement on each rank's own number: {other:?}")),
    }
    // Uneven parts: rank r sends r + 1 values, then r values (rank 0 none).
    for extra in [1, 0] {
        let counts: Vec<usize> = (0..comm.size()).map(|r| r + extra).collect();
        let parts: Vec<Vec<f32>> =
            counts.iter().enumerate().map(|(r, &c)| (0..c).map(|i| value(r, i)).collect()).collect();
        let mut recv = vec![0f32; counts.iter().sum()];
        comm.all_gather_uneven(&mut parts[comm.rank()].clone(), &mut recv, &counts, &bound).map_err(mpi)?;
        same_bits(&format!("uneven all-gather of {counts:?}"), &recv, &parts.concat())?;
    }
    queueing_does_not_wait_for_peers(&device)?;
    for n in [1, 7, 1024, 262_147] {
        host_collectives(&comm, n, &bound)?;
        round_trip(&comm, n, &bound)?;
        device_collectives(&device, n)?;
    }
    Ok(())
}

/// Exit code of a rank that failed as the silent-rank test expects.
const FAILED_AS_EXPECTED: u8 = 3;
/// How long a rank that failed as expected waits before it exits.
const LINGER: Duration = Duration::from_secs(2);

fn silent(world: &World, silent_rank: usize, deadline: Duration) -> Result<ExitCode, String> {
    let rank = world.rank();
    let d = open_device(world, deadline)?;
    let n = 1024;
    let input = tensor(&d, n)?;
    let output = tensor(&d, n)?;
    let _lent = d.gates.stream().write_async(&input, vec![1f32; n]).map_err(|e| e.to_string())?;
    let warm = d.gates.all_reduce(&input, &output, Transport::Native).map_err(mpi)?;
    let sum = consume(&d, &output, &warm)?;
    same_bits("warm-up all-reduce", &sum, &vec![world.size() as f32; n])?;
    if rank == silent_rank {
        println!("rank {rank}: stopping myself (SIGSTOP)");
        let pid = std::process::id().to_string();
        let stopped = std::process::Command::new("kill").args(["-STOP", &pid]).status();
        // mpirun continues a stopped rank to end it once the others failed.
        println!("rank {rank}: continued after SIGSTOP ({stopped:?}): the job is ending");
        return Ok(ExitCode::from(FAILED_AS_EXPECTED));
    }
    let started = Instant::now();
    let point = d.gates.all_reduce(&input, &output, Transport::Native).map_err(mpi)?;
    let seen = consume(&d, &output, &point);
    let took = started.elapsed();
    let Err(error) = seen else {
        return Err(format!("rank {rank}: the all-reduce with a stopped rank {silent_rank} succeeded"));
    };
    let named = d.gates.error().and_then(|e| e.silence().cloned());
    let limit = deadline + Duration::from_secs(5);
    if named.as_ref().is_none_or(|s| s.silent != [silent_rank]) {
        return Err(format!("rank {rank}: the error does not name rank {silent_rank} alone: {named:?}; {error}"));
    }
    if !error.contains(&format!("silent rank(s) [{silent_rank}]")) {
        return Err(format!("rank {rank}: the consumer's error does not name rank {silent_rank}: {error}"));
    }
    if took > limit {
        return Err(format!("rank {rank}: failed after {took:?}, past {limit:?}"));
    }
    // The communicator takes no more work, and says why, at once.
    let again = Instant::now();
    let bound = d.gates.bound();
    match d.gates.comm().all_reduce_sum(&mut vec![1f32; 4], &mut vec![0f32; 4], &bound) {
        Err(e @ MpiError::Poisoned { .. }) if again.elapsed() < Duration::from_millis(100) => {
            if e.silence().map(|s| s.silent.clone()) != Some(vec![silent_rank]) {
                return Err(format!("rank {rank}: the poisoned communicator forgot the silent rank: {e}"));
            }
        }
        other => return Err(format!("rank {rank}: an operation after the timeout gave {other:?}")),
    }
    println!("rank {rank}: failed as expected after {:.2} s: {error}", took.as_secs_f64());
    // The first rank to exit ends the job: give the others, which time out
    // at about the same moment, the time to report too.
    std::thread::sleep(LINGER);
    Ok(ExitCode::from(FAILED_AS_EXPECTED))
}

/// Rank `failing_rank`'s stream fails (a host function returns an error)
/// just before an all-reduce gate; every other rank's gate must fail at
/// once, far before its 20 s deadline, with that first cause, and the
/// failing rank's own consumer sees its own cause.
fn failing(world: &World, failing_rank: usize) -> Result<ExitCode, String> {
    let rank = world.rank();
    let d = open_device(world, Duration::from_secs(20))?;
    let n = 256;
    let (input, output) = (tensor(&d, n)?, tensor(&d, n)?);
    let _lent = d.gates.stream().write_async(&input, vec![1f32; n]).map_err(|e| e.to_string())?;
    let warm = d.gates.all_reduce(&input, &output, Transport::Native).map_err(mpi)?;
    consume(&d, &output, &warm)?;
    let started = Instant::now();
    if rank == failing_rank {
        d.gates.stream().host_fn(|| Err("injected device failure".into())).map_err(|e| e.to_string())?;
    }
    let seen = match d.gates.all_reduce(&input, &output, Transport::Native) {
        Ok(point) => consume(&d, &output, &point),
        // The failing rank's stream may refuse the gate outright.
        Err(e) => Err(e.to_string()),
    };
    let took = started.elapsed();
    let Err(error) = seen else {
        return Err(format!("rank {rank}: the all-reduce with a failing rank {failing_rank} succeeded"));
    };
    if !error.contains("injected device failure") {
        return Err(format!("rank {rank}: the error does not carry the first cause: {error}"));
    }
    if rank != failing_rank && !error.contains(&format!("rank {failing_rank} failed")) {
        return Err(format!("rank {rank}: the error does not name rank {failing_rank}: {error}"));
    }
    if took > Duration::from_secs(5) {
        return Err(format!("rank {rank}: failed after {took:?}, not at once"));
    }
    println!("rank {rank}: failed as expected after {:.3} s: {error}", took.as_secs_f64());
    std::thread::sleep(LINGER);
    Ok(ExitCode::from(FAILED_AS_EXPECTED))
}

/// Rank `killed_rank` kills itself (`SIGKILL`) after one good all-reduce;
/// the others wait in the next one with the default deadline (30 s).
/// `mpirun` ends the job, long before that deadline: the script checks the
/// time and the exit status. A rank that gets past the all-reduce fails.
fn killed(world: &World, killed_rank: usize) -> Result<ExitCode, String> {
    let rank = world.rank();
    let comm = world.communicator().map_err(mpi)?;
    let bound = RemoteBound::from_env();
    let (mut send, mut recv) = (vec![1f32; 16], vec![0f32; 16]);
    comm.all_reduce_sum(&mut send, &mut recv, &bound).map_err(mpi)?;
    if rank == killed_rank {
        println!("rank {rank}: killing myself (SIGKILL)");
        let pid = std::process::id().to_string();
        let killed = std::process::Command::new("kill").args(["-KILL", &pid]).status();
        return Err(format!("rank {rank}: survived SIGKILL ({killed:?})"));
    }
    match comm.all_reduce_sum(&mut send, &mut recv, &bound) {
        Ok(()) => Err(format!("rank {rank}: the all-reduce with a killed rank {killed_rank} succeeded")),
        Err(e) => {
            println!("rank {rank}: failed as expected: {e}");
            Ok(ExitCode::from(FAILED_AS_EXPECTED))
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let world = match World::init() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("FAIL: {e}");
            return ExitCode::FAILURE;
        }
    };
    let rank = world.rank();
    let outcome = match args.first().map(String::as_str) {
        Some("collectives") => collectives(&world).map(|()| {
            println!("rank {rank}: collectives ok ({} ranks, thread level {})", world.size(), world.threading());
            ExitCode::SUCCESS
        }),
        Some("silent") => {
            let silent_rank = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1);
            let seconds: f64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(3.0);
            silent(&world, silent_rank, Duration::from_secs_f64(seconds))
        }
        Some("failing") => {
            let failing_rank = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1);
            failing(&world, failing_rank)
        }
        Some("killed") => {
            let killed_rank = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1);
            killed(&world, killed_rank)
        }
        _ => Err("usage: mpi_check collectives | silent RANK DEADLINE_S | failing RANK | killed RANK".into()),
    };
    match outcome {
        Ok(code) if code == ExitCode::SUCCESS => code,
        // A rank whose remote operation failed must not finalise (that
        // would wait for the stopped rank): exit now.
        Ok(_) => std::process::exit(i32::from(FAILED_AS_EXPECTED)),
        Err(e) => {
            eprintln!("FAIL rank {rank}: {e}");
            world.abort(1)
        }
    }
}
