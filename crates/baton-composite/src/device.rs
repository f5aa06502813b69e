//! The composite device: N inner devices presented as one.

use baton_core::loom::Mutex;
use std::sync::Arc;

use baton_core::backend::{
    into_devices, Buffer, Device, DeviceError, DeviceInfo, DeviceMemory, HazardReport, IntoDevice, Stream, TensorRef,
};
use baton_core::graph::Op;
use std::time::Duration;

use baton_core::sync::{default_wait_deadline, Failure, WaitPolicy};
use baton_core::DType;

use crate::buffer::{CompositeBuffer, SplitTensor};
use crate::collective::{Butterfly, Collective};
use crate::error::CompositeError;
use crate::profile::GateProfile;
use crate::split::TensorSplit;
use crate::stream::CompositeStream;

/// A device made of `N` inner devices: memory is mirrored, split or held as
/// partial sums over them, and a stream runs every graph on all of them,
/// with gates (collectives) where one device needs the others' results.
pub struct CompositeDevice {
    info: DeviceInfo,
    inner: Vec<Arc<dyn Device>>,
    policy: WaitPolicy,
    collective: Arc<dyn Collective>,
    /// Every inner stream made so far (handles), for the sanitizer's counts.
    streams: Mutex<Vec<Stream>>,
    profile: Arc<GateProfile>,
    /// Whether its streams fold all-reduces (known once one exists).
    folds: std::sync::OnceLock<bool>,
    /// How long a gate (any wait of an inner stream) waits for a peer.
    deadline: Option<Duration>,
    /// The inner device whose stream joins every item (see
    /// [`with_leader`](Self::with_leader)).
    leader: usize,
}

impl CompositeDevice {
    /// A composite over `inner` (at least one device) whose gates wait with
    /// `policy`, using the built-in [`Butterfly`] collective.
    pub fn new(
        inner: impl IntoIterator<Item = impl IntoDevice>,
        policy: WaitPolicy,
    ) -> Result<CompositeDevice, CompositeError> {
        Self::with_collective(inner, policy, Arc::new(Butterfly::new()))
    }

    /// The devices the conformance suite runs composites as: the suite
    /// moves data between two devices, so two composites over the same
    /// `inner` devices (like ggml's `MTL0,MTL0`). The composite's own tests
    /// and `baton conformance -sm tensor` both use it.
    pub fn conformance_pair(
        inner: impl IntoIterator<Item = impl IntoDevice>,
        policy: WaitPolicy,
    ) -> Result<Vec<Arc<dyn Device>>, CompositeError> {
        let inner = into_devices(inner);
        (0..2).map(|_| Ok(Arc::new(Self::new(inner.clone(), policy)?).into_device())).collect()
    }

    /// As [`new`](Self::new), with another collective (a native library).
    pub fn with_collective(
        inner: impl IntoIterator<Item = impl IntoDevice>,
        policy: WaitPolicy,
        collective: Arc<dyn Collective>,
    ) -> Result<CompositeDevice, CompositeError> {
        let inner = into_devices(inner);
        let first = inner.first().ok_or_else(|| CompositeError::Unsupported {
            op: "composite device",
            reason: "needs at least one inner device".into(),
        })?;
        let names: Vec<&str> = inner.iter().map(|d| d.info().name.as_str()).collect();
        let mut weight_types = first.info().weight_types.clone();
        weight_types.retain(|t| inner.iter().all(|d| d.info().weight_types.contains(t)));
        let info = DeviceInfo {
            name: format!("tensor({})", names.join(",")),
            backend: "composite",
            kind: first.info().kind,
            description: format!("tensor parallel over {} devices, gates by {}", inner.len(), collective.name()),
            threads: inner.iter().map(|d| d.info().threads).sum(),
            cores: inner.iter().flat_map(|d| d.info().cores.clone()).collect(),
            memory_bytes: inner.iter().fold(0u64, |sum, d| sum.saturating_add(d.info().memory_bytes)),
            features: first.info().features.clone(),
            weight_types,
            waits_on_host_points: inner.iter().all(|d| d.info().waits_on_host_points),
        };
        let profile = GateProfile::new(inner.len());
        let streams = Mutex::new(Vec::new());
        let folds = std::sync::OnceLock::new();
        let deadline = default_wait_deadline();
        Ok(CompositeDevice { info, inner, policy, collective, streams, profile, folds, deadline, leader: 0 })
    }

    /// This device with inner device `leader` (0 by default) leading its
    /// streams: its stream joins every item (waits for the others' share,
    /// then advances the composite's timeline), runs the host functions
    /// and reads mirrored memory. Over MPI ranks the inner devices of
    /// other ranks are stand-ins that run nothing, so each rank leads with
    /// its own device.
    pub fn with_leader(mut self, leader: usize) -> Result<CompositeDevice, CompositeError> {
        if leader >= self.inner.len() {
            let reason = format!("leader {leader} of {} inner devices", self.inner.len());
            return Err(CompositeError::Unsupported { op: "composite device", reason });
        }
        self.leader = leader;
        Ok(self)
    }

