//! An error already printed: `main` exits non-zero without printing it
//! again. Under `mpirun`, an error every rank shares is printed by each
//! rank before the ranks meet once more, so none exits (and so none has
//! `mpirun` kill the others) before every rank has said why.

/// The error was printed where it happened.
#[derive(Debug)]
pub struct Reported;

impl std::fmt::Display for Reported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("(reported above)")
    }
}

impl std::error::Error for Reported {}

/// Prints `error: {message}` on stderr in one write: under `mpirun` the
/// ranks' stderr share one pipe, and a line written in pieces can be cut
/// by another rank's (a line of at most `PIPE_BUF`, 4 KiB, is never cut).
pub fn print_error(message: &str) {
    use std::io::Write;
    let line = format!("error: {message}\n");
    // Nothing to do if stderr is gone.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}
