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
