//! The CPU backend's integration tests, one test binary (`--test it`): the
//! conformance suite, and the packing of sealed weights. (The loom models
//! are binaries of their own: they build only under `--cfg loom`.)

mod conformance;
mod packed;
