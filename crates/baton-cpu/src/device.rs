//! CPU devices: a set of cores, its own pinned thread pool, its own memory.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use baton_core::backend::{
    Buffer, Device, DeviceError, DeviceInfo, DeviceKind, DeviceMemory, FileRange, Stream, TensorRef,
};
use baton_core::graph::Op;
use baton_core::sync::WaitPolicy;
use baton_core::DType;
use baton_kernels::{matmul, matmul_packed, KernelError, MatMut, MatRef, Scratch, WeightMatrix, WEIGHT_TYPES};

use crate::buffer::CpuBuffer;
use crate::device_shared::CpuDeviceShared;
use crate::mapping::Mapping;
use crate::pool::ThreadPool;
use crate::stream::CpuStream;

/// One CPU device.
pub struct CpuDevice {
    shared: Arc<CpuDeviceShared>,
    next_stream: AtomicUsize,
    policy: WaitPolicy,
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

fn total_memory_bytes() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// The CPU extensions the kernels use at `isa`, as `/proc/cpuinfo` names
/// them, or `scalar` for the portable path.
fn kernel_features(isa: baton_kernels::Isa) -> Vec<String> {
    match isa.extensions() {
        [] => vec!["scalar".into()],
        extensions => extensions.iter().map(ToString::to_string).collect(),
    }
}

impl CpuDevice {
    /// A device named `name` running `threads` threads on `cores` (pinned
    /// when the list is not empty).
    pub fn new(name: &str, cores: Vec<usize>, threads: usize, share_of_memory: f64) -> Result<CpuDevice, DeviceError> {
        let threads = threads.max(1);
        let pool = ThreadPool::new(name, threads, &cores)
            .map_err(|e| DeviceError::backend(name, "could not start worker threads", e))?;
        let isa = baton_kernels::Isa::detected();
        let info = DeviceInfo {
            name: name.into(),
            backend: "cpu",
            kind: DeviceKind::Cpu,
            description: cpu_model(),
            threads,
            cores,
            memory_bytes: (total_memory_bytes() as f64 * share_of_memory) as u64,
            features: kernel_features(isa),
            weight_types: WEIGHT_TYPES.to_vec(),
            waits_on_host_points: true,
        };
        Ok(CpuDevice {
            shared: Arc::new(CpuDeviceShared {
                info,
                pool,
                allocated: AtomicU64::new(0),
                packed: AtomicU64::new(0),
                memory: Arc::default(),
            }),
            next_stream: AtomicUsize::new(0),
            policy: WaitPolicy::process_default(),
        })
    }

    /// Sets the wait policy of streams created from now on: how their
    /// workers wait on foreign points and for new work, and the default
    /// policy of their edges.
    pub fn set_wait_policy(&mut self, policy: WaitPolicy) {
        self.policy = policy;
    }

    /// Bytes allocated on this device so far (not decreased by frees).
    pub fn allocated_bytes(&self) -> u64 {
        self.shared.allocated.load(Ordering::Relaxed)
    }

    /// Bytes of matmul weights this device has packed for its kernels so
    /// far: copies of sealed weights (`Buffer::declare_weights`), made on
    /// their first use, held beside the weights while their buffer lives.
    pub fn packed_bytes(&self) -> u64 {
        self.shared.packed.load(Ordering::Relaxed)
    }

    /// The device's thread pool, for kernels run outside streams (benches).
    pub fn parallel(&self) -> &dyn baton_core::Parallel {
        &self.shared.pool
    }
}

impl Device for CpuDevice {
    fn info(&self) -> &DeviceInfo {
        &self.shared.info
    }

    fn alloc(&self, bytes: usize) -> Result<Buffer, DeviceError> {
        let raw = CpuBuffer::new(bytes, &self.shared.info.name, &self.shared.memory)
            .ok_or_else(|| DeviceError::OutOfMemory { device: self.shared.info.name.clone(), bytes })?;
        self.shared.allocated.fetch_add(bytes as u64, Ordering::Relaxed);
        Ok(Buffer::new(Box::new(raw)))
    }