    /// The inner device that leads its streams.
    pub fn leader(&self) -> usize {
        self.leader
    }

    /// This device with another deadline for the waits of its streams, the
    /// gates included (default: [`default_wait_deadline`]): a peer that
    /// goes silent fails the gate with `TimedOut` naming its point after
    /// this long, instead of holding every other device for good.
    pub fn with_wait_deadline(mut self, deadline: Option<Duration>) -> CompositeDevice {
        self.deadline = deadline;
        self
    }

    /// Whether its streams leave all-reduces to their consumers
    /// ([`Partition::build_with`](crate::Partition::build_with)): when the
    /// collective allows it and the inner devices address each other's
    /// memory. `None` until a stream exists (it is probed then).
    pub fn folds_gates(&self) -> Option<bool> {
        self.folds.get().copied()
    }

    /// Waits the inner streams' hazard tracking inserted so far (0 when every
    /// gate orders its cross-device accesses itself).
    pub fn inner_implicit_waits(&self) -> u64 {
        self.streams.lock().iter().map(Stream::implicit_waits).sum()
    }

    /// The races the inner streams found so far (empty on correct gates).
    pub fn inner_hazard_reports(&self) -> Vec<HazardReport> {
        self.streams.lock().iter().flat_map(Stream::hazard_reports).collect()
    }

    /// Each inner stream made so far: its label and its first failure, if
    /// it failed.
    pub fn inner_failures(&self) -> Vec<(String, Option<Failure>)> {
        let streams = self.streams.lock();
        streams.iter().map(|s| (s.label().to_string(), s.timeline().failure())).collect()
    }

    /// Time each inner device spends in gates (off until enabled).
    pub fn gate_profile(&self) -> &GateProfile {
        &self.profile
    }

    /// The inner devices.
    pub fn inner(&self) -> &[Arc<dyn Device>] {
        &self.inner
    }

    /// The wait policy of the gates.
    pub fn wait_policy(&self) -> WaitPolicy {
        self.policy
    }

    /// The collective the gates use.
    pub fn collective(&self) -> &Arc<dyn Collective> {
        &self.collective
    }

    /// One tensor of `dtype` and `dims` in a buffer of its own, held as
    /// `split` says (checked); write and read it whole, bind it whole.
    pub fn alloc_split(&self, dtype: DType, dims: &[usize], split: TensorSplit) -> Result<TensorRef, CompositeError> {
        split.check(dtype, dims, self.inner.len())?;
        let bytes = |dims: &[usize]| -> Result<usize, CompositeError> {
            let rows: usize = dims[..dims.len() - 1].iter().product();
            dtype.row_bytes(dims[dims.len() - 1]).map(|r| r * rows).ok_or_else(|| CompositeError::BadSplit {
                dims: dims.to_vec(),
                reason: format!("rows are not whole blocks of {dtype}"),
            })
        };
        let len = bytes(dims)?;
        let parts = (0..self.inner.len())
            .map(|d| Ok(self.inner[d].alloc(bytes(&split.local_dims(dims, d))?)?))
            .collect::<Result<Vec<_>, CompositeError>>()?;
        let tensor = SplitTensor { dtype, dims: dims.to_vec(), split, windowed: false };
        let buffer = Buffer::new(Box::new(CompositeBuffer::new(self.info.name.clone(), len, parts, Some(tensor))));
        Ok(TensorRef::new(&buffer, 0, dtype, dims)?)
    }
}

impl Device for CompositeDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// Mirrored memory: `bytes` on every inner device.
    fn alloc(&self, bytes: usize) -> Result<Buffer, DeviceError> {
        let parts = self.inner.iter().map(|d| d.alloc(bytes)).collect::<Result<Vec<_>, _>>()?;
        Ok(Buffer::new(Box::new(CompositeBuffer::new(self.info.name.clone(), bytes, parts, None))))
    }

    /// The sum over the inner devices that keep count.
    fn memory(&self) -> Option<DeviceMemory> {
        let counted: Vec<DeviceMemory> = self.inner.iter().filter_map(|d| d.memory()).collect();
        (!counted.is_empty()).then(|| DeviceMemory {
            allocated: counted.iter().map(|m| m.allocated).sum(),
            mapped: counted.iter().map(|m| m.mapped).sum(),
            derived: counted.iter().map(|m| m.derived).sum(),
        })
    }

    fn new_stream(&self) -> Result<Stream, DeviceError> {
        let inner = self
            .inner
            .iter()
            .map(|d| d.new_stream().map(|s| s.with_deadline(self.deadline)))
            .collect::<Result<Vec<_>, _>>()?;
        self.streams.lock().extend(inner.iter().cloned());
        let raw = CompositeStream::new(
            &self.info.name,
            self.inner.clone(),
            inner,
            self.policy,
            self.collective.clone(),
            self.profile.clone(),
            self.leader,
        );
        let _ = self.folds.set(raw.folds());
        Ok(Stream::with_policy(Arc::new(raw), self.policy).with_deadline(self.deadline))
    }

    fn supports(&self, op: &Op, dtype: DType) -> bool {
        self.inner.iter().all(|d| d.supports(op, dtype))
    }
}
