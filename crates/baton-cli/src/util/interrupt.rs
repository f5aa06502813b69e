//! Ctrl-C: the first press asks the running command to stop cleanly (the
//! generation loop ends, queued work drains, the statistics are printed);
//! a second press exits at once. `baton run --chat` clears the request
//! before each answer, so Ctrl-C stops one answer, not the conversation.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// The signal that asked last (SIGINT unless SIGTERM did).
static LAST_SIGNAL: AtomicI32 = AtomicI32::new(libc::SIGINT);

extern "C" fn on_sigint(signal: libc::c_int) {
    // Only async-signal-safe operations here: atomic stores and _exit.
    LAST_SIGNAL.store(signal, Ordering::SeqCst);
    if INTERRUPTED.swap(true, Ordering::SeqCst) {
        // SAFETY: _exit is async-signal-safe and ends the process at once.
        unsafe { libc::_exit(128 + signal) };
    }
}

/// Installs the handler (once, at start-up).
pub fn install() {
    let handler: extern "C" fn(libc::c_int) = on_sigint;
    // SAFETY: `on_sigint` only touches an atomic and calls `_exit`, both
    // async-signal-safe; `signal` replaces the default action for SIGINT.
    unsafe { libc::signal(libc::SIGINT, handler as libc::sighandler_t) };
}

/// Makes SIGTERM ask for a stop as Ctrl-C does (`baton serve`: what
/// container runtimes and systemd send to stop a service).
pub fn install_terminate() {
    let handler: extern "C" fn(libc::c_int) = on_sigint;
    // SAFETY: as in `install`: the handler is async-signal-safe; `signal`
    // replaces SIGTERM's default action (ending the process at once).
    unsafe { libc::signal(libc::SIGTERM, handler as libc::sighandler_t) };
}

/// `Ctrl-C` or `SIGTERM`: which signal asked for the stop.
pub fn signal_name() -> &'static str {
    if LAST_SIGNAL.load(Ordering::SeqCst) == libc::SIGTERM {
        "SIGTERM"
    } else {
        "Ctrl-C"
    }
}

/// Whether Ctrl-C was pressed.
pub fn requested() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Forgets an earlier Ctrl-C (before the next answer of a conversation).
pub fn clear() {
    INTERRUPTED.store(false, Ordering::SeqCst);
}
