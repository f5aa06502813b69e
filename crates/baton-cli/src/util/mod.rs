//! Helpers of every command: statistics, Ctrl-C, JSON strings.

pub mod interrupt;
pub mod json;
pub mod stats;
