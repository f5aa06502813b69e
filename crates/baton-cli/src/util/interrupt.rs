//! Ctrl-C: the first press asks the running command to stop cleanly (the
//! generation loop ends, queued work drains, the statistics are printed);
//! a second press exits at once. `baton run --chat` clears the request
//! before each answer, so Ctrl-C stops one answer, not the conversation.

use std::sync::atomic::{AtomicBool, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    // Only async-signal-safe operations here: an atomic swap and _exit.
    if INTERRUPTED.swap(true, Ordering::SeqCst) {
        // SAFETY: _exit is async-signal-safe and ends the process at once.
        unsafe { libc::_exit(130) };
    }
}

/// Installs the handler (once, at start-up).
pub fn install() {
    let handler: extern "C" fn(libc::c_int) = on_sigint;
    // SAFETY: `on_sigint` only touches an atomic and calls `_exit`, both
    // async-signal-safe; `signal` replaces the default action for SIGINT.
    unsafe { libc::signal(libc::SIGINT, handler as libc::sighandler_t) };
}

/// Whether Ctrl-C was pressed.
pub fn requested() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Forgets an earlier Ctrl-C (before the next answer of a conversation).
pub fn clear() {
    INTERRUPTED.store(false, Ordering::SeqCst);
}
