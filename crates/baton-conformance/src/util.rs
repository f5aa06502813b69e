//! Shared helpers of the suite: devices, streams, uploads, host gates.

use std::sync::Arc;
use std::time::Duration;

use baton_core::backend::{
    into_devices, Buffer, Device, HostBytes, IntoDevice, Pending, PendingError, Stream, StreamError, TensorRef,
};
use baton_core::sync::{HostTimeline, PointStatus, Release, WaitError};
use baton_core::DType;

/// The bound of every wait in the suite: a wait that takes longer is a hang,
/// and the rule fails by name instead of hanging the suite. Generous for a
/// loaded two-core machine running the chaos wrapper's delays.
pub const RULE_TIMEOUT: Duration = Duration::from_secs(10);

/// The devices under test.
pub struct Fixture {
    /// At least two devices.
    pub devices: Vec<Arc<dyn Device>>,
}

impl Fixture {
    /// Wraps the devices a backend opened.
    pub fn new(devices: impl IntoIterator<Item = impl IntoDevice>) -> Self {
        let devices = into_devices(devices);
        assert!(devices.len() >= 2, "the suite needs two devices, got {}", devices.len());
        Fixture { devices }
    }

    /// The weight types every device declares (`DeviceInfo::weight_types`):
    /// the op cases check each of them.
    pub fn weight_types(&self) -> Vec<DType> {
        let mut types = self.devices[0].info().weight_types.clone();
        types.retain(|t| self.devices.iter().all(|d| d.info().weight_types.contains(t)));
        types
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
        self.devices[d].alloc_tensor(dtype, dims).expect("alloc")
    }

    /// A buffer of `bytes` on device `d`.
    pub fn buffer(&self, d: usize, bytes: usize) -> Buffer {
        self.devices[d].alloc(bytes).expect("alloc")
    }
}

/// Writes `data` into `t` on `stream` and waits for it (at most
/// [`RULE_TIMEOUT`]).
pub fn upload(stream: &Stream, t: &TensorRef, data: Vec<f32>) {
    stream.write_async(t, data).expect("write").wait_within(RULE_TIMEOUT).expect("write completes");
}

/// Reads `t` back as f32 values (waiting at most [`RULE_TIMEOUT`]).
pub fn download(stream: &Stream, t: &TensorRef) -> Vec<f32> {
    let n = t.bytes() / 4;
    stream.read_into_async(t, vec![0f32; n]).expect("read").wait_within(RULE_TIMEOUT).expect("read completes")
}

/// Waits at most [`RULE_TIMEOUT`] for a transfer that must fail, and
/// returns its error: a transfer that completes, or is still pending at
/// the bound, fails the rule (`what` says which transfer).
pub fn expect_failure<B: HostBytes>(pending: Pending<B>, what: &str) -> PendingError<B> {
    match pending.wait_within(RULE_TIMEOUT) {
        Ok(_) => panic!("{what}: expected the transfer to fail, it completed"),
        Err(e) if e.is_timeout() => panic!("{what}: expected the transfer to fail, it still hangs: {}", e.error),
        Err(e) => e,
    }
}

/// [`Stream::synchronize`], bounded: a stream whose last point is still
/// pending after [`RULE_TIMEOUT`] fails the rule instead of hanging it.
pub fn synchronize(stream: &Stream) -> Result<(), StreamError> {
    if let Err(e @ WaitError::Timeout { .. }) = stream.last_point().wait_timeout(RULE_TIMEOUT) {
        panic!("synchronize on {} would hang: {e}", stream.label());
    }
    stream.synchronize()
}

/// Runs `f` (a wait under test that has no bound of its own) on a thread
/// and returns its result, or fails the rule if it has not returned after
/// [`RULE_TIMEOUT`] (the thread is left behind).
pub fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(RULE_TIMEOUT) {
        Ok(result) => result,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("{what}: still blocked after {RULE_TIMEOUT:?}"),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("{what}: panicked"),
    }
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

/// Fails with `what` unless `status` is pending.
pub fn assert_pending(status: PointStatus, what: &str) {
    assert!(matches!(status, PointStatus::Pending), "{what}: expected pending, got {status:?}");
}
