//! What every communicator and the liveness responder of this rank share:
//! the communicator handle, the counters and flags of remote operations and
//! failure notices, and the lock of a serialised MPI.

use std::sync::atomic::{AtomicBool, AtomicU64};

use baton_core::loom::Mutex;
use mpi::ffi;

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
    pub(crate) peer_failure: Mutex<Option<PeerFailure>>,
}

impl Shared {
    /// The state of a rank that has announced and heard no failure yet,
    /// with `control` as its liveness communicator (replaced by a duplicate
    /// once the state can make one); `serialized`: MPI gave only
    /// `MPI_THREAD_SERIALIZED`, so every call takes one lock.
    pub(crate) fn new(rank: usize, size: usize, serialized: bool, control: RawComm) -> Shared {
        Shared {
            rank,
            size,
            serialized,
            call_lock: Mutex::new(()),
            started: AtomicU64::new(0),
            finished: AtomicU64::new(0),
            poisoned: AtomicBool::new(false),
            leaked: AtomicBool::new(false),
            control,
            pings: AtomicU64::new(0),
            announced: AtomicBool::new(false),
            finalizing: AtomicBool::new(false),
            peer_failed: AtomicBool::new(false),
            peer_failure: Mutex::new(None),
        }
    }

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
pub(crate) fn set_errors_return(shared: &Shared, comm: RawComm) -> Result<(), MpiError> {
    // SAFETY: `comm` is a live communicator and MPI_ERRORS_RETURN a
    // predefined error handler.
    let code = shared.call(|| unsafe { ffi::MPI_Comm_set_errhandler(comm.0, ffi::RSMPI_ERRORS_RETURN) });
    shared.check("MPI_Comm_set_errhandler", code)
}

/// A failure another rank told this one about.
#[derive(Clone, Debug)]
pub(crate) struct PeerFailure {
    pub(crate) rank: usize,
    pub(crate) cause: String,
}
