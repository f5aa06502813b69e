//! Naming the silent rank: a responder thread answers pings, and a rank
//! whose remote operation timed out pings its peers.
//!
//! MPI cannot say which rank a stuck collective waits for, and a rank that
//! stopped without dying (`kill -STOP`, a hung driver) is noticed by no
//! one. So each rank runs a small thread that answers pings on a
//! communicator of their own with how many remote operations it has
//! started and finished. A rank whose operation ran past its deadline
//! pings the operation's peers and waits a short grace time: a peer that
//! does not answer is silent; one that answers but has started fewer
//! operations is behind.

use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mpi::ffi;

use crate::error::{PeerProgress, Silence};
use crate::shared::Shared;

/// The tag of a ping (its payload: the number of the ping).
const PING: c_int = 1;
/// Answers are tagged `ANSWER_BASE + ping number % ANSWER_TAGS`, so a late
/// answer to an earlier ping never matches a later one.
const ANSWER_BASE: c_int = 2;
const ANSWER_TAGS: u64 = 16_000;
/// How long the responder sleeps between two looks for a ping.
const RESPONDER_SLEEP: Duration = Duration::from_millis(1);
/// How long a timed-out rank waits for its peers' answers.
pub(crate) const GRACE: Duration = Duration::from_millis(1500);

/// Starts the thread that answers this rank's pings, and records its
/// peers' failure notices (`notice`), until `stop` is set.
pub(crate) fn spawn_responder(shared: Arc<Shared>, stop: Arc<AtomicBool>) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name(format!("baton-mpi-liveness-{}", shared.rank))
        .spawn(move || {
            while !stop.load(Ordering::Acquire) {
                match answer_one(&shared).and_then(|pinged| Ok(crate::notice::receive_one(&shared)? || pinged)) {
                    Ok(true) => {}
                    Ok(false) => std::thread::sleep(RESPONDER_SLEEP),
                    Err(e) => {
                        tracing::error!("rank {}: the liveness responder stops: {e}", shared.rank);
                        return;
                    }
                }
            }
        })
        .unwrap_or_else(|e| panic!("cannot start the MPI liveness thread: {e}"))
}

/// Answers one waiting ping, if any (`Ok(false)`: none waits).
fn answer_one(shared: &Shared) -> Result<bool, crate::MpiError> {
    let mut flag: c_int = 0;
    // SAFETY: a zeroed MPI_Status is a valid place for MPI to write to.
    let mut status: ffi::MPI_Status = unsafe { std::mem::zeroed() };
    // SAFETY: the control communicator lives until MPI_Finalize, which
    // waits for this thread to end; flag and status are live places.
    let code = shared
        .call(|| unsafe { ffi::MPI_Iprobe(ffi::RSMPI_ANY_SOURCE, PING, shared.control.0, &mut flag, &mut status) });
    shared.check("MPI_Iprobe", code)?;
    if flag == 0 {
        return Ok(false);
    }
    let from = status.MPI_SOURCE;
    let mut number = 0u64;
    // SAFETY: the probed message is one u64 from `from`; `number` is a live
    // u64 and the call completes before it returns.
    let code = shared.call(|| unsafe {
        ffi::MPI_Recv(
            (&mut number as *mut u64).cast::<c_void>(),
            1,
            ffi::RSMPI_UINT64_T,
            from,
            PING,
            shared.control.0,
            ffi::RSMPI_STATUS_IGNORE,
        )
    });
    shared.check("MPI_Recv", code)?;
    let answer = [shared.started.load(Ordering::Acquire), shared.finished.load(Ordering::Acquire)];
    let tag = ANSWER_BASE + (number % ANSWER_TAGS) as c_int;
    // A 16-byte message goes eagerly: the blocking send returns at once.
    // SAFETY: `answer` is live for the whole blocking call.
    let code = shared.call(|| unsafe {
        ffi::MPI_Send(answer.as_ptr().cast::<c_void>(), 2, ffi::RSMPI_UINT64_T, from, tag, shared.control.0)
    });
    shared.check("MPI_Send", code)?;
    Ok(true)
}

/// Pings `peers` and waits up to [`GRACE`] for their answers: who is silent,
/// and who answered but has started fewer than `started` operations. What
/// a silent peer never answers stays with MPI (leaked: its requests are
/// never completed).
pub(crate) fn diagnose(shared: &Shared, peers: &[usize], started: u64) -> Silence {
    let number = shared.pings.fetch_add(1, Ordering::AcqRel);
    let tag = ANSWER_BASE + (number % ANSWER_TAGS) as c_int;
    // Heap memory that MPI may still write after this function gave up on
    // a peer: leaked below, never freed.
    let ping: &'static u64 = Box::leak(Box::new(number));
    let answers: &'static mut [[u64; 2]] = Box::leak(vec![[0u64; 2]; peers.len()].into_boxed_slice());
    // SAFETY: a null request is a valid value for MPI to overwrite.
    let null = unsafe { ffi::RSMPI_REQUEST_NULL };
    let mut sends = vec![null; peers.len()];
    let mut recvs = vec![null; peers.len()];
    let mut unreachable = Vec::new();
    for (i, &peer) in peers.iter().enumerate() {
        // SAFETY: `ping` and `answers[i]` are leaked, so live for as long
        // as MPI may use them; the control communicator is live.
        let code = shared.call(|| unsafe {
            ffi::MPI_Isend(
                (ping as *const u64).cast::<c_void>(),
                1,
                ffi::RSMPI_UINT64_T,
                peer as c_int,
                PING,
                shared.control.0,
                &mut sends[i],
            )
        });
        // SAFETY: as above.
        let code2 = shared.call(|| unsafe {
            ffi::MPI_Irecv(
                answers[i].as_mut_ptr().cast::<c_void>(),
                2,
                ffi::RSMPI_UINT64_T,
                peer as c_int,
                tag,
                shared.control.0,
                &mut recvs[i],
            )
        });
        if code != ffi::MPI_SUCCESS as i32 || code2 != ffi::MPI_SUCCESS as i32 {
            unreachable.push(i);
        }
    }
    let until = Instant::now() + GRACE;
    let mut answered = vec![false; peers.len()];
    loop {
        for (i, done) in answered.iter_mut().enumerate() {
            if *done || unreachable.contains(&i) {
                continue;
            }
            let mut flag: c_int = 0;
            // SAFETY: `recvs[i]` is a request posted above (or null after
            // it completed); flag is a live place.
            let code = shared.call(|| unsafe { ffi::MPI_Test(&mut recvs[i], &mut flag, ffi::RSMPI_STATUS_IGNORE) });
            *done = code == ffi::MPI_SUCCESS as i32 && flag != 0;
        }
        if answered.iter().enumerate().all(|(i, &a)| a || unreachable.contains(&i)) || Instant::now() >= until {
            break;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let mut silence = Silence { silent: Vec::new(), behind: Vec::new() };
    for (i, &peer) in peers.iter().enumerate() {
        if !answered[i] {
            silence.silent.push(peer);
        } else if answers[i][0] < started {
            silence.behind.push(PeerProgress { rank: peer, started: answers[i][0], finished: answers[i][1] });
        }
    }
    silence
}
