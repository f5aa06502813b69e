//! The model crate's tests, one test binary (`--test it`): synthetic models,
//! bad input, batches, layer and tensor split, and, behind
//! `reference-tests`, the NumPy reference.

mod bad_input;
mod batch;
mod cache_types;
mod embedding;
mod expert_split;
mod experts_placed;
mod gemma4;
mod hybrid;
mod hybrid_rewind;
mod kv_blocks;
mod kv_copy;
mod long_context;
mod mapped;
mod mtp;
mod reference;
mod ring;
mod split;
mod tensor_parallel;
mod warm_up;
