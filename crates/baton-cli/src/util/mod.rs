//! Helpers of every command: Ctrl-C, JSON strings, printing
//! tokens, errors already reported.

pub mod interrupt;
pub mod json;
pub mod reported;
pub mod tokens;
