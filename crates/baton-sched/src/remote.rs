//! Devices of other processes: the hook through which a runner whose plan
//! spans several processes (ranks of an MPI job) moves crossing tensors.
//!
//! Every process builds the same plan over the same device list (SPMD); a
//! device of another process is a stand-in there. The runner runs only the
//! splits of its own devices, and an edge between two processes becomes a
//! send queued on the producer's stream in its process and a receive queued
//! on the consumer's stream in the other, each completing a point of its
//! own stream: a consumer waits on the receive's point, never the host.

use baton_core::backend::{Stream, TensorRef};
use baton_core::sync::SyncPoint;

use crate::error::SchedError;

/// Moves crossing tensors between the devices of different processes.
///
/// The runner calls [`send`](Self::send) and [`recv`](Self::recv) in the
/// plan's order, the same order in every process, with a `tag` that is the
/// index of the crossing in the run (counting every cross-device copy of the
/// plan, local or not): a send and its receive carry the same tag, and the
/// sends of one edge are queued in run order.
pub trait RemoteEdges: Send + Sync {
    /// Whether device `device` (an index of the runner's devices) runs its
    /// work in this process.
    fn is_local(&self, device: usize) -> bool;

    /// Queues, on `stream` (the local device `from`'s), a send of `src` to
    /// the process of device `to`, after `producer` when given (the point of
    /// the work that wrote `src` on another stream). Returns the point after
    /// which `src` may be rewritten.
    fn send(
        &self,
        stream: &Stream,
        src: &TensorRef,
        from: usize,
        to: usize,
        tag: u32,
        producer: Option<&SyncPoint>,
    ) -> Result<SyncPoint, SchedError>;

    /// Queues, on `stream` (the local device `to`'s), a receive into `dst`
    /// from the process of device `from`. Returns the point after which
    /// `dst` holds the bytes: consumers on any stream wait on it.
    fn recv(&self, stream: &Stream, dst: &TensorRef, from: usize, to: usize, tag: u32)
        -> Result<SyncPoint, SchedError>;

    /// Gives every process the host copy of an output of device `owner`
    /// (the logits the caller samples from): the owner's process sends
    /// `values`, every other receives into them. Called by every process in
    /// the same order; the host waits for it, bounded (it has waited for
    /// the output's read just before).
    fn share(&self, values: &mut [f32], owner: usize) -> Result<(), SchedError>;
}
