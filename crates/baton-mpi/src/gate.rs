//! Remote operations queued on a rank's stream: gates whose points a
//! consumer waits on, never the host.

use std::sync::Arc;
use std::time::Duration;

use baton_core::backend::{Stream, TensorRef};
use baton_core::loom::Mutex;
use baton_core::sync::{Failure, FailureKind, HostTimeline, SyncPoint, Timeline};
use baton_core::{DType, StreamError};

use crate::bound::RemoteBound;
use crate::comm::Comm;
use crate::staging::{Pool, Staged};
use crate::MpiError;

/// How a gate's all-reduce travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// MPI's own non-blocking collective (`MPI_Iallreduce`).
    Native,
    /// The butterfly over point-to-point messages ([`crate::tree_sum`]'s
    /// order).
    Butterfly,
}

/// A rank's stream with its own communicator: remote operations are queued
/// on the stream in its order, and each completes a point.
///
/// A gate is three items on the stream: a read of the input tensor into
/// host memory, a host function that runs the MPI operation (bounded by
/// the deadline, waited with the stream's wait policy), and a write of the
/// result into the output tensor. The host function completes a point of a
/// host timeline of this rank stream, which the stream waits on before the
/// write; when the operation fails, that point fails with a `TimedOut` (or
/// `WorkFailed`) first cause naming the silent ranks, and the stream fails
/// with it (`W-FAIL`), so every consumer of the output fails too.
pub struct RankStream {
    stream: Stream,
    comm: Arc<Comm>,
    bound: RemoteBound,
    gates: HostTimeline,
    first_error: Arc<Mutex<Option<MpiError>>>,
    pool: Pool,
}

impl RankStream {
    /// Remote operations on `stream` over `comm` (the stream's own: see
    /// [`World::communicator`](crate::World::communicator)), each bounded
    /// by `deadline` and waited with the stream's wait policy.
    pub fn new(stream: Stream, comm: Comm, deadline: Duration) -> RankStream {
        let bound = RemoteBound::new(deadline, stream.wait_policy());
        let gates = HostTimeline::new(format!("{}/mpi-rank{}", stream.label(), comm.rank()));
        RankStream { stream, comm: Arc::new(comm), bound, gates, first_error: Arc::default(), pool: Pool::default() }
    }

    /// This rank stream, waiting on its remote operations with `policy`
    /// (the edge's or gate's) instead of the stream's own.
    pub fn with_policy(mut self, policy: baton_core::sync::WaitPolicy) -> RankStream {
        self.bound = RemoteBound::new(self.bound.deadline, policy);
        self
    }

    /// The stream.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// The communicator.
    pub fn comm(&self) -> &Comm {
        &self.comm
    }

    /// The bound of every remote operation.
    pub fn bound(&self) -> RemoteBound {
        self.bound
    }

    /// The first remote operation that failed, typed (the stream's failure
    /// carries its text).
    pub fn error(&self) -> Option<MpiError> {
        self.first_error.lock().clone()
    }

    /// Queues an all-reduce (sum) of `input` into `output` (f32, the same
    /// size) after the work queued on the stream before; returns the point
    /// after which `output` holds every rank's sum.
    pub fn all_reduce(
        &self,
        input: &TensorRef,
        output: &TensorRef,
        transport: Transport,
    ) -> Result<SyncPoint, MpiError> {
        let n = f32_len("all-reduce", input)?;
        if f32_len("all-reduce", output)? != n {
            let what = format!("input has {n} values, output {}", output.bytes() / 4);
            return Err(MpiError::BadBuffers { op: "all-reduce", what });
        }
        self.gate(Some(input), Some(output), move |comm, input, output, bound| match transport {
            Transport::Native => comm.all_reduce_sum(input, output, bound),
            Transport::Butterfly => {
                output.copy_from_slice(input);
                comm.butterfly_all_reduce_sum(output, input, bound)
            }
        })
    }

