//! The runtime underneath, for Python: devices, their tensors and streams,
//! and the sync points streams return, so the asynchronous contract
//! (docs/contract.md) can be driven from Python.
//!
//! Every queued operation returns at once with a `Point`; a host wait
//! (`Point.wait`, `Read.wait`, `Stream.synchronize`) releases the GIL and
//! wakes every [`WAIT_TICK`] to let Python raise `KeyboardInterrupt`.
//! NumPy arrays go in and come out as one copy each way: the limited API of
//! Python 3.9 (abi3) has no buffer protocol to lend their memory.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use baton_core::backend::{Device, DeviceKind, Pending, TensorRef};
use baton_core::graph::{Flags, Graph, GraphError, NodeId};
use baton_core::sync::WaitError;
use baton_core::{Bindings, DType, Stream, SyncPoint};
use pyo3::exceptions::{PyTimeoutError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::{load_error, stream_error};

/// How long a host wait holds the GIL released before Python may run its
/// signal handlers.
pub const WAIT_TICK: Duration = Duration::from_millis(50);

/// A device, as `baton.devices()` opens it.
#[pyclass(module = "baton._baton", name = "Device", frozen)]
pub struct PyDevice {
    device: Arc<dyn Device>,
}

/// A tensor in a device's memory.
#[pyclass(module = "baton._baton", name = "Tensor", frozen)]
pub struct PyTensor {
    tensor: TensorRef,
    device: String,
}

/// An in-order queue of work on one device.
#[pyclass(module = "baton._baton", name = "Stream", frozen)]
pub struct PyStream {
    stream: Stream,
}

/// A point on a stream's timeline: reached once the work queued before it
/// is done.
#[pyclass(module = "baton._baton", name = "Point", frozen)]
#[derive(Clone)]
pub struct PyPoint {
    point: SyncPoint,
}

/// A read in flight: `wait()` gives the tensor's contents.
#[pyclass(module = "baton._baton", name = "Read", frozen)]
pub struct PyRead {
    pending: Mutex<Option<Pending<Vec<u8>>>>,
    point: SyncPoint,
    dtype: DType,
    dims: Vec<usize>,
}

/// NumPy's name of an element type Baton and NumPy share.
fn numpy_name(dtype: DType) -> Option<&'static str> {
    match dtype {
        DType::F32 => Some("float32"),
        DType::F16 => Some("float16"),
        DType::I32 => Some("int32"),
        _ => None,
    }
}

/// Opens the devices of a comma-separated list (`cpu`, `cpu:0,cpu:1`,
/// `vulkan:0`), `threads` each for CPU devices.
#[pyfunction]
#[pyo3(signature = (names = "cpu", threads = None))]
pub fn devices(py: Python<'_>, names: &str, threads: Option<usize>) -> PyResult<Vec<PyDevice>> {
    if threads == Some(0) {
        return Err(PyValueError::new_err("threads must be at least 1"));
    }
    let opened = py.detach(|| baton_load::open_devices(names, threads)).map_err(load_error)?;
    Ok(opened.into_iter().map(|device| PyDevice { device }).collect())
}

/// The devices of one kind (`"vulkan"`, `"cpu"`) this machine has, in
/// order, as (name, is a GPU, description); empty where the kind
/// enumerates nothing (no driver) or is not a kind.
#[pyfunction]
pub fn device_list(py: Python<'_>, kind: &str) -> Vec<(String, bool, String)> {
    let Some(found) = baton_load::registry::find(kind) else { return Vec::new() };
    let rows = py.detach(|| found.enumerate()).unwrap_or_default();
    rows.into_iter().map(|row| (row.name, row.kind == DeviceKind::Gpu, row.description)).collect()
}

/// Waits for `point` with the GIL released, at most `timeout` seconds
/// (`None`: until it is reached or fails).
fn wait_point(py: Python<'_>, point: &SyncPoint, timeout: Option<f64>) -> PyResult<()> {
    let limit = match timeout {
        Some(t) if !(t >= 0.0 && t.is_finite()) => {
            return Err(PyValueError::new_err(format!("timeout must be a finite number of seconds >= 0, not {t}")))
        }
        Some(t) => Some(Instant::now() + Duration::from_secs_f64(t)),
        None => None,
    };
    loop {
        let slice = match limit {
            Some(end) => end.saturating_duration_since(Instant::now()).min(WAIT_TICK),
            None => WAIT_TICK,
        };
        match py.detach(|| point.wait_timeout(slice)) {
            Ok(()) => return Ok(()),
            Err(WaitError::Timeout { .. }) if limit.is_none_or(|end| Instant::now() < end) => py.check_signals()?,
            Err(e @ WaitError::Timeout { .. }) => return Err(PyTimeoutError::new_err(e.to_string())),
            Err(e) => return Err(stream_error(&e)),
        }
    }
}

