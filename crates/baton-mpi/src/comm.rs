//! A communicator's bounded remote operations on host buffers.
//!
//! Every operation posts non-blocking MPI requests and tests them under a
//! [`RemoteBound`] (the edge's deadline and wait policy); a failure notice
//! from a peer ends it at once ([`MpiError::PeerFailed`]). When the deadline
//! passes, the peers are pinged to name the silent ones, the request
//! buffers are left to MPI (leaked: MPI may still write them, and a
//! non-blocking collective cannot be cancelled) and come back empty, and
//! the communicator takes no more work ([`MpiError::Poisoned`]).

use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use baton_core::loom::Mutex;
use mpi::ffi;

use crate::bound::RemoteBound;
use crate::liveness;
use crate::notice;
use crate::shared::{RawComm, Shared};
use crate::wire::Wire;
use crate::MpiError;

/// Tags at and above this one are the butterfly's; point-to-point users
/// take tags below it.
pub const RESERVED_TAGS: u16 = 1 << 14;

/// One communicator over every rank, with bounded operations on host
/// vectors of any [`Wire`] type (sums of f32). Operations of one
/// communicator must be called in the same order on every rank (MPI's rule
/// for collectives); give each stream its own
/// ([`World::communicator`](crate::World::communicator)).
pub struct Comm {
    raw: RawComm,
    shared: Arc<Shared>,
    /// Operations started on this communicator (their sequence numbers).
    ops: AtomicU64,
    /// The first failure, after which the communicator takes no more work.
    failed: Mutex<Option<MpiError>>,
}

/// A posted request's buffers, by role: what leaks on a timeout.
pub(crate) type Buffers<'a, T> = [&'a mut Vec<T>];

impl Comm {
    pub(crate) fn new(raw: RawComm, shared: Arc<Shared>) -> Comm {
        Comm { raw, shared, ops: AtomicU64::new(0), failed: Mutex::new(None) }
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.shared.rank
    }

    /// How many ranks.
    pub fn size(&self) -> usize {
        self.shared.size
    }

    /// Tells every peer that this rank failed with `cause` (once per
    /// process): their remote operations then fail at once with
    /// [`MpiError::PeerFailed`] instead of by their deadline. For failures
    /// of the rank's own work (a device, a stream); a timeout needs none.
    pub fn announce_failure(&self, cause: &str) {
        notice::announce(&self.shared, &format!("rank {}: {cause}", self.rank()));
    }

    /// The first failure of this communicator, if any.
    pub fn failure(&self) -> Option<MpiError> {
        self.failed.lock().clone()
    }

    fn check_rank(&self, rank: usize) -> Result<(), MpiError> {
        if rank >= self.size() {
            return Err(MpiError::NoSuchRank { rank, size: self.size() });
        }
        if rank == self.rank() {
            let what = format!("rank {rank} would talk to itself (a copy on the rank is a stream copy)");
            return Err(MpiError::BadBuffers { op: "send/recv", what });
        }
        Ok(())
    }

    fn count(op: &'static str, len: usize) -> Result<c_int, MpiError> {
        c_int::try_from(len)
            .map_err(|_| MpiError::BadBuffers { op, what: format!("{len} values exceed MPI's count range") })
    }

