//! Devices: what they are, what they can do, and how to get memory and
//! streams from them.

use std::sync::Arc;

use crate::backend::{Buffer, DeviceError, Stream, TensorRef};
use crate::graph::Op;
use crate::shape::{Layout, Shape};
use crate::{DType, Parallel};

/// The kind of a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceKind {
    /// A group of CPU cores.
    Cpu,
    /// A GPU.
    Gpu,
}

/// What a device offers, for `baton devices` and for placement.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    /// `cpu:0`, `vulkan:1`.
    pub name: String,
    /// The backend's name.
    pub backend: &'static str,
    /// CPU or GPU.
    pub kind: DeviceKind,
    /// A human description (CPU model, GPU name).
    pub description: String,
    /// Compute threads (CPU) or 0.
    pub threads: usize,
    /// The cores its threads are pinned to (CPU), empty when not pinned.
    pub cores: Vec<usize>,
    /// Memory available to it, in bytes.
    pub memory_bytes: u64,
    /// Instruction sets or features used by its kernels (`avx2`, `fma`).
    pub features: Vec<String>,
    /// Weight types it holds and its matmul multiplies by (what
    /// [`Device::holds_weights`] answers from).
    pub weight_types: Vec<DType>,
    /// Whether its streams can wait on host-memory points natively.
    pub waits_on_host_points: bool,
}

/// A byte range of an open file ([`Device::map_file`]).
#[derive(Clone, Copy, Debug)]
pub struct FileRange<'a> {
    /// The file, open for reading.
    pub file: &'a std::fs::File,
    /// Offset of the first byte.
    pub offset: u64,
    /// Bytes (at least 1).
    pub len: usize,
}

/// What a device's memory holds ([`Device::memory`]), in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceMemory {
    /// Buffers allocated and not yet freed.
    pub allocated: u64,
    /// Buffers mapped from files ([`Device::map_file`]) and not yet
    /// unmapped; resident only as far as they are read.
    pub mapped: u64,
    /// Forms the device derived from sealed weights for its kernels (the
    /// CPU's packed matmul weights), held while their buffer lives.
    pub derived: u64,
}

/// A device: a source of memory and streams.
pub trait Device: Send + Sync {
    /// What it is and offers.
    fn info(&self) -> &DeviceInfo;

    /// Allocates `bytes` of device memory (zeroed).
    fn alloc(&self, bytes: usize) -> Result<Buffer, DeviceError>;

    /// Allocates a contiguous tensor of `dtype` and `dims` in a buffer of
    /// its own (zeroed), sized by the type: quantized types by whole blocks
    /// per row.
    fn alloc_tensor(&self, dtype: DType, dims: &[usize]) -> Result<TensorRef, DeviceError> {
        let shape = Shape::new(dims)?;
        let bytes = Layout::contiguous(dtype, shape)?.end_byte(dtype);
        Ok(TensorRef::whole(self.alloc(bytes)?, dtype, shape))
    }

    /// Maps `range` of a file as a buffer of weights, without copying it,
    /// where the device can address the host's page cache (the CPU);
    /// `Ok(None)` where it cannot, and the caller allocates and uploads.
    ///
    /// The buffer is declared weights and sealed from the start
    /// ([`Buffer::is_sealed`]): the runtime refuses every write into it, so
    /// its bytes are the file's for as long as it lives. The file must not
    /// be changed or truncated meanwhile (as for any memory-mapped file: a
    /// changed file changes the weights, a truncated one faults).
    fn map_file(&self, _range: FileRange<'_>) -> Result<Option<Buffer>, DeviceError> {
        // Exactly `Ok(None)`, so that cargo-mutants, which skips a
        // replacement equal to the body, makes no no-op mutant of it.
        Ok(None)
    }

    /// What the device's memory holds now, where it keeps count; `None`
    /// where it does not.
    fn memory(&self) -> Option<DeviceMemory> {
        None
    }

    /// Creates a new in-order stream.
    fn new_stream(&self) -> Result<Stream, DeviceError>;

    /// The host threads the device computes with, where it has them (a
    /// CPU device's pool): for host kernels run beside its streams, such
    /// as a drafter's head between two steps. A job there takes its turn
    /// with the streams' ops (one job at a time). `None` by default (a GPU
    /// computes on no host threads).
    fn host_threads(&self) -> Option<&dyn Parallel> {
        None
    }

    /// Multiplies `x`, rows of `k` f32 values, by the transpose of the
    /// weight matrix `weights` (`n` rows of `k` values, a tensor of this
    /// device's memory) into `y` (as many rows of `n` values) now, on
    /// [`host_threads`](Self::host_threads), with the kernels and the form
    /// of the weights its MatMul ops use (a CPU's packed copy), so the
    /// bits its MatMul would give. For host kernels that share a model's
    /// matrices between its steps (a drafter's head and the model's output
    /// matrix), where reading the file's bytes would make them resident a
    /// second time. `None` where the device does not offer it: by default
    /// (a GPU), and where the weights' bytes are not final host memory
    /// ([`Buffer::final_host_bytes`]); the caller computes it otherwise.
    fn host_matmul(&self, _weights: &TensorRef, _x: &[f32], _y: &mut [f32]) -> Option<Result<(), DeviceError>> {
        None
    }

    /// Whether the device can hold a weight matrix of type `dtype` and
    /// multiply by it (and look rows up in it): one of its
    /// [`DeviceInfo::weight_types`]. A model loader asks the device it
    /// places each weight on, so a backend that decodes fewer types (the
    /// Vulkan shaders) refuses a file the CPU would load.
    fn holds_weights(&self, dtype: DType) -> bool {
        self.info().weight_types.contains(&dtype)
    }

    /// Whether the device can run `op` on data of type `dtype`: the
    /// weights' for [`Op::MatMul`], [`Op::MatMulId`], [`Op::MatMulIdShare`] and
    /// [`Op::GetRows`], the cache's for
    /// [`Op::Attention`] and [`Op::ScatterRows`], else the first input's.
    fn supports(&self, op: &Op, dtype: DType) -> bool;
}

/// A device handle as the runtime holds it, `Arc<dyn Device>`, from a
/// backend's own handle (`Arc<CpuDevice>`) or an erased one: what functions
/// that take devices accept, so callers never cast.
pub trait IntoDevice {
    /// The erased handle.
    fn into_device(self) -> Arc<dyn Device>;
}

impl<D: Device + 'static> IntoDevice for Arc<D> {
    fn into_device(self) -> Arc<dyn Device> {
        self
    }
}

impl IntoDevice for Arc<dyn Device> {
    fn into_device(self) -> Arc<dyn Device> {
        self
    }
}

/// Erases a list of device handles (see [`IntoDevice`]).
pub fn into_devices(devices: impl IntoIterator<Item = impl IntoDevice>) -> Vec<Arc<dyn Device>> {
    devices.into_iter().map(IntoDevice::into_device).collect()
}
