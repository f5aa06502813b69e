//! Shared helpers of the suite: devices, streams, uploads, host gates.

use std::sync::Arc;
use std::time::Duration;

use baton_core::backend::{Buffer, Device, Stream, TensorRef};
use baton_core::sync::{HostTimeline, Release};
use baton_core::DType;

/// The bound of every wait in the suite: a wait that takes longer is a hang.
pub const RULE_TIMEOUT: Duration = Duration::from_secs(20);

/// The devices under test.
pub struct Fixture {
    /// At least two devices.
    pub devices: Vec<Arc<dyn Device>>,
}

impl Fixture {
    /// Wraps the devices a backend opened.
    pub fn new(devices: Vec<Arc<dyn Device>>) -> Self {
        assert!(devices.len() >= 2, "the suite needs two devices, got {}", devices.len());
        Fixture { devices }
    }

    /// A new stream on device `d`.
    pub fn stream(&self, d: usize) -> Stream {
        self.devices[d].new_stream().expect("new stream")
    }

    /// A zeroed f32 tensor of `dims` on device `d`, alone in its buffer.
    pub fn tensor(&self, d: usize, dims: &[usize]) -> TensorRef {
        self.typed_tensor(d, DType::F32, dims)
    }

    /// A zeroed tensor of any type on device `d`, alone in its buffer.
    pub fn typed_tensor(&self, d: usize, dtype: DType, dims: &[usize]) -> TensorRef {
        let elems: usize = dims.iter().product();
        let bytes = elems / dtype.block_elems() * dtype.block_bytes();
        let buffer = self.devices[d].alloc(bytes).expect("alloc");
        TensorRef::new(&buffer, 0, dtype, dims).expect("tensor")
    }

    /// A buffer of `bytes` on device `d`.
    pub fn buffer(&self, d: usize, bytes: usize) -> Buffer {
        self.devices[d].alloc(bytes).expect("alloc")
    }
}

/// Writes `data` into `t` on `stream` and waits for it.
pub fn upload(stream: &Stream, t: &TensorRef, data: Vec<f32>) {
    stream.write_async(t, data).expect("write").wait().expect("write completes");
}

/// Reads `t` back as f32 values.
pub fn download(stream: &Stream, t: &TensorRef) -> Vec<f32> {
    let n = t.bytes() / 4;
    stream.read_into_async(t, vec![0f32; n]).expect("read").wait().expect("read completes")
}

/// A host gate: a stream that waits on it holds all later work until
/// `open` (or fails it when dropped).
pub fn gate() -> (HostTimeline, Release) {
    let host = HostTimeline::new("test-gate");
    let release = host.reserve();
    (host, release)
}

/// Deterministic pseudo-random f32s in `[-1, 1)`.
pub fn random(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}
