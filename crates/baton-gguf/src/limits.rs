//! The format's bounds on a tensor's dims and on nested arrays, which the
//! reader checks and the writer keeps.

/// The most dims a tensor may have (ggml's `GGML_MAX_DIMS`).
pub const MAX_DIMS: usize = 4;
/// The deepest arrays may nest (a flat array has depth 1).
pub const MAX_ARRAY_NESTING: usize = 8;
