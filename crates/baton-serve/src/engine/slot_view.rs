//! What a sequence slot holds, as the worker last published it (what
//! llama-server's `GET /slots` tells).

/// One sequence slot's state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlotView {
    /// The slot's number (0 to `--parallel` - 1).
    pub id: usize,
    /// Whether a generation, an embedding or a scoring pass runs in it.
    pub is_processing: bool,
    /// Positions its cache holds: a running generation's written
    /// positions, or the prefix a free slot keeps for the prefix cache.
    pub n_tokens: usize,
    /// The running generation's prompt tokens (0 otherwise).
    pub n_prompt_tokens: usize,
    /// Tokens it has generated (0 otherwise).
    pub n_decoded: usize,
    /// Tokens it may still generate (0 otherwise).
    pub n_remain: usize,
}
