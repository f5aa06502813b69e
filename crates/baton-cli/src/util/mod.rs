//! Helpers of every command: statistics, Ctrl-C, JSON strings, printing
//! tokens, errors already reported.

pub mod interrupt;
pub mod json;
pub mod reported;
pub mod stats;
pub mod tokens;
