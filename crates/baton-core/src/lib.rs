//! Baton's core: element types, tensors and graphs, timelines and sync
//! points, and the backend contract (see `docs/contract.md`).
//!
//! The bottom of the workspace (README, "How it is built"): it depends on no
//! other Baton crate, and every crate but baton-gguf and baton-tokenizer
//! depends on it; the backends implement its contract, the scheduler and
//! the model run on it, the conformance suite checks it.
#![deny(missing_docs)]

pub mod dtype;
pub mod parallel;

pub use dtype::DType;
pub use parallel::Parallel;
pub mod loom;
pub mod sync;

pub use sync::{SyncPoint, Timeline, WaitError};
pub mod graph;
pub mod shape;

pub use graph::{Flags, Graph, NodeId, Op};
pub use shape::{Layout, Shape};
pub mod backend;

pub use backend::{Bindings, Buffer, Device, IntoDevice, Stream, StreamError, TensorRef};
