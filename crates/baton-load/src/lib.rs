//! Opening devices by name and loading a model over them.
//!
//! `baton run` and the Python package (`baton.Llama`) take the same
//! device lists (`cpu`, `cpu:0,cpu:1`, `vulkan:0`, or a mix) and split
//! modes (`none`, `layer`, `tensor`); this crate is where both turn them
//! into a loaded, warmed-up [`Model`](baton_model::Model). The device kinds
//! Baton knows live in one place, the [`registry`]. Ranks of an MPI job are
//! the command line's own business (`baton-cli`); the registry reads their
//! `@R` suffix.
#![deny(missing_docs)]

mod error;
mod model;
pub mod registry;

pub use error::LoadError;
pub use model::{load_model, return_freed_heap, SplitMode};
pub use registry::open_devices;
