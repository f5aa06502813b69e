//! How devices are opened.

use baton_core::sync::WaitPolicy;

/// How devices are opened (the same shape as every backend's
/// `OpenOptions`: `Default`, then `with_*` setters).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct OpenOptions {
    /// The wait policy of the devices' streams.
    pub policy: WaitPolicy,
    /// Share memory between logical devices through opaque fds when the
    /// driver offers it (otherwise copies between them go through the
    /// host).
    pub external_memory: bool,
    /// Never map device memory, even when it is host-visible: every write
    /// and read goes through staging memory, as on a discrete GPU.
    pub staging: bool,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions { policy: WaitPolicy::process_default(), external_memory: true, staging: false }
    }
}

impl OpenOptions {
    /// With `policy` for the devices' streams.
    pub fn with_policy(mut self, policy: WaitPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Whether logical devices share memory through opaque fds.
    pub fn with_external_memory(mut self, external_memory: bool) -> Self {
        self.external_memory = external_memory;
        self
    }

    /// Whether every write and read goes through staging memory.
    pub fn with_staging(mut self, staging: bool) -> Self {
        self.staging = staging;
        self
    }
}
