//! The device registry: every kind of device Baton opens, in one list
//! (ggml's backend registry, in Rust). Each kind says its name prefix, how
//! a name of it opens, what this machine has of it, what it supports, what
//! `baton devices` notes about it and how it tears down; the loader
//! ([`open_devices`]), `baton devices` and the binary's exit ask the
//! registry instead of knowing the kinds themselves.
//!
//! A device name is `KIND`, `KIND:N` (the kind's device `N`), either
//! followed by `@R` for a device on MPI rank `R` ([`DeviceName::parse`]).
//!
//! **Adding a device kind starts here:** write a file beside `cpu.rs` and
//! `vulkan.rs` that fills a [`Kind`] from the new backend crate (which
//! implements `baton_core::backend::Device`, declaring its weight types in
//! `DeviceInfo::weight_types`), and add it to [`KINDS`] (`kinds.rs`). Names, the
//! `unknown device` message, `baton devices`, teardown and the loader's
//! weight checks follow.

mod cpu;
mod kind;
pub(crate) mod kinds;
mod name;
mod open;
mod vulkan;

use std::time::Duration;

pub use kind::{Kind, OpenOptions};
pub use kinds::{find, known_kinds, KINDS};
pub use name::DeviceName;
pub use open::open_devices;

/// Waits, for at most `timeout` in all, until every kind's devices are torn
/// down (see [`Kind::teardown`]); returns whether they are. The binary calls
/// it before it exits.
pub fn wait_for_teardown(timeout: Duration) -> bool {
    let start = std::time::Instant::now();
    // Every kind waits (no short cut past a kind that is not done yet).
    let mut done = true;
    for kind in kinds::KINDS {
        done &= kind.teardown(timeout.saturating_sub(start.elapsed()));
    }
    done
}

#[cfg(test)]
mod tests;
