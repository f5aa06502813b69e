//! The helpers Baton's test binaries share, written once (ripgrep's
//! `tests/util.rs` serves all of its tests the same way).
//!
//! A dev-dependency only: no library or binary of the workspace depends on
//! it, and it is never published. Each crate's integration tests are one
//! binary (`tests/it/main.rs`, one module per subject) that takes what it
//! needs from here; helpers that only one crate's tests use stay in that
//! binary. The parts that need the backends or synthetic models sit behind
//! features (`cpu`, `llama`), so that a crate low in the tree (baton-gguf,
//! say) builds its tests without them.
#![deny(missing_docs)]

#[cfg(feature = "cpu")]
pub mod devices;
pub mod env;
mod logits;
#[cfg(feature = "schemas")]
pub mod schemas;
#[cfg(feature = "llama")]
pub mod synth;
mod temp;

pub use logits::argmax;
pub use temp::TempDir;

/// The conformance crate, for [`conformance_under_every_policy!`].
#[cfg(feature = "cpu")]
#[doc(hidden)]
pub use baton_conformance;
