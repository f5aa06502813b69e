//! A stream's timeline: one timeline semaphore, mirrored into the core's
//! [`Timeline`] so that host waits, other backends and the relay see it.
//!
//! # The single-queue rule
//!
//! A device with one queue runs its batches in submission order, so a batch
//! that waits on a semaphore value whose signal is not in the queue yet
//! blocks the queue; when that signal is later submitted behind it, nothing
//! moves again (contract rule `W-HOLD`). Every value therefore records when
//! its signal was submitted (or signalled by the host), and a stream that
//! must wait natively on another stream's value first holds the wait back
//! on the host until that signal is submitted, or until the value can never
//! be signalled because its stream failed before it.
//!
//! The mirror (`mirror`) is advanced by the stream's worker once the
//! semaphore has reached a value and the item is dropped, so it lags the
//! semaphore slightly; it fails where the stream failed.

use baton_core::loom::{Condvar, Mutex, MutexGuard};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ash::vk;
use baton_core::sync::{Failure, Timeline, TimelineWriter};

use crate::context::Context;
use crate::error::VulkanError;

/// Why a held-back wait ended without the signal.
pub(crate) enum HoldBack {
    /// The value will never be signalled: its stream failed first.
    Failed(Failure),
    /// The deadline passed first.
    TimedOut,
}

#[derive(Default)]
struct Signals {
    /// The highest value whose signal is submitted or done.
    submitted: u64,
    /// The value the stream failed at, and why (no signal at or above it
    /// will ever be submitted, unless it was already).
    failed: Option<(u64, Failure)>,
}

/// A stream's timeline semaphore and its mirror.
pub(crate) struct StreamTimeline {
    ctx: Arc<Context>,
    pub(crate) semaphore: vk::Semaphore,
    pub(crate) mirror: Timeline,
    signals: Mutex<Signals>,
    changed: Condvar,
}

impl StreamTimeline {
    /// A new semaphore at 0 on `ctx` and the mirror's writer.
    pub(crate) fn new(ctx: &Arc<Context>, label: String) -> Result<(Arc<StreamTimeline>, TimelineWriter), VulkanError> {
        let mut kind =
            vk::SemaphoreTypeCreateInfo::default().semaphore_type(vk::SemaphoreType::TIMELINE).initial_value(0);
        let info = vk::SemaphoreCreateInfo::default().push_next(&mut kind);
        // SAFETY: a valid create info; timeline semaphores were enabled.
        let semaphore = unsafe { ctx.raw.create_semaphore(&info, None) }
            .map_err(|r| VulkanError::call(&ctx.name, "vkCreateSemaphore", r))?;
        let (mirror, writer) = Timeline::with_domain(label, ctx.domain.clone());
        let timeline = StreamTimeline {
            ctx: ctx.clone(),
            semaphore,
            mirror,
            signals: Mutex::new(Signals::default()),
            changed: Condvar::new(),
        };
        Ok((Arc::new(timeline), writer))
    }

    fn signals(&self) -> MutexGuard<'_, Signals> {
        self.signals.lock()
    }

    /// Records that the signal of `value` is in the queue (or done).
    pub(crate) fn submitted(&self, value: u64) {
        let mut s = self.signals();
        s.submitted = s.submitted.max(value);
        drop(s);
        self.changed.notify_all();
    }

    /// Records that the stream failed at `value`: values from it on are
    /// signalled only if they were submitted already. The lowest failed
    /// value counts, as on the mirror.
    pub(crate) fn failed(&self, value: u64, failure: Failure) {
        let mut s = self.signals();
        if s.failed.as_ref().is_none_or(|(from, _)| value < *from) {
            s.failed = Some((value, failure));
        }
        drop(s);
        self.changed.notify_all();
    }

    /// Blocks until the signal of `value` is submitted, so a native wait on
    /// it can be queued without blocking the queue; or until the value can
    /// never come, or `deadline` passes.
    pub(crate) fn wait_submitted(&self, value: u64, deadline: Option<Instant>) -> Result<(), HoldBack> {
        let mut s = self.signals();
        loop {
            if s.submitted >= value {
                return Ok(());
            }
            if let Some((from, failure)) = &s.failed {
                if *from <= value {
                    return Err(HoldBack::Failed(failure.clone()));
                }
            }
            s = match deadline {
                None => self.changed.wait(s),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return Err(HoldBack::TimedOut);
                    }
                    self.changed.wait_timeout(s, d - now)
                }
            };
        }
    }

    /// Blocks until the semaphore reaches `value` (its signal must be
    /// submitted) or `deadline` passes: `Ok(true)` when reached, `Ok(false)`
    /// at the deadline (the batch is still pending: the device is hung or
    /// waits on a peer that went silent).
    pub(crate) fn wait_reached(&self, value: u64, deadline: Option<Instant>) -> Result<bool, vk::Result> {
        /// One call's slice, so a deadline is checked at least this often.
        const SLICE: Duration = Duration::from_secs(1);
        let semaphores = [self.semaphore];
        let values = [value];
        let info = vk::SemaphoreWaitInfo::default().semaphores(&semaphores).values(&values);
        loop {
            let slice = match deadline {
                None => SLICE,
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) => left.min(SLICE),
                    None => return Ok(false),
                },
            };
            // SAFETY: the semaphore is alive (we hold it) and its signal of
            // `value` is submitted, so the wait is valid; it is bounded by
            // `slice`.
            match self.ctx.check(unsafe { self.ctx.raw.wait_semaphores(&info, slice.as_nanos() as u64) }) {
                Ok(()) => return Ok(true),
                Err(vk::Result::TIMEOUT) => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// The semaphore's current value.
    #[cfg(test)]
    pub(crate) fn counter(&self) -> Result<u64, vk::Result> {
        // SAFETY: the semaphore is alive (we hold it).
        unsafe { self.ctx.raw.get_semaphore_counter_value(self.semaphore) }
    }

    /// Signals `value` from the host. The caller guarantees every earlier
    /// value is reached and no signal is pending.
    pub(crate) fn signal_host(&self, value: u64) -> Result<(), vk::Result> {
        let info = vk::SemaphoreSignalInfo::default().semaphore(self.semaphore).value(value);
        // SAFETY: the semaphore is alive; `value` is above its current value
        // and no queue signal of it is pending (the caller's guarantee), as
        // vkSignalSemaphore requires.
        self.ctx.check(unsafe { self.ctx.raw.signal_semaphore(&info) })?;
        self.submitted(value);
        Ok(())
    }
}

impl Drop for StreamTimeline {
    fn drop(&mut self) {
        // SAFETY: timelines live in their device's registry until the device
        // and all its streams are gone; every stream waits for its batches to
        // complete before it goes on, so no pending batch uses the semaphore.
        unsafe { self.ctx.raw.destroy_semaphore(self.semaphore, None) };
    }
}
