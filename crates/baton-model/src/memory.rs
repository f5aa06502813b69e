//! Where a loaded model's memory goes ([`Model::memory`](crate::Model::memory)).

use baton_core::backend::DeviceMemory;

/// A loaded model's memory by purpose, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModelMemory {
    /// The GGUF file.
    pub file: u64,
    /// Weights read in place from the file's pages (resident only as far
    /// as they are read, and given back once packed).
    pub weights_mapped: u64,
    /// Weights copied into device buffers.
    pub weights_copied: u64,
    /// The KV cache of every slot (with a hybrid model's recurrent states,
    /// and those it keeps for cutting slots back, `Model::keep_states`).
    pub kv_cache: u64,
    /// Logits, inputs and the rows where a batch's attention outputs meet.
    pub io: u64,
    /// What the devices that keep count hold: every allocation (weights
    /// copied, KV cache, io, and the activations' arenas), mappings, and
    /// derived forms (the CPU's packed matmul weights).
    pub devices: DeviceMemory,
}

impl ModelMemory {
    /// Activations and other scratch the devices allocated: what they
    /// allocated beyond the weights, the KV cache and the io buffers.
    pub fn scratch(&self) -> u64 {
        self.devices.allocated.saturating_sub(self.weights_copied + self.kv_cache + self.io)
    }
}
