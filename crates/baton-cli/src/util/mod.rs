//! Helpers of every command: statistics, Ctrl-C.

pub mod interrupt;
pub mod stats;
