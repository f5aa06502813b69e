//! `baton conformance` across ranks (feature `mpi`): under `mpirun -np 2`
//! with `--devices cpu@0,cpu@1`, the contract rules whose subject is
//! another device, with that device on the other rank. A cross-rank edge
//! is what a plan over ranks uses: a send on the producer's stream and a
//! receive on the consumer's ([`RankStream`]), each completing a point of
//! its own stream; rank 0 produces, rank 1 consumes. Both ranks run every
//! rule (SPMD) and meet on a communicator of the suite's own before and
//! after the steps that must be ordered across them; a rule passes when it
//! passes on both ranks. Rules that cannot hold as written over MPI run
//! as expected failures, with why (docs/contract.md, "Across ranks").

use std::sync::Arc;
use std::time::Duration;

use baton_conformance::{random, ExpectedFailure, RULE_TIMEOUT};
use baton_core::backend::{Device, Stream, TensorRef};
use baton_core::sync::{FailureKind, HostTimeline, PointStatus, Release, SyncPoint};
use baton_core::DType;
use baton_mpi::{Comm, RankStream, RemoteBound, RemoteDevice, World};

/// The rank that produces (device 0's).
const PRODUCER: usize = 0;
/// The rank that consumes (device 1's).
const CONSUMER: usize = 1;

/// The two ranks' devices, as each rank sees them.
pub struct RankPair {
    world: Arc<World>,
    /// This rank's device.
    device: Arc<dyn Device>,
    /// The suite's own communicator: the ranks meet on it.
    meeting: Comm,
    bound: RemoteBound,
}

impl RankPair {
    /// The pair of `world` (2 ranks), this rank's device `device`.
    pub fn new(world: Arc<World>, device: Arc<dyn Device>) -> anyhow::Result<RankPair> {
        let meeting = world.communicator()?;
        Ok(RankPair { world, device, meeting, bound: RemoteBound::from_env() })
    }

    fn rank(&self) -> usize {
        self.world.rank()
    }

    /// Waits until the other rank reaches its own `meet` (bounded).
    fn meet(&self) {
        self.meeting.all_gather_bytes(&[], &self.bound).expect("meeting the other rank");
    }

    /// A new stream of this rank's device with a communicator of its own
    /// for the rule's edge (a collective: both ranks make it at the same
    /// step), each remote operation bounded by `deadline`.
    fn edge(&self, deadline: Duration) -> RankStream {
        let stream = self.device.new_stream().expect("stream");
        RankStream::new(stream, self.world.communicator().expect("communicator"), deadline)
    }

    fn stream(&self) -> Stream {
        self.device.new_stream().expect("stream")
    }

    fn tensor(&self, n: usize) -> TensorRef {
        self.device.alloc_tensor(DType::F32, &[n]).expect("tensor")
    }

    /// Gathers every rank's verdict of one rule (the failure message, or
    /// empty): the ranks that failed, with their messages.
    pub fn verdicts(&self, mine: Option<String>) -> anyhow::Result<Vec<(usize, String)>> {
        let said = self.meeting.all_gather_bytes(mine.unwrap_or_default().as_bytes(), &self.bound)?;
        Ok(said
            .into_iter()
            .enumerate()
            .filter(|(_, s)| !s.is_empty())
            .map(|(r, s)| (r, String::from_utf8_lossy(&s).into_owned()))
            .collect())
    }
}

