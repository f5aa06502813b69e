//! The MPI process: initialisation, the thread level, communicators.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use mpi::environment::{Threading, Universe};
use mpi::ffi;
use mpi::raw::AsRaw;
use mpi::topology::Communicator;

use crate::comm::Comm;
use crate::liveness;
use crate::shared::{set_errors_return, RawComm, Shared};
use crate::MpiError;

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
        let mut shared = Shared::new(world.rank() as usize, world.size() as usize, serialized, world_raw);
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
