//! The Khronos validation layer as a test oracle.
//!
//! With `BATON_VK_VALIDATION=1`, instances enable `VK_LAYER_KHRONOS_validation`
//! with synchronization validation and install a debug-utils messenger that
//! counts (and prints) every error the layer reports. Tests call
//! [`assert_clean`] after each case: an error of the layer fails the test,
//! so a missing barrier or a misused handle cannot pass unnoticed.

use baton_core::loom::plain::Mutex;
use std::ffi::CStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ash::vk;

static ERRORS: AtomicU64 = AtomicU64::new(0);

std::thread_local! {
    /// Errors a test provokes on purpose on this thread (not counted).
    static EXPECTED: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` and returns how many validation errors it caused on this
/// thread; those are not counted against [`assert_clean`]. For tests of
/// the oracle itself.
#[cfg(test)]
pub(crate) fn expecting_errors(f: impl FnOnce()) -> u64 {
    EXPECTED.with(|e| e.set(Some(0)));
    f();
    EXPECTED.with(|e| e.replace(None)).unwrap_or(0)
}
static MESSAGES: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Messages kept for the report of [`assert_clean`].
const KEPT: usize = 8;

/// Whether validation is requested (`BATON_VK_VALIDATION=1`); read once.
pub fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("BATON_VK_VALIDATION").is_ok_and(|v| v == "1"))
}

/// Errors the validation layer reported so far in this process.
pub fn error_count() -> u64 {
    ERRORS.load(Ordering::SeqCst)
}

/// Waits (at most 10 s) until every Vulkan device of the process is torn
/// down, so that errors reported while devices are destroyed (leaked
/// objects) are counted too and the process never exits under a teardown;
/// then, when validation is [`enabled`], panics if the validation layer
/// reported any error.
pub fn assert_clean() {
    crate::teardown::wait_for_teardown(Duration::from_secs(10));
    if !enabled() {
        return;
    }
    let errors = error_count();
    if errors > 0 {
        let messages = MESSAGES.lock().join("\n");
        panic!("the Vulkan validation layer reported {errors} error(s); the first ones:\n{messages}");
    }
}

/// The messenger's callback: counts errors and keeps the first few.
///
/// # Safety
///
/// Called by the loader with a valid callback-data pointer for the duration
/// of the call.
pub(crate) unsafe extern "system" fn on_message(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    _user: *mut std::ffi::c_void,
) -> vk::Bool32 {
    if !severity.contains(vk::DebugUtilsMessageSeverityFlagsEXT::ERROR) {
        return vk::FALSE;
    }
    // SAFETY: the loader passes valid callback data (or null) that lives for
    // the call; its message is a NUL-terminated string when not null.
    let message = unsafe {
        match data.as_ref() {
            Some(d) if !d.p_message.is_null() => CStr::from_ptr(d.p_message).to_string_lossy().into_owned(),
            _ => "(no message)".to_string(),
        }
    };
    let expected = EXPECTED.with(|e| match e.get() {
        Some(n) => {
            e.set(Some(n + 1));
            true
        }
        None => false,
    });
    if expected {
        return vk::FALSE;
    }
    ERRORS.fetch_add(1, Ordering::SeqCst);
    eprintln!("baton vulkan validation error: {message}");
    let mut kept = MESSAGES.lock();
    if kept.len() < KEPT {
        kept.push(message);
    }
    vk::FALSE
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The oracle itself: a call the specification forbids is counted.
    #[test]
    fn the_messenger_counts_an_invalid_call() {
        if !enabled() {
            eprintln!("skipped: run with BATON_VK_VALIDATION=1");
            return;
        }
        let device = match crate::open(&["vulkan:0"]) {
            Ok(mut d) => d.remove(0),
            Err(e) if e.is_unavailable() => {
                eprintln!("skipped: {e}");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        let (timeline, _writer) =
            crate::timeline::StreamTimeline::new(device.context(), "probe".into()).expect("semaphore");
        timeline.signal_host(5).expect("signal");
        // A host signal must raise the value: this one is invalid usage.
        let caught = expecting_errors(|| {
            let _ = timeline.signal_host(3);
        });
        assert!(caught > 0, "the validation layer's error was not counted");
        drop((timeline, device));
        assert_clean();
    }
}
