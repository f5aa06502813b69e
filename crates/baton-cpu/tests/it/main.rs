//! The CPU backend's integration tests, one test binary (`--test it`): the
//! conformance suite, the packing of sealed weights, and weights mapped
//! from files. (The loom models
//! are binaries of their own: they build only under `--cfg loom`.)

mod conformance;
mod experts;
mod mapped;
mod packed;
mod scatter;
mod threads;