    /// Runs one remote operation: `post` posts its requests over `buffers`,
    /// which are tested under `bound`; `peers` are the ranks it waits for
    /// (named on a timeout). Returns the requests' statuses.
    pub(crate) fn bounded<T: Wire>(
        &self,
        op: &str,
        peers: &[usize],
        bound: &RemoteBound,
        buffers: &mut Buffers<'_, T>,
        post: impl FnOnce(&Shared, RawComm, &mut Buffers<'_, T>, &mut Vec<ffi::MPI_Request>) -> Result<(), MpiError>,
    ) -> Result<Vec<ffi::MPI_Status>, MpiError> {
        self.bounded_with(op, peers, bound, buffers, false, post)
    }

    /// As [`bounded`](Self::bounded); with `receives_only` (the requests
    /// are receives), a failed operation's requests are cancelled
    /// (`MPI_Cancel`, well defined for receives) and, once they settle,
    /// its buffers are this rank's again instead of leaked.
    pub(crate) fn bounded_with<T: Wire>(
        &self,
        op: &str,
        peers: &[usize],
        bound: &RemoteBound,
        buffers: &mut Buffers<'_, T>,
        receives_only: bool,
        post: impl FnOnce(&Shared, RawComm, &mut Buffers<'_, T>, &mut Vec<ffi::MPI_Request>) -> Result<(), MpiError>,
    ) -> Result<Vec<ffi::MPI_Status>, MpiError> {
        if let Some(first) = self.failure() {
            return Err(MpiError::Poisoned { rank: self.rank(), first: Box::new(first) });
        }
        if let Some(failed) = notice::peer_failure(&self.shared) {
            let op = op.to_string();
            return Err(MpiError::PeerFailed { rank: self.rank(), op, peer: failed.rank, cause: failed.cause });
        }
        let seq = self.ops.fetch_add(1, Ordering::AcqRel);
        let started = self.shared.started.fetch_add(1, Ordering::AcqRel) + 1;
        let mut requests = Vec::with_capacity(2);
        let posted = post(&self.shared, self.raw, buffers, &mut requests);
        // SAFETY: a zeroed MPI_Status is a valid place for MPI to write to.
        let mut statuses: Vec<ffi::MPI_Status> = (0..requests.len()).map(|_| unsafe { std::mem::zeroed() }).collect();
        let waited = posted.and_then(|()| {
            bound.wait(|| {
                let mut flag: c_int = 0;
                // SAFETY: `requests` holds requests posted above on buffers
                // that stay alive and unmoved until they complete or are
                // leaked below; `statuses` has one place per request.
                let code = self.shared.call(|| unsafe {
                    ffi::MPI_Testall(requests.len() as c_int, requests.as_mut_ptr(), &mut flag, statuses.as_mut_ptr())
                });
                self.shared.check("MPI_Testall", code)?;
                if flag == 0 {
                    if let Some(failed) = notice::peer_failure(&self.shared) {
                        return Err(MpiError::PeerFailed {
                            rank: self.rank(),
                            op: format!("{op} #{seq}"),
                            peer: failed.rank,
                            cause: failed.cause,
                        });
                    }
                }
                Ok(flag != 0)
            })
        });
        let error = match waited {
            Ok(true) => {
                self.shared.finished.fetch_add(1, Ordering::AcqRel);
                return Ok(statuses);
            }
            Ok(false) => MpiError::TimedOut {
                rank: self.rank(),
                op: format!("{op} #{seq}"),
                deadline: bound.deadline,
                silence: liveness::diagnose(&self.shared, peers, started),
            },
            Err(e) => e,
        };
        // Requests may still be pending: unless cancelled, their buffers
        // belong to MPI now.
        let settled = requests.is_empty() || (receives_only && self.cancel(&mut requests, &mut statuses));
        if !settled {
            for buffer in buffers.iter_mut() {
                std::mem::forget(std::mem::take(&mut **buffer));
            }
            std::mem::forget(requests);
            self.shared.leaked.store(true, Ordering::Release);
            self.shared.poisoned.store(true, Ordering::Release);
        } else if let MpiError::TimedOut { .. } = error {
            // A silent peer would hold `MPI_Finalize` for good.
            self.shared.poisoned.store(true, Ordering::Release);
        }
        if let MpiError::Call { .. } = error {
            self.announce_failure(&error.to_string());
        }
        self.failed.lock().get_or_insert_with(|| error.clone());
        Err(error)
    }

    /// Cancels pending receive `requests` and tests them for up to 200 ms:
    /// whether every one settled (cancelled, or matched after all).
    fn cancel(&self, requests: &mut [ffi::MPI_Request], statuses: &mut [ffi::MPI_Status]) -> bool {
        for request in requests.iter_mut() {
            // SAFETY: `request` is an active receive request of this
            // communicator (the operation did not complete).
            let code = self.shared.call(|| unsafe { ffi::MPI_Cancel(request) });
            if code != ffi::MPI_SUCCESS as i32 {
                return false;
            }
        }
        let until = std::time::Instant::now() + std::time::Duration::from_millis(200);
        loop {
            let mut flag: c_int = 0;
            // SAFETY: as in `bounded_with`: live requests, one status each.
            let code = self.shared.call(|| unsafe {
                ffi::MPI_Testall(requests.len() as c_int, requests.as_mut_ptr(), &mut flag, statuses.as_mut_ptr())
            });
            if code != ffi::MPI_SUCCESS as i32 {
                return false;
            }
            if flag != 0 {
                return true;
            }
            if std::time::Instant::now() >= until {
                return false;
            }
            std::thread::yield_now();
        }
    }

    /// Sends `data` to rank `to` with `tag` (below [`RESERVED_TAGS`]),
    /// bounded. Done means the buffer may be reused, not that the peer has
    /// received it.
    pub fn send<T: Wire>(&self, to: usize, tag: u16, data: &mut Vec<T>, bound: &RemoteBound) -> Result<(), MpiError> {
        self.check_rank(to)?;
        self.check_tag(tag)?;
        self.send_raw(to, tag, data, bound).map(drop)
    }

    /// Receives into `data` from rank `from` with `tag`; a message of
    /// another length is an error.
    pub fn recv<T: Wire>(&self, from: usize, tag: u16, data: &mut Vec<T>, bound: &RemoteBound) -> Result<(), MpiError> {
        self.check_rank(from)?;
        self.check_tag(tag)?;
        let expected = data.len();
        let statuses = self.recv_raw(from, tag, data, bound)?;
        let mut got: c_int = 0;
        // SAFETY: the status is the completed receive's; `got` a live place.
        let code = self.shared.call(|| unsafe { ffi::MPI_Get_count(&statuses[0], T::datatype(), &mut got) });
        self.shared.check("MPI_Get_count", code)?;
        if got as usize != expected {
            return Err(MpiError::BadBuffers {
                op: "recv",
                what: format!("rank {from} sent {got} values, {expected} were expected"),
            });
        }
        Ok(())
    }

    fn check_tag(&self, tag: u16) -> Result<(), MpiError> {
        if tag >= RESERVED_TAGS {
            return Err(MpiError::BadBuffers { op: "send/recv", what: format!("tag {tag} is reserved") });
        }
        Ok(())
    }

    pub(crate) fn send_raw<T: Wire>(
        &self,
        to: usize,
        tag: u16,
        data: &mut Vec<T>,
        bound: &RemoteBound,
    ) -> Result<Vec<ffi::MPI_Status>, MpiError> {
        let n = Self::count("send", data.len())?;
        self.bounded(&format!("send of {n} {} to rank {to}", T::NAME), &[to], bound, &mut [data], |s, comm, b, reqs| {
            reqs.push(null_request());
            // SAFETY: the buffer lives until the request completes or is
            // leaked (`bounded`); the communicator is live.
            let code = s.call(|| unsafe {
                ffi::MPI_Isend(
                    b[0].as_ptr().cast::<c_void>(),
                    n,
                    T::datatype(),
                    to as c_int,
                    c_int::from(tag),
                    comm.0,
                    &mut reqs[0],
                )
            });
            s.check("MPI_Isend", code)
        })
    }

    pub(crate) fn recv_raw<T: Wire>(
        &self,
        from: usize,
        tag: u16,
        data: &mut Vec<T>,
        bound: &RemoteBound,
    ) -> Result<Vec<ffi::MPI_Status>, MpiError> {
        let n = Self::count("recv", data.len())?;
        self.bounded_with(
            &format!("receive of {n} {} from rank {from}", T::NAME),
            &[from],
            bound,
            &mut [data],
            true,
            |s, comm, b, reqs| {
                reqs.push(null_request());
                // SAFETY: as in `send_raw`; MPI writes at most `n` values.
                let code = s.call(|| unsafe {
                    ffi::MPI_Irecv(
                        b[0].as_mut_ptr().cast::<c_void>(),
                        n,
                        T::datatype(),
                        from as c_int,
                        c_int::from(tag),
                        comm.0,
                        &mut reqs[0],
                    )
                });
                s.check("MPI_Irecv", code)
            },
        )
    }

    /// Sends `send` to and receives `recv` from `peer` at once (equal
    /// lengths), bounded: one step of the butterfly.
    pub(crate) fn exchange<T: Wire>(
        &self,
        peer: usize,
        tag: u16,
        send: &mut Vec<T>,
        recv: &mut Vec<T>,
        bound: &RemoteBound,
    ) -> Result<(), MpiError> {
        let n = Self::count("exchange", send.len())?;
        let op = format!("exchange of {n} {} with rank {peer}", T::NAME);
        self.bounded(&op, &[peer], bound, &mut [send, recv], |s, comm, b, reqs| {
            reqs.extend([null_request(), null_request()]);
            let (first, rest) = b.split_at_mut(1);
            // SAFETY: as in `send_raw` and `recv_raw`; the two buffers are
            // distinct vectors.
            let code = s.call(|| unsafe {
                ffi::MPI_Irecv(
                    rest[0].as_mut_ptr().cast::<c_void>(),
                    n,
                    T::datatype(),
                    peer as c_int,
                    c_int::from(tag),
                    comm.0,
                    &mut reqs[0],
                )
            });
            s.check("MPI_Irecv", code)?;
            // SAFETY: as above.
            let code = s.call(|| unsafe {
                ffi::MPI_Isend(
                    first[0].as_ptr().cast::<c_void>(),
                    n,
                    T::datatype(),
                    peer as c_int,
                    c_int::from(tag),
                    comm.0,
                    &mut reqs[1],
                )
            });
            s.check("MPI_Isend", code)
        })
        .map(drop)
    }

    /// Every rank's `send` summed element-wise into every rank's `recv`
    /// (equal lengths), by MPI's non-blocking all-reduce; the summation
    /// order is MPI's (it may depend on the size and the rank count).
    pub fn all_reduce_sum(
        &self,
        send: &mut Vec<f32>,
        recv: &mut Vec<f32>,
        bound: &RemoteBound,
    ) -> Result<(), MpiError> {
        if send.len() != recv.len() {
            let what = format!("send has {} values, recv {}", send.len(), recv.len());
            return Err(MpiError::BadBuffers { op: "all-reduce", what });
        }
        let n = Self::count("all-reduce", send.len())?;
        if n == 0 {
            // Every rank passes the same length: none calls MPI.
            return Ok(());
        }
        let peers = self.peers();
        self.bounded(&format!("all-reduce of {n} f32"), &peers, bound, &mut [send, recv], |s, comm, b, reqs| {
            reqs.push(null_request());
            let (first, rest) = b.split_at_mut(1);
            // SAFETY: both buffers live until the request completes or is
            // leaked; they are distinct vectors of `n` values.
            let code = s.call(|| unsafe {
                ffi::MPI_Iallreduce(
                    first[0].as_ptr().cast::<c_void>(),
                    rest[0].as_mut_ptr().cast::<c_void>(),
                    n,
                    ffi::RSMPI_FLOAT,
                    ffi::RSMPI_SUM,
                    comm.0,
                    &mut reqs[0],
                )
            });
            s.check("MPI_Iallreduce", code)
        })
        .map(drop)
    }

    /// Every rank's `send` (equal lengths) concatenated in rank order into
    /// every rank's `recv` (`size` times as long), by MPI's non-blocking
    /// all-gather.
    pub fn all_gather<T: Wire>(
        &self,
        send: &mut Vec<T>,
        recv: &mut Vec<T>,
        bound: &RemoteBound,
    ) -> Result<(), MpiError> {
        if recv.len() != send.len() * self.size() {
            let what = format!("send has {} values, recv {} for {} ranks", send.len(), recv.len(), self.size());
            return Err(MpiError::BadBuffers { op: "all-gather", what });
        }
        let n = Self::count("all-gather", send.len())?;
        if n == 0 {
            // Every rank passes the same length: none calls MPI (whose
            // empty buffers would alias, which it refuses).
            return Ok(());
        }
        let peers = self.peers();
        self.bounded(
            &format!("all-gather of {n} {} per rank", T::NAME),
            &peers,
            bound,
            &mut [send, recv],
            |s, comm, b, reqs| {
                reqs.push(null_request());
                let (first, rest) = b.split_at_mut(1);
                // SAFETY: as in `all_reduce_sum`; `recv` holds `size * n` values.
                let code = s.call(|| unsafe {
                    ffi::MPI_Iallgather(
                        first[0].as_ptr().cast::<c_void>(),
                        n,
                        T::datatype(),
                        rest[0].as_mut_ptr().cast::<c_void>(),
                        n,
                        T::datatype(),
                        comm.0,
                        &mut reqs[0],
                    )
                });
                s.check("MPI_Iallgather", code)
            },
        )
        .map(drop)
    }

    /// Every rank but this one.
    pub(crate) fn peers(&self) -> Vec<usize> {
        (0..self.size()).filter(|&r| r != self.rank()).collect()
    }
}

fn null_request() -> ffi::MPI_Request {
    // SAFETY: reading a predefined MPI constant.
    unsafe { ffi::RSMPI_REQUEST_NULL }
}
