//! What the experts' product keeps between calls (`experts::matmul_id`),
//! so a warm stream allocates nothing per step.

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
}
