//! The scheduler's edges between ranks: a crossing whose producer and
//! consumer live on different ranks is a send on the producer's stream and
//! a receive on the consumer's, bounded like every remote operation.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use baton_core::backend::{Stream, TensorRef};
use baton_core::sync::SyncPoint;
use baton_sched::{RemoteEdges, Runner, SchedError};

use baton_core::sync::WaitPolicy;

use crate::bound::RemoteBound;
use crate::comm::{Comm, RESERVED_TAGS};
use crate::gate::RankStream;
use crate::world::World;
use crate::MpiError;

/// [`RemoteEdges`] over MPI, for a runner whose devices are spread over the
/// ranks (the remote ones are [`RemoteDevice`](crate::RemoteDevice)s).
///
/// Every ordered pair of devices on different ranks has a communicator of
/// its own, on the producer's stream at the producer's rank and on the
/// consumer's stream at the consumer's: each side posts that edge's
/// messages from one stream, in the plan's order, so MPI's in-order
/// matching pairs each send with its receive (the tag, the crossing's index
/// in the run, is checked on top).
pub struct RankEdges {
    rank: usize,
    device_ranks: Vec<usize>,
    /// The rank stream of each edge (producer device, consumer device) that
    /// has an end here.
    edges: HashMap<(usize, usize), RankStream>,
    /// The host's own exchanges (outputs shared with every rank).
    host: Comm,
    host_bound: RemoteBound,
    /// MPI stays initialised while the edges live (dropped last).
    world: Option<Arc<World>>,
}

impl RankEdges {
    /// The edges of `runner`, whose device `d` lives on rank
    /// `device_ranks[d]`; each send and receive bounded by `deadline`.
    /// Collective: every rank calls it with the same device ranks (it makes
    /// one communicator per cross-rank pair of devices, in the same order).
    pub fn new(world: &World, runner: &Runner, device_ranks: &[usize], deadline: Duration) -> Result<Self, MpiError> {
        let rank = world.rank();
        let host = world.communicator()?;
        let host_bound = RemoteBound::new(deadline, WaitPolicy::process_default());
        let mut edges = HashMap::new();
        for (from, &from_rank) in device_ranks.iter().enumerate() {
            for (to, &to_rank) in device_ranks.iter().enumerate() {
                if from_rank == to_rank {
                    continue;
                }
                let comm = world.communicator()?;
                let here = if from_rank == rank {
                    Some(from)
                } else if to_rank == rank {
                    Some(to)
                } else {
                    None
                };
                if let Some(d) = here {
                    edges.insert((from, to), RankStream::new(runner.stream(d).clone(), comm, deadline));
                }
            }
        }
        Ok(RankEdges { rank, device_ranks: device_ranks.to_vec(), edges, host, host_bound, world: None })
    }

    /// These edges keep `world` (and so MPI) alive as long as they live:
    /// for a runner that outlives its caller's handle of the world.
    pub fn keeping(mut self, world: Arc<World>) -> Self {
        self.world = Some(world);
        self
    }

    /// The first remote operation that failed on any edge, typed.
    pub fn error(&self) -> Option<MpiError> {
        self.edges.values().find_map(RankStream::error)
    }

    fn edge(&self, stream: &Stream, from: usize, to: usize) -> Result<&RankStream, SchedError> {
        let fail = |cause: String| SchedError::Remote { from, to, cause };
        let edge =
            self.edges.get(&(from, to)).ok_or_else(|| fail(format!("no edge between ranks here ({})", self.rank)))?;
        if !edge.stream().timeline().same_as(stream.timeline()) {
            return Err(fail(format!("queued on {}, but the edge runs on {}", stream.label(), edge.stream().label())));
        }
        Ok(edge)
    }
}

/// The MPI tag of a crossing.
fn tag(crossing: u32) -> u16 {
    (crossing % u32::from(RESERVED_TAGS)) as u16
}

impl RemoteEdges for RankEdges {
    fn is_local(&self, device: usize) -> bool {
        self.device_ranks.get(device) == Some(&self.rank)
    }

    fn send(
        &self,
        stream: &Stream,
        src: &TensorRef,
        from: usize,
        to: usize,
        crossing: u32,
        producer: Option<&SyncPoint>,
    ) -> Result<SyncPoint, SchedError> {
        let edge = self.edge(stream, from, to)?;
        if let Some(p) = producer {
            stream.wait_or_relay(p, stream.wait_policy())?;
        }
        edge.send(src, self.device_ranks[to], tag(crossing)).map_err(|e| SchedError::Remote {
            from,
            to,
            cause: e.to_string(),
        })
    }

    fn recv(
        &self,
        stream: &Stream,
        dst: &TensorRef,
        from: usize,
        to: usize,
        crossing: u32,
    ) -> Result<SyncPoint, SchedError> {
        let edge = self.edge(stream, from, to)?;
        edge.recv(dst, self.device_ranks[from], tag(crossing)).map_err(|e| SchedError::Remote {
            from,
            to,
            cause: e.to_string(),
        })
    }

    fn share(&self, values: &mut [f32], owner: usize) -> Result<(), SchedError> {
        let fail = |e: MpiError| SchedError::Shared { owner, cause: e.to_string() };
        let Some(&from) = self.device_ranks.get(owner) else {
            let cause = format!("no device {owner} among {}", self.device_ranks.len());
            return Err(SchedError::Shared { owner, cause });
        };
        let mut host = values.to_vec();
        if from == self.rank {
            for to in (0..self.host.size()).filter(|&r| r != from) {
                self.host.send(to, SHARE_TAG, &mut host, &self.host_bound).map_err(fail)?;
            }
        } else {
            self.host.recv(from, SHARE_TAG, &mut host, &self.host_bound).map_err(fail)?;
            values.copy_from_slice(&host);
        }
        Ok(())
    }
}

/// The tag of shared outputs on the host's communicator.
const SHARE_TAG: u16 = 1;
