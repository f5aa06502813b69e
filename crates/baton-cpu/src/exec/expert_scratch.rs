//! What the experts' product keeps between calls (`experts::matmul_id`),
//! so a warm stream allocates nothing per step.

use baton_core::graph::NodeId;
use baton_kernels::Scratch;

/// The experts' product's buffers.
#[derive(Default)]
pub(crate) struct ExpertScratch {
    /// The input rows, gathered by expert.
    pub(super) x: Vec<f32>,
    /// The output rows, by expert.
    pub(super) y: Vec<f32>,
    /// Output row of each gathered row.
    pub(super) order: Vec<usize>,
    /// One activation scratch per expert with rows in a step.
    pub(super) scratches: Vec<Scratch>,
    /// Where each expert's rows start in `x` (and one past the last).
    pub(super) starts: Vec<usize>,
    /// The next free place of each expert while rows are sorted (kept, so
    /// that a step does not allocate it per product).
    pub(super) next: Vec<usize>,
    /// The layer's index of the first expert `starts` counts (0 but for a
    /// share of the experts).
    pub(super) first: usize,
    /// The input and ids `x`, `order`, `starts` and the scratches' quantized
    /// rows were made from, while nothing else has run since (the gate and
    /// up products of one step read the same rows: gathered and quantized
    /// once); set only after a product through the scratches. The executor
    /// clears it whenever another op runs, and at each computation's start.
    pub(crate) last: Option<(NodeId, NodeId)>,
}
