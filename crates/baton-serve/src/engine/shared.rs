//! What the engine's handles and its worker thread share: the counters and
//! the state they both read, and the commands the handles send.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};

use baton_core::loom::plain::Mutex;
use tokio::sync::mpsc as tmpsc;

use super::options::Shutdown;
use super::request::{Event, GenerateRequest};

/// State shared by the handles and the worker.
#[derive(Debug, Default)]
pub(super) struct Shared {
    pub(super) accepting: AtomicBool,
    pub(super) queued: AtomicUsize,
    pub(super) running: AtomicUsize,
    /// Free slots, as the worker last saw them.
    pub(super) free: AtomicUsize,
    pub(super) steps: AtomicU64,
    pub(super) generated: AtomicU64,
    pub(super) prompt: AtomicU64,
    pub(super) host_waits: AtomicU64,
    pub(super) cancelled: AtomicU64,
    pub(super) panics: AtomicU64,
    /// Why the worker stopped for good, once it has.
    pub(super) failure: Mutex<Option<String>>,
}

/// A request the worker takes, with where its events go.
pub(super) struct Admitted {
    pub(super) request: GenerateRequest,
    pub(super) events: tmpsc::UnboundedSender<Event>,
}

/// What a handle asks of the worker.
pub(super) enum Command {
    Submit(Admitted),
    Shutdown(Shutdown),
    /// Makes the worker's turn panic (feature `fault-injection`).
    #[cfg(feature = "fault-injection")]
    Panic,
}