    fn map_file(&self, range: FileRange<'_>) -> Result<Option<Buffer>, DeviceError> {
        let name = &self.shared.info.name;
        let mapping = Mapping::new(range).map_err(|e| DeviceError::backend(name, "could not map the weights", e))?;
        let raw = CpuBuffer::mapped(mapping, name, &self.shared.memory);
        // Sealed from the start: no write ever reaches the mapping, which
        // lets packing give its pages back (see `mapping`).
        Ok(Some(Buffer::new_sealed_weights(Box::new(raw))))
    }

    fn memory(&self) -> Option<DeviceMemory> {
        Some(self.shared.memory.snapshot())
    }

    fn new_stream(&self) -> Result<Stream, DeviceError> {
        let index = self.next_stream.fetch_add(1, Ordering::Relaxed);
        let stream = CpuStream::spawn(self.shared.clone(), index, self.policy)
            .map_err(|e| DeviceError::backend(&self.shared.info.name, "could not start a stream thread", e))?;
        Ok(Stream::with_policy(Arc::new(stream), self.policy))
    }

    fn host_threads(&self) -> Option<&dyn baton_core::Parallel> {
        Some(&self.shared.pool)
    }

    fn host_matmul(&self, weights: &TensorRef, x: &[f32], y: &mut [f32]) -> Option<Result<(), DeviceError>> {
        let buffer = weights.buffer();
        let raw = buffer.raw().as_any().downcast_ref::<CpuBuffer>()?;
        let bytes = buffer.final_host_bytes(weights.offset()..weights.offset() + weights.bytes())?;
        let (n, k) = (weights.shape().rows(), weights.shape().last());
        Some(host_product(&self.shared, raw, weights.dtype(), bytes, (n, k), x, y))
    }

    fn supports(&self, op: &Op, dtype: DType) -> bool {
        match op {
            Op::MatMul | Op::MatMulId | Op::MatMulIdShare { .. } | Op::GetRows => WEIGHT_TYPES.contains(&dtype),
            Op::CopyInto | Op::Contiguous | Op::View | Op::Leaf => true,
            // A KV cache of any float or block type.
            Op::Attention { .. } | Op::ScatterRows => dtype != DType::I32,
            _ => dtype == DType::F32,
        }
    }
}

/// `y = x · wᵀ` on the device's pool for [`Device::host_matmul`]: the
/// matrix's packed form (packed now if this is its first use), else its
/// bytes, as the device's MatMul reads them.
fn host_product(
    device: &CpuDeviceShared,
    buffer: &CpuBuffer,
    dtype: DType,
    bytes: &[u8],
    (n, k): (usize, usize),
    x: &[f32],
    y: &mut [f32],
) -> Result<(), DeviceError> {
    let failed =
        |e: KernelError| DeviceError::backend(&device.info.name, "could not multiply by weights on the host", e);
    let rows = x.len().checked_div(k).unwrap_or(0);
    let mismatch = |what, expected, actual| failed(KernelError::LengthMismatch { what, expected, actual });
    if rows * k != x.len() {
        return Err(mismatch("host product input (whole rows)", (rows + 1) * k, x.len()));
    }
    if rows * n != y.len() {
        return Err(mismatch("host product output", rows * n, y.len()));
    }
    let w = WeightMatrix::contiguous(dtype, bytes, n, k).map_err(failed)?;
    let (xm, mut ym) = (MatRef::contiguous(x, rows, k), MatMut::contiguous(y, rows, n));
    let mut scratch = Scratch::default();
    match buffer.packed().get_or_pack(&w, device).map_err(failed)? {
        Some(packed) => matmul_packed(&device.pool, &packed, &xm, &mut ym, &mut scratch),
        None => matmul(&device.pool, &w, &xm, &mut ym, &mut scratch),
    }
    .map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_kernels::Isa;

    #[test]
    fn features_name_the_extensions_of_the_detected_level() {
        let device = CpuDevice::new("cpu", Vec::new(), 1, 1.0).expect("a one-thread device starts");
        let features = &device.info().features;
        match Isa::detected() {
            Isa::Scalar => assert_eq!(features, &["scalar"]),
            isa => assert_eq!(features, isa.extensions(), "{isa:?}"),
        }
        assert_eq!(kernel_features(Isa::Avx2), ["avx2", "fma", "f16c"]);
        assert!(kernel_features(Isa::Avx512).iter().any(|f| f == "avx512vnni"));
    }
}