    /// Queues an all-gather: every rank's `input` (f32, equal sizes) in rank
    /// order into `output` (`size` times larger: along the outermost axis).
    pub fn all_gather(&self, input: &TensorRef, output: &TensorRef) -> Result<SyncPoint, MpiError> {
        let n = f32_len("all-gather", input)?;
        if f32_len("all-gather", output)? != n * self.comm.size() {
            let what = format!("input has {n} values, output {} for {} ranks", output.bytes() / 4, self.comm.size());
            return Err(MpiError::BadBuffers { op: "all-gather", what });
        }
        self.gate(Some(input), Some(output), |comm, input, output, bound| comm.all_gather(input, output, bound))
    }

    /// Queues an all-gather of uneven parts: rank `r`'s `input` (f32)
    /// holds segments `parts[r]` of axis `axis` of `output`'s `dims`, and
    /// every rank's `output` gets the whole tensor (`MPI_Iallgatherv`, then
    /// each rank's segments put in place on the host).
    pub fn all_gather_parts(
        &self,
        input: &TensorRef,
        output: &TensorRef,
        dims: &[usize],
        axis: usize,
        parts: &[Vec<std::ops::Range<usize>>],
    ) -> Result<SyncPoint, MpiError> {
        let layout = crate::segments::Segments::new(dims, axis, parts, self.comm.size())?;
        let n = f32_len("all-gather", input)?;
        if n != layout.count(self.comm.rank()) || f32_len("all-gather", output)? != layout.total() {
            let what = format!(
                "input has {n} values, output {} for dims {dims:?} and parts {parts:?} on rank {}",
                output.bytes() / 4,
                self.comm.rank()
            );
            return Err(MpiError::BadBuffers { op: "all-gather", what });
        }
        self.gate(Some(input), Some(output), move |comm, input, output, bound| {
            let counts = layout.counts();
            // Every rank's part (shared indices once per holder).
            let mut gathered = vec![0f32; counts.iter().sum()];
            comm.all_gather_uneven(input, &mut gathered, &counts, bound)?;
            layout.place(&gathered, output);
            Ok(())
        })
    }

    /// Queues a send of `tensor` (f32 or i32: its bytes move unchanged) to
    /// rank `to` with `tag`; its point is reached once the bytes have left
    /// (the tensor may then be written).
    pub fn send(&self, tensor: &TensorRef, to: usize, tag: u16) -> Result<SyncPoint, MpiError> {
        word_len("send", tensor)?;
        self.gate(Some(tensor), None, move |comm, input, _, bound| comm.send(to, tag, input, bound))
    }

    /// Queues a receive into `tensor` (f32 or i32) from rank `from` with
    /// `tag`; its point is reached once `tensor` holds the bytes: a consumer
    /// on any stream waits on it.
    pub fn recv(&self, tensor: &TensorRef, from: usize, tag: u16) -> Result<SyncPoint, MpiError> {
        word_len("recv", tensor)?;
        self.gate(None, Some(tensor), move |comm, _, output, bound| comm.recv(from, tag, output, bound))
    }

    /// Queues a gate; when the stream refuses it because it failed, tells
    /// the peers (they would wait for this rank in vain).
    fn gate(
        &self,
        input: Option<&TensorRef>,
        output: Option<&TensorRef>,
        run: impl FnOnce(&Comm, &mut Vec<f32>, &mut Vec<f32>, &RemoteBound) -> Result<(), MpiError> + Send + 'static,
    ) -> Result<SyncPoint, MpiError> {
        let queued = self.queue_gate(input, output, run);
        if queued.is_err() {
            if let Some(cause) = self.stream.timeline().failure() {
                let label = self.stream.label();
                self.comm.announce_failure(&format!("{label} failed before a remote operation: {cause}"));
            }
        }
        queued
    }