#[pymethods]
impl PyDevice {
    /// The device's name (`cpu:0`, `vulkan:0`).
    #[getter]
    fn name(&self) -> String {
        self.device.info().name.clone()
    }

    /// A new tensor of `dtype` (`f32`, `f16`, `i32`, or a block type such
    /// as `q8_0`) and `shape` in this device's memory.
    fn tensor(&self, dtype: &str, shape: Vec<usize>) -> PyResult<PyTensor> {
        let dtype = DType::from_name(dtype).ok_or_else(|| PyValueError::new_err(format!("unknown dtype {dtype:?}")))?;
        let tensor = self.device.alloc_tensor(dtype, &shape).map_err(|e| stream_error(&e))?;
        Ok(PyTensor { tensor, device: self.name() })
    }

    /// A new stream on this device.
    fn stream(&self) -> PyResult<PyStream> {
        Ok(PyStream { stream: self.device.new_stream().map_err(|e| stream_error(&e))? })
    }

    fn __repr__(&self) -> String {
        format!("Device({:?})", self.name())
    }
}

#[pymethods]
impl PyTensor {
    /// The element type's name.
    #[getter]
    fn dtype(&self) -> &'static str {
        self.tensor.dtype().name()
    }

    /// The dimensions.
    #[getter]
    fn shape(&self) -> Vec<usize> {
        self.tensor.shape().dims().to_vec()
    }

    /// Its size in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.tensor.bytes()
    }

    /// The device it lives on.
    #[getter]
    fn device(&self) -> String {
        self.device.clone()
    }

    fn __repr__(&self) -> String {
        format!("Tensor({}, {:?}, on {})", self.dtype(), self.shape(), self.device)
    }
}

impl PyTensor {
    /// The bytes of `data` for this tensor: a NumPy array of its element
    /// type and size (any shape), or `bytes` of exactly its size.
    fn bytes_of(&self, data: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
        let bytes: Vec<u8> = if let Ok(raw) = data.cast::<PyBytes>() {
            raw.as_bytes().to_vec()
        } else if data.hasattr("dtype")? && data.hasattr("tobytes")? {
            let name: String = data.getattr("dtype")?.getattr("name")?.extract()?;
            let want = numpy_name(self.tensor.dtype());
            if want != Some(name.as_str()) && !(want.is_none() && name == "uint8") {
                return Err(PyTypeError::new_err(format!(
                    "an array of {name} cannot fill a {} tensor (it takes {})",
                    self.dtype(),
                    want.unwrap_or("uint8 bytes of its blocks")
                )));
            }
            data.call_method0("tobytes")?.cast::<PyBytes>()?.as_bytes().to_vec()
        } else {
            return Err(PyTypeError::new_err(format!(
                "a tensor is written from a NumPy array or bytes, not {}",
                data.get_type().name()?
            )));
        };
        if bytes.len() != self.tensor.bytes() {
            return Err(PyValueError::new_err(format!(
                "{} bytes given for a tensor of {} bytes ({} {:?})",
                bytes.len(),
                self.tensor.bytes(),
                self.dtype(),
                self.shape()
            )));
        }
        Ok(bytes)
    }
}

#[pymethods]
impl PyStream {
    /// Queues a write of `data` (a NumPy array or bytes, copied now) into
    /// `tensor`; returns at once with the write's point.
    fn write(&self, tensor: &PyTensor, data: &Bound<'_, PyAny>) -> PyResult<PyPoint> {
        let bytes = tensor.bytes_of(data)?;
        let pending = self.stream.write_async(&tensor.tensor, bytes).map_err(|e| stream_error(&e))?;
        Ok(PyPoint { point: pending.point().clone() })
    }

    /// Queues a read of `tensor`; `Read.wait()` gives its contents.
    fn read(&self, tensor: &PyTensor) -> PyResult<PyRead> {
        let pending = self.stream.read_async(&tensor.tensor).map_err(|e| stream_error(&e))?;
        Ok(PyRead {
            point: pending.point().clone(),
            pending: Mutex::new(Some(pending)),
            dtype: tensor.tensor.dtype(),
            dims: tensor.shape(),
        })
    }

    /// Queues a copy of `src` into `dst` (tensors of the same size, on any
    /// devices), after `after` when another stream produces `src`.
    #[pyo3(signature = (src, dst, after = None))]
    fn copy(&self, src: &PyTensor, dst: &PyTensor, after: Option<&PyPoint>) -> PyResult<PyPoint> {
        let point =
            self.stream.copy(&src.tensor, &dst.tensor, after.map(|p| &p.point)).map_err(|e| stream_error(&e))?;
        Ok(PyPoint { point })
    }

    /// Makes this stream's later work wait for `point` (of any stream),
    /// without blocking the host.
    fn wait(&self, point: &PyPoint) -> PyResult<PyPoint> {
        Ok(PyPoint { point: self.stream.wait(&point.point).map_err(|e| stream_error(&e))? })
    }

