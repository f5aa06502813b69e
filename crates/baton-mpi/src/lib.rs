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
//!   `BATON_REMOTE_DEADLINE`). A failed operation's communicator takes no
//!   more work. A failed receive is cancelled (`MPI_Cancel`) and its
//!   buffer comes back; the buffers of any other failed operation stay
//!   with MPI (leaked: a non-blocking collective cannot be cancelled).
//!   After a timeout or a leak the process does not call `MPI_Finalize`
//!   (which would wait for the silent rank) and exits, and `mpirun` ends
//!   the job.
//! - **Naming the silent rank** (`liveness`): every rank runs a small
//!   thread that answers pings on a communicator of their own with how many
//!   remote operations it has started and finished. A rank whose operation
//!   timed out pings the operation's peers: a peer that does not answer
//!   within 1.5 s is *silent* (stopped, hung, unreachable); one that
//!   answers with fewer operations started is *behind*. Both are in the
//!   error ([`Silence`]).
//! - **Failing at once** (`notice`): a rank that fails with an error (its
//!   stream failed before a gate, an MPI call failed; or
//!   [`Comm::announce_failure`] for any other cause) sends the first cause
//!   to every peer on the liveness communicator; their responders record
//!   it and every pending or later remote operation fails at its next test
//!   with [`MpiError::PeerFailed`] carrying that cause (about 1 ms here),
//!   not by the deadline. Timeouts are not announced: each peer names the
//!   silent ranks itself.
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
//! # Summation order (what the tests compare bit for bit)
//!
//! The butterfly's result is bit for bit [`tree_sum`] of the ranks' values,
//! on every rank, for any rank count. MPI's all-reduce is bit for bit the
//! plain sum with 2 ranks (`x0 + x1` is the only order) and for values whose
//! sums are exact (small integers); with 3 or more ranks its order is
//! MPI's, and the tests bound it by `ranks * eps * sum |x|`. All-gathers,
//! sends and receives move bytes: bit for bit always.
//!
//! # Ranks as devices: what is here, what comes next
//!
//! Here: device lists with ranks ([`parse_ranked`]: `cpu@0,cpu:1@1`), the
//! CLI's `baton devices` over every rank (feature `mpi` of baton-cli), and
//! [`Comm::all_gather_bytes`] for what ranks must agree on; bad launches
//! ([`Comm::agree`]: the command line, the model file's size and a hash of
//! its first MiB, before any weight is loaded; a device list naming a rank
//! the job lacks), an error on every rank. **Layer splits over ranks**:
//!
//! - [`RemoteDevice`] stands in, on each rank, for a device of another
//!   rank: its buffers hold no memory and its streams run nothing (each
//!   item is reached as it is queued). Every rank builds the same plan over
//!   the same device list (SPMD).
//! - The scheduler (`baton_sched::Runner::set_remote`, with
//!   `baton_sched::RemoteEdges`) runs only the splits of local devices; a
//!   crossing whose producer and consumer are on different ranks becomes
//!   [`RankStream::send`] on the producer's stream and
//!   [`RankStream::recv`] on the consumer's, each completing a point of its
//!   stream: a consumer waits on the receive's point, never the host.
//!   [`RankEdges`] gives each cross-rank pair of devices a communicator of
//!   its own, so each side posts one edge's messages from one stream in the
//!   plan's order and MPI's in-order matching pairs them (the tag is the
//!   crossing's index in the run); runs in flight (`--n-copies`) work as in
//!   one process. Every send and receive is bounded by the remote deadline
//!   and names a silent peer like any gate.
//! - `baton_model::Model::load_over_ranks`: each rank uploads only its own
//!   devices' weights; the logits go from the last layer's rank to every
//!   rank (`RemoteEdges::share`, on the host: the host reads them anyway),
//!   so every rank samples the same token and stops at the same step; rank
//!   0 prints. `baton run` and `baton bench` with `--devices cpu@0,cpu@1`
//!   give text and logits bit for bit one process's
//!   (`scripts/test-mpi.sh`).
//!
//! **Tensor splits over ranks** ([`MpiCollective`], baton-composite's
//! `Collective`): every rank builds the same composite device over the
//! device list (`--devices cpu@0,cpu@1 -sm tensor`, one device on each
//! rank), its own device real and the others stand-ins, led by its own
//! device (`CompositeDevice::with_leader`: that stream joins each item,
//! runs the host functions and reads mirrored memory, such as the
//! all-gathered logits every rank samples from). Each gate is queued on the
//! local device's stream only, as a [`RankStream`] operation with the
//! gate's wait policy and the remote deadline: all-reduces by MPI
//! ([`Transport::Native`]) or by the butterfly ([`Transport::Butterfly`],
//! `--rank-collective butterfly`), all-gathers of uneven segments by
//! `MPI_Iallgatherv` ([`RankStream::all_gather_parts`], [`Segments`]).
//! The communicator of each composite stream is made at its first gate
//! (a collective: the same order on every rank). With `--tensor-exact`
//! the logits are bit for bit one process's `-sm tensor`; with partial
//! sums over 2 ranks too (`x0 + x1` is the only order), within the
//! in-process bound with more.
//!
//! Next, in this order:
//!
//! 1. `baton plan --hosts` (the cost model). The conformance rules with
//!    the other device on the other rank run in `baton conformance` under
//!    mpirun (baton-cli's `conformance_ranks`, docs/contract.md).
//! 2. Only the logits' owner and rank 0 need the logits: rank 0 could
//!    sample and broadcast the token instead (vocabulary-sized messages to
//!    every rank today; under `-sm tensor`, the logits' all-gather).
#![deny(missing_docs)]
// The design above links the MPI types, which exist only with the feature.
#![cfg_attr(not(feature = "mpi"), allow(rustdoc::broken_intra_doc_links))]

mod bound;
mod butterfly;
mod error;
mod placement;
mod remote;
mod segments;

pub use bound::{RemoteBound, DEFAULT_REMOTE_DEADLINE};
pub use butterfly::tree_sum;
pub use error::{MpiError, PeerProgress, Silence};
pub use placement::{local_devices, parse_ranked, RankedDevice};
pub use remote::RemoteDevice;
pub use segments::Segments;

#[cfg(feature = "mpi")]
mod collective;
#[cfg(feature = "mpi")]
mod comm;
#[cfg(feature = "mpi")]
mod edges;
#[cfg(feature = "mpi")]
mod gate;
#[cfg(feature = "mpi")]
mod gather;
#[cfg(feature = "mpi")]
mod liveness;
#[cfg(feature = "mpi")]
mod notice;
#[cfg(feature = "mpi")]
mod shared;
#[cfg(feature = "mpi")]
mod staging;
#[cfg(feature = "mpi")]
mod wire;
#[cfg(feature = "mpi")]
mod world;

#[cfg(feature = "mpi")]
pub use collective::MpiCollective;
#[cfg(feature = "mpi")]
pub use comm::{Comm, RESERVED_TAGS};
#[cfg(feature = "mpi")]
pub use edges::RankEdges;
#[cfg(feature = "mpi")]
pub use gate::{RankStream, Transport};
#[cfg(feature = "mpi")]
pub use wire::Wire;
#[cfg(feature = "mpi")]
pub use world::World;
