//! The MPI process: initialisation, the thread level, communicators.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use baton_core::loom::Mutex;
use mpi::environment::{Threading, Universe};
use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::Communicator;

use crate::comm::Comm;
use crate::liveness;
use crate::MpiError;

/// An MPI communicator handle, shared between the threads of this rank.
#[derive(Clone, Copy)]
pub(crate) struct RawComm(pub(crate) ffi::MPI_Comm);

// SAFETY: an MPI communicator handle is an opaque reference into the MPI
// library, usable from any thread of the process under
// MPI_THREAD_MULTIPLE; under MPI_THREAD_SERIALIZED every call through it
// takes `World`'s call lock (`Shared::call`), and `World::init` refuses
// lower levels. The handle itself is never written after creation.
unsafe impl Send for RawComm {}
// SAFETY: as above: shared references only read the handle.
unsafe impl Sync for RawComm {}

/// What every communicator and the liveness responder of this rank share.
pub(crate) struct Shared {
    pub(crate) rank: usize,
    pub(crate) size: usize,
    /// MPI gave `Serialized`: every call takes `call_lock`.
    serialized: bool,
    call_lock: Mutex<()>,
    /// Remote operations started and finished on this rank (all
    /// communicators): what a peer's liveness ping is told.
    pub(crate) started: AtomicU64,
    pub(crate) finished: AtomicU64,
    /// Set once an operation has left requests to MPI: finalising would
    /// wait for a peer that may never come, so the process must not.
    pub(crate) poisoned: AtomicBool,
    /// Set once an operation's requests and buffers were left to MPI (not
    /// cancelled): MPI must never be finalised then.
    pub(crate) leaked: AtomicBool,
    /// The communicator of liveness pings (a duplicate of the world's).
    pub(crate) control: RawComm,
    /// The next ping's number (tags of the answers).
    pub(crate) pings: AtomicU64,
    /// This rank told its peers of its failure (`notice`).
    pub(crate) announced: AtomicBool,
    /// MPI is being finalised: no more notices.
    pub(crate) finalizing: AtomicBool,
    /// A peer told this rank of its failure: the flag, then the first.
    pub(crate) peer_failed: AtomicBool,
    pub(crate) peer_failure: Mutex<Option<crate::notice::PeerFailure>>,
}

impl Shared {
    /// Runs one MPI call, serialised when the thread level asks for it.
    pub(crate) fn call<T>(&self, f: impl FnOnce() -> T) -> T {
        if self.serialized {
            let _one_at_a_time = self.call_lock.lock();
            f()
        } else {
            f()
        }
    }

    /// `Ok` for `MPI_SUCCESS`, else the typed error with MPI's text.
    pub(crate) fn check(&self, call: &'static str, code: i32) -> Result<(), MpiError> {
        if code == ffi::MPI_SUCCESS as i32 {
            return Ok(());
        }
        Err(MpiError::Call { rank: self.rank, call, code, message: self.error_text(code) })
    }

    fn error_text(&self, code: i32) -> String {
        let mut text = vec![0u8; ffi::MPI_MAX_ERROR_STRING as usize + 1];
        let mut len: std::os::raw::c_int = 0;
        // SAFETY: MPI writes at most MPI_MAX_ERROR_STRING bytes and the
        // length into the two live buffers given.
        let got = self.call(|| unsafe { ffi::MPI_Error_string(code, text.as_mut_ptr().cast(), &mut len) });
        if got != ffi::MPI_SUCCESS as i32 {
            return format!("unknown MPI error code {code}");
        }
        text.truncate(len.max(0) as usize);
        String::from_utf8_lossy(&text).into_owned()
    }

    /// Duplicates `comm` and makes the copy return errors instead of
    /// aborting the job (collective over `comm`).
    pub(crate) fn duplicate(&self, comm: RawComm) -> Result<RawComm, MpiError> {
        // SAFETY: a null communicator handle is a valid value to be
        // overwritten by MPI_Comm_dup.
        let mut dup: ffi::MPI_Comm = unsafe { ffi::RSMPI_COMM_NULL };
        // SAFETY: `comm` is a live communicator and `dup` a place for the
        // new handle.
        let code = self.call(|| unsafe { ffi::MPI_Comm_dup(comm.0, &mut dup) });
        self.check("MPI_Comm_dup", code)?;
        set_errors_return(self, RawComm(dup))?;
        Ok(RawComm(dup))
    }
}

/// Makes MPI return error codes from calls on `comm` instead of aborting
/// the job (`MPI_ERRORS_RETURN`; rsmpi has no wrapper for it).
fn set_errors_return(shared: &Shared, comm: RawComm) -> Result<(), MpiError> {
    // SAFETY: `comm` is a live communicator and MPI_ERRORS_RETURN a
    // predefined error handler.
    let code = shared.call(|| unsafe { ffi::MPI_Comm_set_errhandler(comm.0, ffi::RSMPI_ERRORS_RETURN) });
    shared.check("MPI_Comm_set_errhandler", code)
}

/// This process's place in the MPI job: initialised once, finalised when
/// dropped (unless an operation left requests to MPI, see
/// [`World::drop`](#impl-Drop-for-World)).
pub struct World {
    shared: Arc<Shared>,
    threading: Threading,
    stop: Arc<AtomicBool>,
    responder: Option<JoinHandle<()>>,
    /// Dropped last: finalises MPI.
    universe: Option<Universe>,
}

