//! `baton serve` over the ranks of an MPI job (feature `mpi`): rank 0
//! listens and runs the engine, telling every other rank each model call
//! first ([`baton_serve::engine::Mirror`]); the other ranks make the same
//! calls ([`baton_serve::engine::follow`]) until the engine stops.
//!
//! A call travels as its length, then its words, on the server's own
//! communicator. While idle, rank 0 tells `Idle` every third of the remote
//! deadline and waits for each rank's answer, so a rank that stopped or
//! went silent is found within the deadline with no request running; a
//! rank 0 that went silent is found by the others the same way. Either
//! ends the job with an error naming the rank.

use std::time::Duration;

use anyhow::{bail, Result};
use baton_core::sync::WaitPolicy;
use baton_model::Model;
use baton_mpi::RemoteBound;
use baton_serve::engine::{follow, Mirror, MirrorCall};

use crate::cli::rank_model::RankLink;

/// The tag of a call's length, of its words, and of an answer to `Idle`.
const LENGTH: u16 = 1;
const WORDS: u16 = 2;
const ALIVE: u16 = 3;

/// Most words one call may take (a step of every slot's prompt chunk).
const MAX_WORDS: u32 = 1 << 24;

/// Rank 0's side.
pub struct RankMirror {
    link: RankLink,
}

impl RankMirror {
    /// Tells the other ranks of `link`.
    pub fn new(link: RankLink) -> RankMirror {
        RankMirror { link }
    }
}

impl Mirror for RankMirror {
    fn tell(&mut self, call: &MirrorCall) -> Result<(), String> {
        let link = &self.link;
        let words = call.encode();
        for peer in 1..link.size {
            let mut length = vec![words.len() as u32];
            let mut payload = words.clone();
            link.comm.send(peer, LENGTH, &mut length, &link.bound).map_err(|e| format!("rank {peer}: {e}"))?;
            link.comm.send(peer, WORDS, &mut payload, &link.bound).map_err(|e| format!("rank {peer}: {e}"))?;
        }
        if *call == MirrorCall::Idle {
            for peer in 1..link.size {
                let mut alive = vec![0u32];
                link.comm.recv(peer, ALIVE, &mut alive, &link.bound).map_err(|e| format!("rank {peer}: {e}"))?;
            }
        }
        Ok(())
    }

    fn idle_interval(&self) -> Duration {
        self.link.bound.deadline / 3
    }
}

/// A rank other than 0: makes rank 0's calls until it stops. An error (rank
/// 0 silent past the deadline, a call that fails) is told to every rank.
pub fn follow_rank_0(model: &mut Model, link: &RankLink) -> Result<()> {
    // The wait for the next call sleeps between tests: this rank's core is
    // rank 0's meanwhile (sampling, HTTP), and the wait may be an idle
    // server's. The model's own waits keep the process's policy.
    let between_calls = RemoteBound::new(link.bound.deadline, WaitPolicy::Block);
    let mut next = || -> Result<MirrorCall, String> {
        let mut length = vec![0u32];
        link.comm.recv(0, LENGTH, &mut length, &between_calls).map_err(|e| format!("waiting for rank 0: {e}"))?;
        if length[0] > MAX_WORDS {
            return Err(format!("rank 0 sent a call of {} words", length[0]));
        }
        let mut words = vec![0u32; length[0] as usize];
        link.comm.recv(0, WORDS, &mut words, &link.bound).map_err(|e| format!("waiting for rank 0: {e}"))?;
        let call = MirrorCall::decode(&words).map_err(|e| e.to_string())?;
        if call == MirrorCall::Idle {
            link.comm.send(0, ALIVE, &mut vec![1u32], &link.bound).map_err(|e| format!("answering rank 0: {e}"))?;
        }
        Ok(call)
    };
    if let Err(why) = follow(model, &mut next) {
        link.comm.announce_failure(&why);
        bail!("rank {}: serving with rank 0 failed: {why}", link.rank);
    }
    Ok(())
}
