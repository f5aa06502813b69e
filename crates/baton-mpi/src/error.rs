//! What goes wrong between ranks.

use std::fmt;
use std::time::Duration;

/// What a peer said when a timed-out rank asked it how far it got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerProgress {
    /// The peer's rank.
    pub rank: usize,
    /// How many remote operations the peer has started.
    pub started: u64,
    /// How many of them it has finished.
    pub finished: u64,
}

/// The ranks that did not answer a remote operation in time, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Silence {
    /// Ranks that did not answer a liveness ping within the grace time
    /// either: stopped, hung in the kernel, or unreachable.
    pub silent: Vec<usize>,
    /// Ranks that answered the ping but have not started this operation
    /// yet (behind this rank: stuck in earlier work, or waiting elsewhere).
    pub behind: Vec<PeerProgress>,
}

impl fmt::Display for Silence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.silent.is_empty(), self.behind.is_empty()) {
            (true, true) => write!(f, "every peer answers and has started it (the transport itself is stuck)"),
            _ => {
                if !self.silent.is_empty() {
                    write!(f, "silent rank(s) {:?} (no answer to a ping)", self.silent)?;
                }
                for (i, p) in self.behind.iter().enumerate() {
                    let sep = if i == 0 && self.silent.is_empty() { "" } else { "; " };
                    write!(
                        f,
                        "{sep}rank {} answers but is behind ({} remote operations started, {} finished)",
                        p.rank, p.started, p.finished
                    )?;
                }
                Ok(())
            }
        }
    }
}

/// The errors of Baton's MPI layer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum MpiError {
    /// MPI was initialised before (by this crate or by other code).
    #[error("MPI is already initialised in this process")]
    AlreadyInitialized,
    /// MPI gave a thread level under what Baton needs (`Serialized`).
    #[error("MPI gives thread level {obtained}, Baton needs at least `serialized` (asked for `multiple`)")]
    ThreadLevel {
        /// The level MPI gave.
        obtained: &'static str,
    },
    /// An MPI call returned an error code (the communicator returns errors
    /// instead of aborting).
    #[error("rank {rank}: {call} failed with MPI error {code}: {message}")]
    Call {
        /// This rank.
        rank: usize,
        /// The MPI function.
        call: &'static str,
        /// Its error code.
        code: i32,
        /// MPI's text for the code.
        message: String,
    },
    /// A remote operation did not finish by its deadline.
    #[error("rank {rank}: {op} did not finish within {deadline:?}: {silence}")]
    TimedOut {
        /// This rank.
        rank: usize,
        /// The operation, with its sequence number and size.
        op: String,
        /// Its deadline.
        deadline: Duration,
        /// Who did not answer.
        silence: Silence,
    },
    /// Another rank failed (with an error, not silent) and said so: this
    /// rank's remote operation fails at once instead of by its deadline.
    #[error("rank {rank}: {op} ended because rank {peer} failed: {cause}")]
    PeerFailed {
        /// This rank.
        rank: usize,
        /// The operation that was waiting.
        op: String,
        /// The rank that failed.
        peer: usize,
        /// Its first cause.
        cause: String,
    },
    /// An earlier operation on this communicator timed out or failed: its
    /// buffers still belong to MPI, so the communicator takes no more work.
    #[error("rank {rank}: the communicator is unusable after an earlier failure: {first}")]
    Poisoned {
        /// This rank.
        rank: usize,
        /// The first failure.
        first: Box<MpiError>,
    },
    /// A rank outside the communicator.
    #[error("rank {rank} does not exist (the communicator has {size} ranks)")]
    NoSuchRank {
        /// The rank asked for.
        rank: usize,
        /// The communicator's size.
        size: usize,
    },
    /// A device list that names a rank the job does not have, or a name
    /// that does not parse.
    #[error("device {name:?}: {why}")]
    BadDeviceList {
        /// The name (or the list).
        name: String,
        /// What is wrong with it.
        why: String,
    },
    /// Ranks that must agree (a launch's arguments, its model file) do not.
    #[error("ranks {ranks:?} differ from rank 0 in {what}: rank 0 has {rank0}, rank {} has {first_other}", ranks[0])]
    Mismatch {
        /// What must agree.
        what: String,
        /// The ranks that differ from rank 0.
        ranks: Vec<usize>,
        /// Rank 0's value (its first 200 characters).
        rank0: String,
        /// The first differing rank's value.
        first_other: String,
    },
    /// Buffers whose lengths do not fit the operation.
    #[error("{op}: {what}")]
    BadBuffers {
        /// The operation.
        op: &'static str,
        /// What does not fit.
        what: String,
    },
    /// A tensor the gate cannot carry (collectives take f32; sends and
    /// receives f32 or i32).
    #[error("{op}: cannot carry a {dtype:?} tensor (collectives take f32, sends and receives f32 or i32)")]
    DType {
        /// The operation.
        op: &'static str,
        /// The tensor's type.
        dtype: baton_core::DType,
    },
    /// Queueing on the rank's stream failed.
    #[error(transparent)]
    Stream(#[from] baton_core::StreamError),
}

impl MpiError {
    /// The silent and lagging ranks, when the operation timed out.
    pub fn silence(&self) -> Option<&Silence> {
        match self {
            MpiError::TimedOut { silence, .. } => Some(silence),
            MpiError::Poisoned { first, .. } => first.silence(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_names_the_silent_and_the_lagging_ranks_and_a_poisoned_communicator_keeps_them() {
        let silence = Silence { silent: vec![2], behind: vec![PeerProgress { rank: 1, started: 4, finished: 3 }] };
        let timeout = MpiError::TimedOut {
            rank: 0,
            op: "all-reduce of 8 f32 #5".into(),
            deadline: Duration::from_secs(3),
            silence: silence.clone(),
        };
        let text = timeout.to_string();
        assert!(text.contains("silent rank(s) [2]"), "{text}");
        assert!(text.contains("rank 1 answers but is behind (4 remote operations started, 3 finished)"), "{text}");
        let poisoned = MpiError::Poisoned { rank: 0, first: Box::new(timeout) };
        assert_eq!(poisoned.silence(), Some(&silence));
        let nobody = Silence { silent: vec![], behind: vec![] };
        assert!(nobody.to_string().contains("transport itself is stuck"), "{nobody}");
    }
}