    /// The three items of a gate (see the type's docs).
    fn queue_gate(
        &self,
        input: Option<&TensorRef>,
        output: Option<&TensorRef>,
        run: impl FnOnce(&Comm, &mut Vec<f32>, &mut Vec<f32>, &RemoteBound) -> Result<(), MpiError> + Send + 'static,
    ) -> Result<SyncPoint, MpiError> {
        let read = match input {
            Some(t) => Some(self.stream.read_into_async(t, self.pool.take(t.bytes() / 4)).map_err(StreamError::from)?),
            None => None,
        };
        let staged = Arc::new(Staged::new(self.pool.clone()));
        let out_len = output.map_or(0, |t| t.bytes() / 4);
        let release = self.gates.reserve();
        let done = release.point();
        // Where a failure happens first: this gate's point.
        let origin = done.to_string();
        let (comm, bound, errors, result, pool) =
            (self.comm.clone(), self.bound, self.first_error.clone(), staged.clone(), self.pool.clone());
        // Told to the peers if the host function never runs: the stream
        // failed before the gate, and the peers would wait for it in vain.
        let unrun = Unrun { comm: Some(self.comm.clone()), stream: self.stream.timeline().clone() };
        self.stream.host_fn(move || {
            unrun.ran();
            let mut input = match read.map(|p| p.wait()) {
                None => Vec::new(),
                Some(Ok(bytes)) => bytes,
                Some(Err(e)) => {
                    release.fail(format!("reading the gate's input: {e}"));
                    return Ok(());
                }
            };
            let mut output = pool.take(out_len);
            let ran = run(&comm, &mut input, &mut output, &bound);
            pool.put(input);
            match ran {
                Ok(()) => {
                    result.fill(output);
                    release.signal();
                }
                Err(e) => {
                    let kind = match e.silence() {
                        Some(_) => FailureKind::TimedOut,
                        None => FailureKind::WorkFailed,
                    };
                    if !matches!(e, MpiError::TimedOut { .. } | MpiError::PeerFailed { .. } | MpiError::Poisoned { .. })
                    {
                        comm.announce_failure(&e.to_string());
                    }
                    release.fail_with(Failure::new(kind, origin, e.to_string()));
                    errors.lock().get_or_insert(e);
                }
            }
            Ok(())
        })?;
        // Settled by the host function just before, in stream order: the
        // stream takes its failure, if any, as its own (`W-FAIL`).
        self.stream.wait_or_relay(&done, self.stream.wait_policy())?;
        match output {
            Some(t) => Ok(self.stream.write_slot_async(&t.byte_range(), staged)?),
            None => Ok(self.stream.last_point()),
        }
    }
}

/// Announces the stream's failure to the peers when dropped before
/// [`ran`](Self::ran): the gate's host function was dropped unrun.
struct Unrun {
    comm: Option<Arc<Comm>>,
    stream: Timeline,
}

impl Unrun {
    fn ran(mut self) {
        self.comm = None;
    }
}

impl Drop for Unrun {
    fn drop(&mut self) {
        if let Some(comm) = self.comm.take() {
            let cause = match self.stream.failure() {
                Some(cause) => format!("{} failed before a remote operation: {cause}", self.stream.label()),
                None => format!("{} dropped a remote operation unrun", self.stream.label()),
            };
            comm.announce_failure(&cause);
        }
    }
}

/// Sends and receives move 4-byte words as MPI floats: MPI converts
/// nothing between ranks of one architecture, so i32 bits arrive unchanged.
fn word_len(op: &'static str, t: &TensorRef) -> Result<usize, MpiError> {
    match t.dtype() {
        DType::F32 | DType::I32 => Ok(t.bytes() / 4),
        dtype => Err(MpiError::DType { op, dtype }),
    }
}

fn f32_len(op: &'static str, t: &TensorRef) -> Result<usize, MpiError> {
    if t.dtype() != DType::F32 {
        return Err(MpiError::DType { op, dtype: t.dtype() });
    }
    Ok(t.bytes() / 4)
}
