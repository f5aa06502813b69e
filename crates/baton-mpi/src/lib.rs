//! Ranks over MPI: bounded sends, receives and collectives between the
//! processes of an MPI job, queued as gates on a rank's streams.
//!
//! Everything that talks to MPI sits behind this crate's cargo feature
//! `mpi` (off by default), so the workspace builds and tests without MPI
//! installed; `scripts/setup-mpi.sh` installs Open MPI and libclang (rsmpi
//! generates its bindings with bindgen), `scripts/mpirun.sh` launches with
//! the environment Open MPI needs in containers and as root, and
//! `scripts/test-mpi.sh` runs the tests under 2 and 3 ranks. Without the
//! feature the crate holds what needs no MPI: the errors, the
//! [`RemoteBound`] waiting loop and the butterfly's summation order.
//!
//! # Design
//!
//! - **Initialisation** ([`World::init`]): asks for `MPI_THREAD_MULTIPLE`,
//!   so every stream's worker thread runs its own remote operations. With
//!   `MPI_THREAD_SERIALIZED`, Baton takes one process-wide lock around
//!   every MPI call (correct; slower when several streams talk at once);
//!   with `FUNNELED` or `SINGLE` it refuses with
//!   [`MpiError::ThreadLevel`]: a stream worker is never the main thread.
//!   Every communicator returns errors (`MPI_ERRORS_RETURN`, set through
//!   the raw bindings) instead of aborting the job, so an MPI error becomes
//!   a typed [`MpiError`] and a stream failure like any other.
//! - **Bounded operations** ([`Comm`]): each is non-blocking (`MPI_Isend`,
//!   `MPI_Irecv`, `MPI_Iallreduce`, `MPI_Iallgather`) and its requests are
//!   tested with `MPI_Testall` in a loop shaped by the edge's wait policy
//!   ([`RemoteBound`]: MPI has no blocking wait with a deadline, and it
//!   progresses only inside MPI calls, so `poll` tests without sleeping,
//!   `spin` and `block` test back to back yielding the core for 2 ms,
//!   `spin` after its spin time of pure polling, then sleep 10 to 100 µs
//!   between tests), until the deadline (default 30 s,
//!   `BATON_REMOTE_DEADLINE`). A timed-out operation's buffers stay with
//!   MPI (leaked: a non-blocking collective cannot be cancelled) and its
//!   communicator takes no more work; the process then does not call
//!   `MPI_Finalize` (which would wait for the silent rank) and exits, and
//!   `mpirun` ends the job.
//! - **Naming the silent rank** (`liveness`): every rank runs a small
//!   thread that answers pings on a communicator of their own with how many
//!   remote operations it has started and finished. A rank whose operation
//!   timed out pings the operation's peers: a peer that does not answer
//!   within 1.5 s is *silent* (stopped, hung, unreachable); one that
//!   answers with fewer operations started is *behind*. Both are in the
//!   error ([`Silence`]).
//! - **Gates on a stream** ([`RankStream`]): a remote operation is three
//!   items on the rank's stream: a read of the input tensor into host
//!   memory (after the work queued before it), a host function that runs
//!   the bounded operation and settles a point of the rank stream's own
//!   host timeline, and a wait on that point followed by a write of the
//!   result into the output tensor. The gate returns the write's point: a
//!   consumer on any stream waits on it; the host never waits. A timeout
//!   fails the host-timeline point with a `TimedOut` first cause whose
//!   message names the silent ranks, and the stream fails with it.
//!   Staging through host memory costs a copy on CPU devices and is what a
//!   GPU without GPU-aware MPI needs anyway. Each stream that runs remote
//!   operations has its own communicator, so the collectives of two streams
//!   never match each other; within one stream, the stream's order is the
//!   order of MPI calls, the same on every rank (SPMD).
//! - **Two all-reduces**: MPI's own ([`Transport::Native`], whose summation
//!   order is MPI's choice and may change with the size and rank count)
//!   and the butterfly over point-to-point ([`Transport::Butterfly`], in
//!   [`tree_sum`]'s order, the same bits on every rank), so both can be
//!   measured (`examples/mpi_bench.rs`).
//!
//! # The contract over MPI (docs/contract.md)
//!
//! A gate is ordinary stream work, so the stream rules hold for it on
//! each rank: `Q-FIFO` and `Q-NONBLOCK` (queueing a gate never blocks the
//! host), `W-ORDER` and `C-ORDER` (the input is read after the work queued
//! before; a consumer waits on the returned point), `P-VISIBLE` (the output
//! is written by the stream's own write item before its point), `E-STICKY`
//! and `W-FAIL` (a failed gate fails its stream and whoever waits on it,
//! with the first cause), `M-ORDER` (the read and the write are tracked
//! accesses). `W-BOUND` holds with the remote deadline: a silent peer
//! becomes a `TimedOut` failure naming it. Across ranks, points are not
//! shared: a stream on one rank cannot wait on a point of another rank
//! directly, only on the local point of a receive or gate, so `W-FOREIGN`
//! is the rule for a remote point (a later `RemoteDevice` wrapper will
//! turn a cross-rank wait into a receive). `D-CANCEL` holds locally (a
//! dropped `Release` before a gate fails it before it posts anything), but
//! an operation already posted cannot be withdrawn: its peers fail by
//! their deadline, not at once.
//!
//! # Not yet
//!
//! The `Collective` trait of baton-composite is not implemented by this
//! crate yet: it queues gates over one process's streams, while a rank has
//! only its own; ranks as devices (`cpu@0,cpu@1`) in the CLI, the
//! scheduler's cross-rank copies and the tensor split's gates over MPI
//! build on [`RankStream`].
#![deny(missing_docs)]

mod bound;
mod butterfly;
mod error;
mod placement;

pub use bound::{RemoteBound, DEFAULT_REMOTE_DEADLINE};
pub use butterfly::tree_sum;
pub use error::{MpiError, PeerProgress, Silence};
pub use placement::{local_devices, parse_ranked, RankedDevice};

#[cfg(feature = "mpi")]
mod comm;
#[cfg(feature = "mpi")]
mod gate;
#[cfg(feature = "mpi")]
mod gather;
#[cfg(feature = "mpi")]
mod liveness;
#[cfg(feature = "mpi")]
mod staging;
#[cfg(feature = "mpi")]
mod wire;
#[cfg(feature = "mpi")]
mod world;

#[cfg(feature = "mpi")]
pub use comm::{Comm, RESERVED_TAGS};
#[cfg(feature = "mpi")]
pub use gate::{RankStream, Transport};
#[cfg(feature = "mpi")]
pub use wire::Wire;
#[cfg(feature = "mpi")]
pub use world::World;
