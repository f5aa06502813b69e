//! Time spent in gates, per inner device (`--sync-profile`).
//!
//! When enabled, every gate is bracketed on each inner stream by two host
//! functions: the first notes when the stream reached the gate, the second
//! when the gate was done there. The difference is the gate's price on that
//! device: waiting for the others, the copies and the adds.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use baton_core::loom::Mutex;
use std::time::{Duration, Instant};

/// One inner device's gate time.
#[derive(Clone, Debug, Default)]
pub struct GateTime {
    /// Gates passed.
    pub gates: u64,
    /// Time from reaching a gate to leaving it, summed.
    pub total: Duration,
}

#[derive(Default)]
struct DeviceSlot {
    entered: Option<Instant>,
    time: GateTime,
}

/// Gate times of a composite device's inner devices.
#[derive(Default)]
pub struct GateProfile {
    enabled: AtomicBool,
    devices: Mutex<Vec<DeviceSlot>>,
    since: Mutex<Option<Instant>>,
}

impl GateProfile {
    pub(crate) fn new(devices: usize) -> Arc<GateProfile> {
        let profile = GateProfile::default();
        profile.devices.lock().resize_with(devices, DeviceSlot::default);
        Arc::new(profile)
    }

    /// Starts (or stops) bracketing gates, clearing the counts.
    pub fn enable(&self, on: bool) {
        for slot in self.devices.lock().iter_mut() {
            *slot = DeviceSlot::default();
        }
        *self.since.lock() = Some(Instant::now());
        self.enabled.store(on, Ordering::Relaxed);
    }

    /// Time since the profile was last enabled (the span its times cover).
    pub fn span(&self) -> Duration {
        self.since.lock().map_or(Duration::ZERO, |t| t.elapsed())
    }

    pub(crate) fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    pub(crate) fn enter(self: &Arc<Self>, d: usize) -> impl FnOnce() -> Result<(), String> + Send + 'static {
        let me = self.clone();
        move || {
            me.devices.lock()[d].entered = Some(Instant::now());
            Ok(())
        }
    }

    pub(crate) fn leave(self: &Arc<Self>, d: usize) -> impl FnOnce() -> Result<(), String> + Send + 'static {
        let me = self.clone();
        move || {
            let mut devices = me.devices.lock();
            let slot = &mut devices[d];
            if let Some(t) = slot.entered.take() {
                slot.time.gates += 1;
                slot.time.total += t.elapsed();
            }
            Ok(())
        }
    }

    /// Per inner device, its gate time since [`enable`](Self::enable).
    pub fn times(&self) -> Vec<GateTime> {
        self.devices.lock().iter().map(|s| s.time.clone()).collect()
    }
}
