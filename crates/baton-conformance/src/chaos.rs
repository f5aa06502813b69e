//! The chaos wrapper: a backend wrapper that delays every queued item by a
//! seeded random amount, so that a missing wait gives a wrong answer (or an
//! inserted wait in `Stream::implicit_waits`), reproducibly from the seed.

use baton_core::loom::Mutex;
use std::sync::Arc;
use std::time::Duration;

use baton_core::backend::{
    Buffer, BufferRange, Device, DeviceError, DeviceInfo, IntoDevice, RawStream, Stream, StreamError, StreamOp,
};
use baton_core::graph::Op;
use baton_core::sync::{SyncPoint, Timeline};
use baton_core::DType;

/// A device whose streams delay each item by up to `max_delay`.
pub struct ChaosDevice {
    inner: Arc<dyn Device>,
    seed: Mutex<u64>,
    max_delay: Duration,
    native_waits: bool,
    foreign_access: bool,
}

impl ChaosDevice {
    /// Wraps `inner`; `seed` makes the delays reproducible.
    pub fn new(inner: Arc<dyn Device>, seed: u64, max_delay: Duration) -> ChaosDevice {
        ChaosDevice {
            inner,
            seed: Mutex::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1),
            max_delay,
            native_waits: true,
            foreign_access: true,
        }
    }

    /// Forces the fallback path: the streams refuse to wait natively on any
    /// other stream's point, so every cross-stream wait goes through the
    /// core's relay.
    pub fn without_native_waits(mut self) -> ChaosDevice {
        self.native_waits = false;
        self
    }

    /// Forces the other fallback path: the streams refuse to address
    /// another device's memory, so copies between devices go through host
    /// memory (`Stream::copy_staged`).
    pub fn without_foreign_access(mut self) -> ChaosDevice {
        self.foreign_access = false;
        self
    }

    fn next_seed(&self) -> u64 {
        let mut s = self.seed.lock();
        *s = splitmix(*s);
        *s
    }
}

fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Device for ChaosDevice {
    fn info(&self) -> &DeviceInfo {
        self.inner.info()
    }

    fn alloc(&self, bytes: usize) -> Result<Buffer, DeviceError> {
        self.inner.alloc(bytes)
    }

    fn new_stream(&self) -> Result<Stream, DeviceError> {
        let inner = self.inner.new_stream()?;
        let raw = ChaosStream {
            inner: inner.raw().clone(),
            rng: Mutex::new(self.next_seed()),
            max_delay: self.max_delay,
            native_waits: self.native_waits,
            device: self.inner.info().name.clone(),
            foreign_access: self.foreign_access,
        };
        Ok(Stream::with_policy(Arc::new(raw), inner.wait_policy()))
    }

    fn supports(&self, op: &Op, dtype: DType) -> bool {
        self.inner.supports(op, dtype)
    }
}

struct ChaosStream {
    inner: Arc<dyn RawStream>,
    rng: Mutex<u64>,
    max_delay: Duration,
    native_waits: bool,
    device: String,
    foreign_access: bool,
}

// SAFETY: every item is forwarded unchanged to the inner stream, whose
// contract covers it; the extra item queued before it is a host function
// that only sleeps (it touches no memory) and keeps stream order.
unsafe impl RawStream for ChaosStream {
    fn label(&self) -> &str {
        self.inner.label()
    }

    fn timeline(&self) -> &Timeline {
        self.inner.timeline()
    }

    fn can_wait_on(&self, point: &SyncPoint) -> bool {
        self.native_waits && self.inner.can_wait_on(point)
    }

    fn can_access(&self, range: &BufferRange) -> bool {
        (self.foreign_access || range.buffer().device() == self.device) && self.inner.can_access(range)
    }

    fn can_compute_on(&self, range: &BufferRange) -> bool {
        (self.foreign_access || range.buffer().device() == self.device) && self.inner.can_compute_on(range)
    }

    unsafe fn submit(&self, op: StreamOp) -> Result<u64, StreamError> {
        let delay = {
            let mut r = self.rng.lock();
            *r = splitmix(*r);
            let nanos = self.max_delay.as_nanos().max(1) as u64;
            // A third of the items run at once, so that orders vary too.
            if (*r).is_multiple_of(3) {
                Duration::ZERO
            } else {
                Duration::from_nanos(*r % nanos)
            }
        };
        if !delay.is_zero() {
            let sleep: Box<dyn FnOnce() -> Result<(), String> + Send> = Box::new(move || {
                std::thread::sleep(delay);
                Ok(())
            });
            // SAFETY: a host function that only sleeps accesses no memory.
            unsafe { self.inner.submit(StreamOp::HostFn(sleep))? };
        }
        // SAFETY: forwarded with the caller's guarantees unchanged.
        unsafe { self.inner.submit(op) }
    }
}

/// Wraps every device of a list, each with its own seed derived from `seed`.
pub fn wrap(
    devices: impl IntoIterator<Item = impl IntoDevice>,
    seed: u64,
    max_delay: Duration,
) -> Vec<Arc<dyn Device>> {
    wrap_with(devices, seed, max_delay, Fallbacks::default())
}

/// The fallback paths a chaos run forces.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fallbacks {
    /// Refuse native waits on other streams' points (the relay bridges).
    pub no_native_waits: bool,
    /// Refuse access to other devices' memory (copies stage through host).
    pub no_foreign_access: bool,
}

/// As [`wrap`], forcing the given fallback paths.
pub fn wrap_with(
    devices: impl IntoIterator<Item = impl IntoDevice>,
    seed: u64,
    max_delay: Duration,
    fallbacks: Fallbacks,
) -> Vec<Arc<dyn Device>> {
    devices
        .into_iter()
        .enumerate()
        .map(|(i, d)| {
            let mut chaos = ChaosDevice::new(d.into_device(), seed ^ (i as u64 + 1) << 32, max_delay);
            if fallbacks.no_native_waits {
                chaos = chaos.without_native_waits();
            }
            if fallbacks.no_foreign_access {
                chaos = chaos.without_foreign_access();
            }
            Arc::new(chaos).into_device()
        })
        .collect()
}

/// Runs `check` once per seed in `seeds`, each time with freshly wrapped
/// devices; a failure is re-raised with the seed that reproduces it.
pub fn for_seeds(
    seeds: std::ops::Range<u64>,
    open: &dyn Fn() -> Vec<Arc<dyn Device>>,
    max_delay: Duration,
    check: &dyn Fn(Vec<Arc<dyn Device>>),
) {
    for seed in seeds {
        let devices = wrap(open(), seed, max_delay);
        if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(devices))) {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("chaos seed {seed} fails (rerun with this seed to reproduce): {message}");
        }
    }
}

/// How many chaos seeds a test runs: `BATON_CHAOS_SEEDS`, else `default`.
pub fn seed_count(default: u64) -> u64 {
    std::env::var("BATON_CHAOS_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}
