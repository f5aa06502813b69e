//! `baton bench` and its sub-commands.

pub mod gates;
pub mod memory;
pub mod model;
pub mod submit;
pub mod sync;