    /// Queues `dst = factor * src` (f32 tensors of one shape).
    fn scale(&self, src: &PyTensor, dst: &PyTensor, factor: f32) -> PyResult<PyPoint> {
        self.elementwise(&[src], dst, |g, x| g.scale(x[0], factor))
    }

    /// Queues `dst = a + b` (f32 tensors of one shape).
    fn add(&self, a: &PyTensor, b: &PyTensor, dst: &PyTensor) -> PyResult<PyPoint> {
        self.elementwise(&[a, b], dst, |g, x| g.add(x[0], x[1]))
    }

    /// The point after everything queued so far.
    fn last_point(&self) -> PyPoint {
        PyPoint { point: self.stream.last_point() }
    }

    /// Blocks until everything queued so far is done (GIL released).
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        wait_point(py, &self.stream.last_point(), None)
    }
}

impl PyStream {
    /// Queues a one-op graph over f32 tensors of one shape: `op` builds the
    /// output node from the inputs' nodes.
    fn elementwise(
        &self,
        inputs: &[&PyTensor],
        dst: &PyTensor,
        op: impl FnOnce(&mut Graph, &[NodeId]) -> Result<NodeId, GraphError>,
    ) -> PyResult<PyPoint> {
        let mut all = inputs.to_vec();
        all.push(dst);
        let dims = check_f32_like(&all)?;
        let graph_error = |e: GraphError| PyValueError::new_err(e.to_string());
        let mut g = Graph::new();
        let nodes = (0..inputs.len())
            .map(|i| g.leaf(&format!("x{i}"), DType::F32, &dims, Flags::INPUT))
            .collect::<Result<Vec<_>, _>>()
            .map_err(graph_error)?;
        let out = op(&mut g, &nodes).map_err(graph_error)?;
        g.mark(out, Flags::OUTPUT).map_err(graph_error)?;
        let mut bindings = Bindings::new(g);
        for (node, tensor) in nodes.into_iter().zip(inputs).chain([(out, &dst)]) {
            bindings.bind(node, tensor.tensor.clone()).map_err(|e| stream_error(&e))?;
        }
        Ok(PyPoint { point: self.stream.compute(bindings).map_err(|e| stream_error(&e))? })
    }
}

/// The one shape of `tensors`, all f32.
fn check_f32_like(tensors: &[&PyTensor]) -> PyResult<Vec<usize>> {
    let dims = tensors[0].shape();
    for t in tensors {
        if t.tensor.dtype() != DType::F32 || t.shape() != dims {
            return Err(PyValueError::new_err(format!(
                "the operands must be f32 tensors of one shape: {} is {} {:?}, the first {:?}",
                t.__repr__(),
                t.dtype(),
                t.shape(),
                dims
            )));
        }
    }
    Ok(dims)
}

#[pymethods]
impl PyPoint {
    /// Waits until the point is reached: at most `timeout` seconds
    /// (`TimeoutError` after), `None` for no bound. A point that will never
    /// be reached (its work failed) raises `StreamError`.
    #[pyo3(signature = (timeout = None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        wait_point(py, &self.point, timeout)
    }

    /// Whether the point has been reached (never blocks).
    fn is_reached(&self) -> bool {
        self.point.is_reached()
    }

    /// Its value on its timeline.
    #[getter]
    fn value(&self) -> u64 {
        self.point.value()
    }

    fn __repr__(&self) -> String {
        format!("Point({:?})", self.point)
    }
}

#[pymethods]
impl PyRead {
    /// Waits for the read (at most `timeout` seconds) and gives the
    /// tensor's contents: a NumPy array of its shape for f32, f16 and i32
    /// tensors, else its bytes. A read gives its contents once.
    #[pyo3(signature = (timeout = None))]
    fn wait<'py>(&self, py: Python<'py>, timeout: Option<f64>) -> PyResult<Bound<'py, PyAny>> {
        wait_point(py, &self.point, timeout)?;
        let pending = self
            .pending
            .lock()
            .map_err(|_| PyValueError::new_err("the read's lock was poisoned"))?
            .take()
            .ok_or_else(|| PyValueError::new_err("this read's contents were already taken"))?;
        let bytes = pending.wait().map_err(|e| stream_error(&e))?;
        let raw = PyBytes::new(py, &bytes);
        match numpy_name(self.dtype) {
            Some(name) => {
                let numpy = py.import("numpy")?;
                numpy.call_method1("frombuffer", (raw, name))?.call_method1("reshape", (self.dims.clone(),))
            }
            None => Ok(raw.into_any()),
        }
    }

    /// Whether the read has completed (never blocks).
    fn is_ready(&self) -> bool {
        self.point.is_reached()
    }

    /// The read's point.
    #[getter]
    fn point(&self) -> PyPoint {
        PyPoint { point: self.point.clone() }
    }
}
