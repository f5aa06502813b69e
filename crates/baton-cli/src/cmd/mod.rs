//! The verbs of `baton`, one module each.

pub mod bench;
pub mod chat;
pub mod conformance;
#[cfg(feature = "mpi")]
pub mod conformance_ranks;
pub mod conformance_report;
pub mod devices;
pub mod model;
pub mod model_memory;
pub mod perplexity;
pub mod plan;
pub mod run;
pub mod serve;
#[cfg(feature = "mpi")]
pub mod serve_ranks;