/// A rule across ranks: its name, and whether it ends in a failure notice
/// or a timed-out operation (the process then forgets the notice, and
/// leaves MPI unfinalised at exit, so the job's exit status is not 0).
pub type RankRule = (&'static str, fn(&RankPair), bool);

/// The rules across ranks, those that leave a failed operation last.
pub const RANK_RULES: &[RankRule] = &[
    ("w_order", w_order, false),
    ("c_order", c_order, false),
    ("c_cross", c_cross, false),
    ("m_order", m_order, false),
    ("w_foreign", w_foreign, false),
    ("w_bound", w_bound, true),
    ("w_fail", w_fail, true),
    ("d_cancel", d_cancel, true),
];

/// The rules that cannot hold as written across ranks, and why.
pub fn expected_failures() -> Vec<ExpectedFailure> {
    vec![ExpectedFailure {
        rule: "w_foreign",
        why: "points live in one process: another rank's device is a stand-in whose points are reached as work \
              is queued, so a wait on one orders nothing and is not refused; a cross-rank edge is a receive, \
              whose local point consumers wait on (docs/contract.md, Across ranks)"
            .into(),
    }]
}

fn gate() -> (HostTimeline, Release) {
    let host = HostTimeline::new("rank-gate");
    let release = host.reserve();
    (host, release)
}

fn assert_pending(point: &SyncPoint, what: &str) {
    assert!(matches!(point.status(), PointStatus::Pending), "{what}: expected pending, got {:?}", point.status());
}

/// Queues a write of `data` into `t` (its point orders what follows on
/// `stream`).
fn queue_write(stream: &Stream, t: &TensorRef, data: Vec<f32>) -> SyncPoint {
    stream.write_async(t, data).expect("write").point().clone()
}

fn download(stream: &Stream, t: &TensorRef) -> Vec<f32> {
    let n = t.bytes() / 4;
    stream.read_into_async(t, vec![0f32; n]).expect("read").wait_within(RULE_TIMEOUT).expect("read completes")
}

fn reached(point: &SyncPoint, what: &str) {
    point.wait_timeout(RULE_TIMEOUT).unwrap_or_else(|e| panic!("{what}: {e}"));
}

/// W-ORDER: a stream of rank 1 waits on the receive of rank 0's product:
/// its later work starts after rank 0's (held back) work, and sees it.
pub fn w_order(p: &RankPair) {
    let edge = p.edge(RULE_TIMEOUT);
    let t = p.tensor(64);
    if p.rank() == PRODUCER {
        let (_host, release) = gate();
        edge.stream().wait(&release.point()).expect("wait");
        queue_write(edge.stream(), &t, random(64, 7));
        let sent = edge.send(&t, CONSUMER, 0).expect("send");
        p.meet(); // the consumer checked that it waits
        release.signal();
        reached(&sent, "sent");
        p.meet();
    } else {
        let consumer = p.stream();
        let out = p.tensor(64);
        let received = edge.recv(&t, PRODUCER, 0).expect("recv");
        consumer.wait(&received).expect("cross-rank wait");
        let copied = consumer.copy(&t, &out, None).expect("copy");
        assert_pending(&copied, "the consumer waits for the producer's rank");
        p.meet();
        reached(&copied, "copied");
        p.meet();
        assert_eq!(download(&consumer, &out), random(64, 7));
        assert_eq!(consumer.implicit_waits(), 0, "the explicit wait ordered the copy");
    }
}

/// C-ORDER: a copy between ranks (send, receive) runs after its producer
/// and after the work queued before it on the receiving stream.
pub fn c_order(p: &RankPair) {
    let edge = p.edge(RULE_TIMEOUT);
    let t = p.tensor(128);
    if p.rank() == PRODUCER {
        let (_host, release) = gate();
        edge.stream().wait(&release.point()).expect("wait");
        queue_write(edge.stream(), &t, random(128, 11));
        edge.send(&t, CONSUMER, 1).expect("send");
        p.meet();
        release.signal();
        p.meet();
    } else {
        queue_write(edge.stream(), &t, vec![0f32; 128]);
        let copied = edge.recv(&t, PRODUCER, 1).expect("recv");
        let read = edge.stream().read_into_async(&t, vec![0f32; 128]).expect("read");
        assert_pending(&copied, "the copy waits for its producer on the other rank");
        p.meet();
        assert_eq!(read.wait_within(RULE_TIMEOUT).expect("read"), random(128, 11));
        p.meet();
    }
}

/// C-CROSS: copies between ranks move the bytes intact, both ways, and a
/// copy into a window of a larger buffer leaves the rest alone.
pub fn c_cross(p: &RankPair) {
    let edge = p.edge(RULE_TIMEOUT);
    let n = 100_003;
    let (a, b, four) = (p.tensor(n), p.tensor(n), p.tensor(4));
    let big = p.device.alloc(16 * 4).expect("buffer");
    let window = TensorRef::new(&big, 16, DType::F32, &[4]).expect("window");
    let whole = TensorRef::new(&big, 0, DType::F32, &[16]).expect("whole");
    if p.rank() == PRODUCER {
        queue_write(edge.stream(), &a, random(n, 5));
        edge.send(&a, CONSUMER, 2).expect("send 0->1");
        let back = edge.recv(&b, CONSUMER, 3).expect("recv 1->0");
        queue_write(edge.stream(), &four, random(4, 9));
        let sent = edge.send(&four, CONSUMER, 4).expect("send the window");
        reached(&back, "the copy back");
        reached(&sent, "the window sent");
        assert_eq!(download(edge.stream(), &b), random(n, 5), "there and back, intact");
    } else {
        edge.recv(&b, PRODUCER, 2).expect("recv 0->1");
        edge.send(&b, PRODUCER, 3).expect("send 1->0");
        queue_write(edge.stream(), &whole, vec![7f32; 16]);
        let received = edge.recv(&window, PRODUCER, 4).expect("recv into a window");
        reached(&received, "the window received");
        let mut want = vec![7f32; 16];
        want[4..8].copy_from_slice(&random(4, 9));
        assert_eq!(download(edge.stream(), &whole), want, "only the window changed");
    }
}

/// M-ORDER: a send reads its tensor as a tracked access: a write by
/// another stream of the sender's rank that is not ordered after it waits
/// for it (counted), so the other rank receives the bytes from before.
pub fn m_order(p: &RankPair) {
    let edge = p.edge(RULE_TIMEOUT);
    let t = p.tensor(256);
    if p.rank() == PRODUCER {
        let (_host, release) = gate();
        queue_write(edge.stream(), &t, random(256, 3));
        edge.stream().wait(&release.point()).expect("wait");
        edge.send(&t, CONSUMER, 5).expect("send");
        let other = p.stream();
        let overwrite = other.write_async(&t, vec![-1f32; 256]).expect("write B");
        assert_eq!(other.implicit_waits(), 1, "the unordered write waits for the send's read");
        assert_pending(overwrite.point(), "the overwrite waits for the send");
        release.signal();
        overwrite.wait_within(RULE_TIMEOUT).expect("write B");
        p.meet();
    } else {
        let received = edge.recv(&t, PRODUCER, 5).expect("recv");
        reached(&received, "received");
        assert_eq!(download(edge.stream(), &t), random(256, 3), "the bytes from before the overwrite");
        p.meet();
    }
}

/// W-FOREIGN across ranks (an expected failure): a wait on a point of
/// another rank's device, as this rank holds it (a stand-in's), should be
/// refused as foreign; it is accepted and orders nothing.
pub fn w_foreign(p: &RankPair) {
    let other = if p.rank() == PRODUCER { CONSUMER } else { PRODUCER };
    let stand_in = RemoteDevice::new(format!("cpu@{other}"), other, vec![DType::F32]);
    let theirs = stand_in.new_stream().expect("stand-in stream");
    let t = stand_in.alloc_tensor(DType::F32, &[4]).expect("stand-in tensor");
    let point = theirs.write_async(&t, vec![1f32; 4]).expect("their write").point().clone();
    let result = p.stream().wait(&point);
    p.meet();
    match result {
        Err(baton_core::StreamError::ForeignPoint { .. }) => {}
        other => panic!("a wait on rank {}'s point was not refused as foreign: {other:?}", stand_in.rank()),
    }
}

/// W-BOUND: a receive whose sender never sends fails the stream with
/// `TimedOut` by the remote deadline (2 s here), naming the operation; no
/// hang.
pub fn w_bound(p: &RankPair) {
    let deadline = Duration::from_secs(2);
    let edge = p.edge(deadline);
    let t = p.tensor(16);
    if p.rank() == CONSUMER {
        let started = std::time::Instant::now();
        let received = edge.recv(&t, PRODUCER, 6).expect("recv");
        let failed = received.wait_timeout(deadline + RULE_TIMEOUT);
        let took = started.elapsed();
        let cause = match received.status() {
            PointStatus::Failed(c) => c,
            other => panic!("the receive is {other:?} after {took:?} ({failed:?}), expected a failure"),
        };
        assert_eq!(cause.kind(), FailureKind::TimedOut, "{cause}");
        assert!(cause.to_string().contains("did not finish within 2s"), "{cause}");
        assert!(took < deadline + Duration::from_secs(5), "failed after {took:?}");
        assert!(edge.stream().timeline().failure().is_some_and(|f| f.same_cause(&cause)), "the stream failed with it");
    }
    p.meet();
}

/// W-FAIL: rank 0's stream fails before its send (the point it waits on
/// fails); rank 1's receive, and a stream waiting on it, fail at once with
/// that first cause (the failure notice), not by the deadline.
pub fn w_fail(p: &RankPair) {
    fail_before_send(p, |release| release.fail("upstream died"), "upstream died");
}

/// D-CANCEL across ranks, before the operation is posted: dropping the
/// release that gates rank 0's send fails its points at once, and rank
/// 1's receive and its consumer at once too. (Once posted, MPI cannot
/// withdraw an operation: the peers then fail by the notice or deadline;
/// docs/contract.md.)
pub fn d_cancel(p: &RankPair) {
    fail_before_send(p, drop, "Release was dropped");
}

fn fail_before_send(p: &RankPair, end: fn(Release), cause_text: &str) {
    let edge = p.edge(Duration::from_secs(20));
    let t = p.tensor(8);
    if p.rank() == PRODUCER {
        let (_host, release) = gate();
        edge.stream().wait(&release.point()).expect("wait");
        let sent = edge.send(&t, CONSUMER, 7).expect("send");
        p.meet();
        end(release);
        let failed = sent.wait_timeout(RULE_TIMEOUT);
        assert!(matches!(sent.status(), PointStatus::Failed(_)), "the send's point: {:?} ({failed:?})", sent.status());
        p.world.forget_failure_notices();
        p.meet();
    } else {
        let consumer = p.stream();
        let out = p.tensor(8);
        let received = edge.recv(&t, PRODUCER, 7).expect("recv");
        consumer.wait(&received).expect("wait on the receive");
        let copied = consumer.copy(&t, &out, None).expect("copy");
        p.meet();
        let started = std::time::Instant::now();
        let _ = copied.wait_timeout(RULE_TIMEOUT);
        let took = started.elapsed();
        let cause = match received.status() {
            PointStatus::Failed(c) => c,
            other => panic!("the receive is {other:?} after {took:?}, expected a failure"),
        };
        assert!(cause.to_string().contains(cause_text), "the first cause travels: {cause}");
        assert!(took < Duration::from_secs(5), "at once, not by the 20 s deadline: {took:?}");
        assert!(
            matches!(copied.status(), PointStatus::Failed(c) if c.same_cause(&cause)),
            "the consumer fails with the same cause: {:?}",
            copied.status()
        );
        p.world.forget_failure_notices();
        p.meet();
    }
}

/// Runs the rules across the 2 ranks of the job, `devices` naming one
/// device on each (`cpu@0,cpu@1`); rank 0 prints a row per rule (JSON rows
/// with `json`, as `baton conformance` does). Returns how many failed.
pub fn run(devices: &str, filter: Option<&str>, json: bool) -> anyhow::Result<usize> {
    use anyhow::bail;
    use baton_conformance::Outcome;
    let world = Arc::new(World::init()?);
    let comm = world.communicator()?;
    let bound = RemoteBound::from_env();
    let argv: Vec<String> = std::env::args().skip(1).collect();
    // These errors are every rank's: each prints it before they meet once
    // more, so that mpirun does not end a rank before it has said why.
    let checked = comm
        .agree("the command line", format!("{argv:?}").as_bytes(), &bound)
        .map_err(anyhow::Error::from)
        .and_then(|()| Ok(baton_mpi::parse_ranked(devices, world.size())?));
    let ranked = crate::cli::rank_model::every_rank(&comm, &bound, checked)?;
    if world.size() != 2 || ranked.len() != 2 || ranked[0].rank != PRODUCER || ranked[1].rank != CONSUMER {
        bail!("conformance across ranks runs on 2 ranks with one device each, the first on rank 0 (such as cpu@0,cpu@1), got {devices} on {} rank(s)", world.size());
    }
    let mine = baton_mpi::local_devices(&ranked, world.rank()).join(",");
    let device = crate::cli::devices::open(&mine, None)?.remove(0);
    let pair = RankPair::new(world.clone(), device)?;
    let expected = expected_failures();
    // Failures are reported in the table, not as panic messages.
    std::panic::set_hook(Box::new(|_| {}));
    let mut rows = Vec::new();
    for (name, rule, ends_failed) in RANK_RULES.iter().filter(|(n, _, _)| filter.is_none_or(|f| n.contains(f))) {
        let started = std::time::Instant::now();
        let outcome = baton_conformance::judge(None, &|| rule(&pair));
        if *ends_failed {
            world.forget_failure_notices();
        }
        let mine = match outcome {
            Outcome::Failed(m) => Some(if m.is_empty() { "failed".to_string() } else { m }),
            _ => None,
        };
        let failed = pair.verdicts(mine)?;
        let message = failed.iter().map(|(r, m)| format!("rank {r}: {m}")).collect::<Vec<_>>().join("; ");
        let outcome = match (failed.is_empty(), expected.iter().find(|e| e.rule == *name)) {
            (true, None) => Outcome::Passed,
            (false, None) => Outcome::Failed(message),
            (false, Some(e)) => Outcome::Expected { why: e.why.clone(), message },
            (true, Some(e)) => Outcome::UnexpectedPass { why: e.why.clone() },
        };
        rows.push(super::conformance_report::Row {
            kind: "ranks",
            name,
            outcome,
            ms: started.elapsed().as_secs_f64() * 1e3,
        });
    }
    let _ = std::panic::take_hook();
    if world.rank() == 0 {
        super::conformance_report::print(&rows, json, &format!("{devices}, across 2 ranks"));
    }
    Ok(rows.iter().filter(|r| !r.outcome.is_ok()).count())
}
