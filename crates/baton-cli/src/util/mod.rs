//! Helpers of every command: statistics, Ctrl-C, JSON strings, printing tokens.

pub mod interrupt;
pub mod json;
pub mod stats;
pub mod tokens;
