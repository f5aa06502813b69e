//! A partition's steps with their memory resolved: what `exec` runs and
//! what a partition keeps per set of bound tensors.

use baton_core::backend::{BoundGraph, TensorRef};

use crate::collective::GateKept;

/// One step's memory, resolved once per partition and bound tensors.
pub(crate) enum Prepared {
    /// Per device, a segment's graph with its bindings, checked once.
    Segment(Vec<BoundGraph>),
    /// A gate's memory.
    Gate(GateMemory),
}

/// A gate's inputs, outputs and scratch, per device, and what the
/// collective keeps for them.
pub(crate) struct GateMemory {
    pub(crate) inputs: Vec<TensorRef>,
    pub(crate) outputs: Vec<TensorRef>,
    pub(crate) scratch: Vec<Vec<TensorRef>>,
    pub(crate) kept: GateKept,
}
