//! What the registry knows of one device kind.

use std::sync::Arc;
use std::time::Duration;

use baton_core::backend::{Device, DeviceInfo};
use baton_core::DType;

/// Options a device list opens with, for every kind (each takes what
/// applies to it).
#[derive(Clone, Copy, Debug, Default)]
pub struct OpenOptions {
    /// The threads of a `cpu` device (`-t`); `None` is the backend's
    /// default. `cpu:N` devices run one thread per core they own.
    pub threads: Option<usize>,
}

/// How a kind opens a list of its names: the devices in order, or the
/// backend's error as text.
pub(super) type Opener = fn(&[&str], &OpenOptions) -> Result<Vec<Arc<dyn Device>>, String>;

/// A kind of device: its names, and the backend's answers about it.
/// The entries are in [`KINDS`](super::KINDS); each file beside this one
/// fills one.
pub struct Kind {
    pub(super) prefix: &'static str,
    pub(super) title: &'static str,
    pub(super) forms: &'static str,
    pub(super) open: Opener,
    pub(super) enumerate: fn() -> Result<Vec<DeviceInfo>, String>,
    pub(super) weight_types: fn() -> Vec<DType>,
    pub(super) notes: fn() -> Vec<String>,
    pub(super) teardown: fn(Duration) -> bool,
}

impl Kind {
    /// The name prefix: `cpu` names `cpu` and `cpu:N`.
    pub fn prefix(&self) -> &'static str {
        self.prefix
    }

    /// The kind in prose (`CPU`, `Vulkan`).
    pub fn title(&self) -> &'static str {
        self.title
    }

    /// The names it takes, for messages (`` `vulkan:N` ``).
    pub fn forms(&self) -> &'static str {
        self.forms
    }

    /// Opens the devices `names` name (all of this kind, without ranks),
    /// in their order; the backend's error as text.
    pub fn open(&self, names: &[&str], options: &OpenOptions) -> Result<Vec<Arc<dyn Device>>, String> {
        (self.open)(names, options)
    }

    /// What this machine has of the kind, as `baton devices` lists it
    /// without a list; an error where it has none it can use (no driver).
    pub fn enumerate(&self) -> Result<Vec<DeviceInfo>, String> {
        (self.enumerate)()
    }

    /// The weight types its devices hold and multiply by (each device also
    /// declares them: `Device::holds_weights`).
    pub fn weight_types(&self) -> Vec<DType> {
        (self.weight_types)()
    }

    /// Lines `baton devices` prints under the table about this kind (an
    /// empty string is a blank line).
    pub fn notes(&self) -> Vec<String> {
        (self.notes)()
    }

    /// Waits, for at most `timeout`, until the kind's devices are torn down
    /// where they tear down on threads of their own; returns whether they
    /// are.
    pub fn teardown(&self, timeout: Duration) -> bool {
        (self.teardown)(timeout)
    }
}

impl std::fmt::Debug for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kind").field("prefix", &self.prefix).finish_non_exhaustive()
    }
}
