//! Tensor parallelism as a backend: a composite device over N devices.
//!
//! A backend over backends: depends on baton-core alone and wraps any
//! `Device`; baton-model builds its tensor-parallel models on it, and
//! baton-cli opens it.
//!
//! Layer splits add capacity but not speed to one sequence: one device
//! works at a time. A [`CompositeDevice`] splits every weight over its
//! devices instead, so all of them work on every token, and it is itself a
//! Baton backend (`Device`, `RawStream`, `RawBuffer`): the model, the
//! scheduler and the conformance suite see one device.
//!
//! # Design
//!
//! - **Memory** ([`CompositeBuffer`]): one buffer per inner device. A plain
//!   allocation is mirrored (every part holds all bytes, any range usable);
//!   [`CompositeDevice::alloc_split`] holds one tensor as a
//!   [`TensorSplit`]: split along an axis (each device a list of segments,
//!   uneven shares allowed: 9 heads over 2 devices), mirrored, or partial
//!   sums. Writes scatter the host bytes, reads gather them (summing partial
//!   sums).
//! - **Streams** (`stream.rs`): one inner stream per device and a timeline
//!   of the composite's own. Item `n` runs on the inner streams after each
//!   has waited for item `n - 1`'s completion, then inner stream 0 waits for
//!   the others and advances the composite timeline in a host function. If
//!   an inner stream fails, that host function is dropped unrun and fails
//!   the composite timeline with the same first cause; every cross-device
//!   wait is on a point that then fails too, so nothing hangs.
//! - **Partitions** ([`partition`]): a graph is cut, once per graph and
//!   bindings' splits, into per-device subgraphs. Leaves take their
//!   binding's state, computed nodes derive theirs from their inputs (a
//!   matmul with split weight rows gives split columns; with the inner
//!   dimension split on both sides, partial sums), views map the split
//!   through their strides. Where a partial sum meets an op that needs the
//!   whole value (the residual add after attention and after the FFN), the
//!   segment ends and a gate follows.
//! - **Gates** ([`collective`]): all-reduce and all-gather through the
//!   [`Collective`] trait, which a native library can implement (NCCL,
//!   MPI); the built-in [`Butterfly`] relies only on the copy contract: a
//!   butterfly of [`exchange`]s (two tensors between two devices, each copy
//!   on the receiver's stream after the sender's point) and one-op add
//!   graphs, with devices beyond a power of two folded in. Every wait of a
//!   gate uses the device's wait policy (the edge's), so `poll` makes every
//!   gate a fast fence.
#![deny(missing_docs)]

mod buffer;
pub mod collective;
mod device;
mod error;
mod exec;
mod mapped;
pub mod partition;
mod prepared;
mod profile;
mod split;
mod stream;

pub use buffer::{CompositeBuffer, SplitTensor};
pub use collective::{exchange, Butterfly, Collective, GateIo, GateKept, GateKind, GateSpec};
pub use device::CompositeDevice;
pub use error::CompositeError;
pub use partition::Partition;
pub use profile::{GateProfile, GateTime};
pub use split::{gather_bytes, scatter_bytes, TensorSplit};
