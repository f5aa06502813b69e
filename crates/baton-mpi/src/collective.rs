//! The composite's gates over MPI: tensor parallelism whose inner devices
//! live on different ranks.
//!
//! Each rank builds the same composite device over the same device list
//! (SPMD): its own device, and a [`RemoteDevice`](crate::RemoteDevice)
//! stand-in for each device of another rank, whose stream runs nothing.
//! A gate is queued on the local device's stream only, as a
//! [`RankStream`] operation (read the input, run the MPI operation bounded
//! by the deadline and waited with the gate's policy, write the output);
//! the stand-ins' streams get nothing. An all-reduce is MPI's
//! (`MPI_Iallreduce`, [`Transport::Native`]) or the butterfly over
//! point-to-point ([`Transport::Butterfly`]); an all-gather of uneven parts
//! is `MPI_Iallgatherv` with each rank's segments put in place
//! ([`RankStream::all_gather_parts`]) under either transport.

use std::sync::Arc;
use std::time::Duration;

use baton_composite::{Collective, CompositeError, GateIo, GateKind, GateSpec};
use baton_core::backend::Stream;
use baton_core::loom::Mutex;
use baton_core::sync::WaitPolicy;

use crate::gate::{RankStream, Transport};
use crate::{MpiError, World};

/// [`Collective`] over the ranks of an MPI job, one composite device per
/// rank (see the module's docs).
pub struct MpiCollective {
    world: Arc<World>,
    /// Per composite device, its rank.
    device_ranks: Vec<usize>,
    transport: Transport,
    deadline: Duration,
    /// Per local inner stream that ran a gate, its rank stream (with a
    /// communicator of its own).
    streams: Mutex<Vec<(Stream, Arc<RankStream>)>>,
    /// A communicator made with the collective, for the first stream:
    /// making one is a collective call with no deadline, so the one a
    /// model's single stream needs is made while every rank is known to
    /// be there (right after the launch checks), not at its first gate.
    spare: Mutex<Option<crate::Comm>>,
}

impl MpiCollective {
    /// Gates between the composite devices on `device_ranks` (device `d`
    /// on rank `device_ranks[d]`: every rank of the job holds exactly one),
    /// all-reduces by `transport`, each remote operation bounded by
    /// `deadline`. Collective: makes the first stream's communicator.
    pub fn new(
        world: Arc<World>,
        device_ranks: Vec<usize>,
        transport: Transport,
        deadline: Duration,
    ) -> Result<MpiCollective, MpiError> {
        let mut sorted = device_ranks.clone();
        sorted.sort_unstable();
        if sorted != (0..world.size()).collect::<Vec<_>>() {
            return Err(MpiError::BadBuffers {
                op: "tensor split over ranks",
                what: format!(
                    "needs exactly one device on each of the job's {} ranks, got ranks {device_ranks:?}",
                    world.size()
                ),
            });
        }
        let spare = Mutex::new(Some(world.communicator()?));
        Ok(MpiCollective { world, device_ranks, transport, deadline, streams: Mutex::new(Vec::new()), spare })
    }

    /// The composite device index of this rank's device.
    pub fn local_device(&self) -> usize {
        let rank = self.world.rank();
        self.device_ranks.iter().position(|&r| r == rank).unwrap_or(0)
    }

    /// The rank stream of `stream` waiting with `policy`, made at its first
    /// gate.
    fn rank_stream(&self, stream: &Stream, policy: WaitPolicy) -> Result<Arc<RankStream>, MpiError> {
        let mut streams = self.streams.lock();
        let same = |s: &Stream| std::ptr::addr_eq(Arc::as_ptr(s.raw()), Arc::as_ptr(stream.raw()));
        if let Some((_, rs)) = streams.iter().find(|(s, _)| same(s)) {
            return Ok(rs.clone());
        }
        // Later streams make theirs at their first gate (every rank in the
        // same order: the order of its gates).
        let comm = match self.spare.lock().take() {
            Some(comm) => comm,
            None => self.world.communicator()?,
        };
        let rs = Arc::new(RankStream::new(stream.clone(), comm, self.deadline).with_policy(policy));
        streams.push((stream.clone(), rs.clone()));
        Ok(rs)
    }
}

fn composite_error(e: MpiError) -> CompositeError {
    match e {
        MpiError::Stream(s) => CompositeError::Stream(s),
        other => CompositeError::Unsupported { op: "gate over MPI", reason: other.to_string() },
    }
}

impl Collective for MpiCollective {
    fn name(&self) -> &'static str {
        match self.transport {
            Transport::Native => "mpi",
            Transport::Butterfly => "mpi-butterfly",
        }
    }

    /// The rank stream stages through host memory: no device scratch.
    fn scratch(&self, _spec: &GateSpec, devices: usize) -> Vec<Vec<Vec<usize>>> {
        vec![Vec::new(); devices]
    }

    fn run(
        &self,
        streams: &[Stream],
        spec: &GateSpec,
        io: &GateIo<'_>,
        policy: WaitPolicy,
    ) -> Result<(), CompositeError> {
        if streams.len() != self.device_ranks.len() {
            let reason = format!("{} streams for {} devices", streams.len(), self.device_ranks.len());
            return Err(CompositeError::Unsupported { op: "gate over MPI", reason });
        }
        let d = self.local_device();
        let rs = self.rank_stream(&streams[d], policy).map_err(composite_error)?;
        let (input, output) = (&io.inputs[d], &io.outputs[d]);
        match &spec.kind {
            GateKind::AllReduce => rs.all_reduce(input, output, self.transport),
            GateKind::AllGather { axis, parts } => {
                // MPI gathers in rank order: rank r's segments are those of
                // the device it holds.
                let mut by_rank = vec![Vec::new(); parts.len()];
                for (device, segments) in parts.iter().enumerate() {
                    by_rank[self.device_ranks[device]] = segments.clone();
                }
                rs.all_gather_parts(input, output, &spec.dims, *axis, &by_rank)
            }
        }
        .map(drop)
        .map_err(composite_error)
    }
}
