//! Baton's core: element types, tensors and graphs, timelines and sync
//! points, and the backend contract (see `docs/contract.md`).
#![deny(missing_docs)]

pub mod dtype;
pub mod parallel;

pub use dtype::DType;
pub use parallel::Parallel;