impl World {
    /// Initialises MPI asking for `MPI_THREAD_MULTIPLE` (any thread calls
    /// MPI: each stream's worker runs its own gates). With `Serialized`,
    /// Baton takes one lock around every MPI call of the process (correct,
    /// and slower under contention); `Funneled` or `Single` is
    /// [`MpiError::ThreadLevel`]. The world communicator returns errors
    /// instead of aborting, and a liveness responder thread starts (it
    /// answers the pings of a rank whose remote operation timed out).
    pub fn init() -> Result<World, MpiError> {
        let (universe, threading) =
            mpi::initialize_with_threading(Threading::Multiple).ok_or(MpiError::AlreadyInitialized)?;
        let serialized = match threading {
            Threading::Multiple => false,
            Threading::Serialized => true,
            Threading::Funneled => return Err(MpiError::ThreadLevel { obtained: "funneled" }),
            Threading::Single => return Err(MpiError::ThreadLevel { obtained: "single" }),
        };
        let world = universe.world();
        let world_raw = RawComm(world.as_raw());
        let mut shared = Shared {
            rank: world.rank() as usize,
            size: world.size() as usize,
            serialized,
            call_lock: Mutex::new(()),
            started: AtomicU64::new(0),
            finished: AtomicU64::new(0),
            poisoned: AtomicBool::new(false),
            leaked: AtomicBool::new(false),
            control: world_raw,
            pings: AtomicU64::new(0),
            announced: AtomicBool::new(false),
            finalizing: AtomicBool::new(false),
            peer_failed: AtomicBool::new(false),
            peer_failure: Mutex::new(None),
        };
        set_errors_return(&shared, world_raw)?;
        shared.control = shared.duplicate(world_raw)?;
        let shared = Arc::new(shared);
        let stop = Arc::new(AtomicBool::new(false));
        let responder = liveness::spawn_responder(shared.clone(), stop.clone());
        Ok(World { shared, threading, stop, responder: Some(responder), universe: Some(universe) })
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.shared.rank
    }

    /// How many ranks the job has.
    pub fn size(&self) -> usize {
        self.shared.size
    }

    /// The thread level MPI gave (`multiple` or `serialized`).
    pub fn threading(&self) -> &'static str {
        match self.threading {
            Threading::Multiple => "multiple",
            Threading::Serialized => "serialized",
            Threading::Funneled => "funneled",
            Threading::Single => "single",
        }
    }

    /// A new communicator over every rank, of its own (a duplicate of the
    /// world's that returns errors): one per stream that runs remote
    /// operations, so two streams' collectives never match each other.
    /// Collective: every rank makes its communicators in the same order.
    pub fn communicator(&self) -> Result<Comm, MpiError> {
        let world = self.universe.as_ref().map(|u| RawComm(u.world().as_raw()));
        let world = world.ok_or(MpiError::AlreadyInitialized)?;
        let raw = self.shared.duplicate(world)?;
        Ok(Comm::new(raw, self.shared.clone()))
    }

    /// Forgets a failure notice this rank received, and lets it announce a
    /// failure again: for a suite that fails a rank on purpose (`baton
    /// conformance` across ranks), once every rank has seen that failure
    /// and the ranks have met since (none is silent). MPI is finalised at
    /// exit again unless an operation left its requests to MPI.
    /// Communicators whose operation failed stay failed.
    pub fn forget_failure_notices(&self) {
        if !self.shared.leaked.load(Ordering::Acquire) {
            self.shared.poisoned.store(false, Ordering::Release);
        }
        *self.shared.peer_failure.lock() = None;
        self.shared.peer_failed.store(false, Ordering::Release);
        self.shared.announced.store(false, Ordering::Release);
    }

    /// Ends the whole job at once with `code` (`MPI_Abort`): what a rank
    /// does when a remote operation failed, so no rank waits for a dead or
    /// silent one in `MPI_Finalize`.
    pub fn abort(&self, code: i32) -> ! {
        // SAFETY: the world communicator is live until finalisation, which
        // has not happened (`self` is alive).
        let world = self.universe.as_ref().map(|u| u.world().as_raw());
        if let Some(world) = world {
            // SAFETY: as above.
            self.shared.call(|| unsafe { ffi::MPI_Abort(world, code) });
        }
        std::process::exit(code)
    }
}

impl Drop for World {
    /// Stops the liveness responder, then finalises MPI, unless a remote
    /// operation failed and left requests to MPI: `MPI_Finalize` would then
    /// wait for a peer that may never answer, so MPI is left as it is and
    /// the process's exit ends the job (`mpirun` reports it).
    fn drop(&mut self) {
        self.shared.finalizing.store(true, Ordering::Release);
        self.stop.store(true, Ordering::Release);
        if let Some(responder) = self.responder.take() {
            if responder.join().is_err() {
                tracing::error!("the MPI liveness responder panicked");
            }
        }
        if self.shared.poisoned.load(Ordering::Acquire) {
            tracing::warn!("rank {}: not finalising MPI after a failed remote operation", self.shared.rank);
            std::mem::forget(self.universe.take());
        }
    }
}
