//! Graph execution on a CPU device: the stream worker walks the nodes in
//! order and runs each op's kernel, spreading large ops over the device's
//! thread pool.
//!
//! # Memory safety
//!
//! All device memory is reached through raw pointers resolved here, in one
//! place ([`Storage`]). The facts relied on:
//! - bound tensors lie inside their buffers (`TensorRef::new`), views inside
//!   their storage (`Graph::view`), arena blocks inside the arena (the plan);
//! - nothing else touches the bound ranges while the computation runs
//!   (`RawStream::submit`'s contract), and bound outputs overlap no other
//!   binding (`Bindings::check_complete`);
//! - an op's output never overlaps its inputs: arena blocks are allocated
//!   before the inputs' blocks are freed (see `plan`), and `copy_into`
//!   checks its source against its target at run time.

mod matmul;
mod ops;
mod rope_cache;

use baton_core::loom::Mutex;
use std::sync::Arc;

use baton_core::backend::{Bindings, StreamError};
use baton_core::graph::{Graph, Node, NodeId, Op};
use baton_core::{DType, Parallel};
use baton_kernels::Scratch;

use crate::buffer::CpuBuffer;
use crate::device::CpuDeviceShared;
use crate::packed_cache::PackedCache;
use baton_core::graph::arena::{ArenaPlan as Plan, Place};
use baton_core::graph::plan_cache::PlanCache;

/// Plans kept per stream (graphs reused across decode steps hit the cache;
/// a tensor-parallel decode step runs a few hundred graphs per stream:
/// its segments and its gates' adds; the cache is a hash map).
const PLAN_CACHE: usize = 512;

/// A raw pointer that may cross to pool threads; every use states why the
/// accesses of different threads are disjoint.
#[derive(Clone, Copy)]
pub(crate) struct SharedPtr<T>(pub(crate) *mut T);
// SAFETY: the pointer is only dereferenced by code that splits the pointee
// into disjoint per-thread ranges (see each use).
unsafe impl<T> Send for SharedPtr<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for SharedPtr<T> {}

impl<T> SharedPtr<T> {
    /// The pointer (a method, so closures capture the whole wrapper).
    pub(crate) fn get(&self) -> *mut T {
        self.0
    }
}

/// Where a node's bytes are: start pointer and bytes from there to the end
/// of its storage.
#[derive(Clone, Copy)]
pub(crate) struct Storage {
    ptr: *mut u8,
    len: usize,
}

/// Runs graphs for one stream; owns the stream's arena and plans.
pub(crate) struct Executor {
    pub(crate) device: Arc<CpuDeviceShared>,
    plans: PlanCache,
    arena: Option<CpuBuffer>,
    pub(crate) scratch: Vec<Mutex<Scratch>>,
    pub(crate) convert: Vec<u8>,
    /// Rotary angles of recent positions (`rope_cache`).
    pub(crate) rope: Mutex<rope_cache::RopeCache>,
}

/// An error of one node, before it is given the stream's context.
pub(crate) fn node_error(graph: &Graph, id: NodeId, message: impl Into<String>) -> StreamError {
    let node = graph.node(id);
    StreamError::Kernel {
        device: "cpu".into(),
        op: match &node.name {
            Some(name) => format!("{} ({name})", node.op.name()),
            None => format!("{} (node {})", node.op.name(), id.0),
        },
        message: message.into(),
    }
}

impl Executor {
    pub(crate) fn new(device: Arc<CpuDeviceShared>) -> Self {
        let threads = device.pool_threads();
        Executor {
            device,
            plans: PlanCache::new(crate::buffer::ALIGN, PLAN_CACHE),
            arena: None,
            scratch: (0..threads).map(|_| Mutex::new(Scratch::new())).collect(),
            convert: Vec::new(),
            rope: Mutex::new(rope_cache::RopeCache::default()),
        }
    }

    fn plan_for(&mut self, graph: &Arc<Graph>) -> Arc<Plan> {
        self.plans.plan(graph)
    }

    /// Computes `graph` with `bindings` (validated by the safe stream).
    pub(crate) fn compute(&mut self, graph: &Arc<Graph>, bindings: &Bindings) -> Result<(), StreamError> {
        let plan = self.plan_for(graph);
        let have = self.arena.as_ref().map_or(0, baton_core::backend::RawBuffer::len);
        if have < plan.arena_bytes {
            // Grow by half at least: decode steps need a little more each
            // token (attention over one more position), and a fresh zeroed
            // allocation per token costs page faults.
            let bytes = plan.arena_bytes.max(have + have / 2);
            self.arena = Some(CpuBuffer::new(bytes, &self.device.info.name).ok_or_else(|| StreamError::Kernel {
                device: self.device.info.name.clone(),
                op: "arena".into(),
                message: format!("could not allocate {bytes} bytes"),
            })?);
        }
        let arena = match &self.arena {
            Some(a) => Storage {
                ptr: baton_core::backend::RawBuffer::host_ptr(a).map_or(std::ptr::null_mut(), |p| p.as_ptr()),
                len: baton_core::backend::RawBuffer::len(a),
            },
            None => Storage { ptr: std::ptr::null_mut(), len: 0 },
        };
        let mut roots: Vec<Option<Storage>> = vec![None; graph.nodes().len()];
        let mut packed: Vec<Option<&PackedCache>> = vec![None; graph.nodes().len()];
        for (i, place) in plan.places.iter().enumerate() {
            roots[i] = match place {
                Place::Bound => {
                    let t = bindings.get(NodeId(i)).ok_or_else(|| node_error(graph, NodeId(i), "not bound"))?;
                    if t.buffer().is_sealed() {
                        packed[i] = t.buffer().raw().as_any().downcast_ref::<CpuBuffer>().map(CpuBuffer::packed);
                    }
                    // No BufferRange here: cloning the buffer handle would
                    // bounce its reference count between this worker and the
                    // host thread, once per bound tensor and computation.
                    let base = t
                        .buffer()
                        .raw()
                        .host_ptr()
                        .ok_or_else(|| node_error(graph, NodeId(i), "bound to memory the CPU cannot address"))?;
                    // SAFETY: the tensor's bytes lie inside the buffer
                    // (TensorRef::new checks offset + bytes against its length).
                    let ptr = unsafe { base.as_ptr().add(t.offset()) };
                    Some(Storage { ptr, len: t.bytes() })
                }
                Place::Arena(offset) => {
                    // SAFETY: the plan places the block inside `arena_bytes`,
                    // which the arena has at least.
                    let ptr = unsafe { arena.ptr.add(*offset) };
                    Some(Storage { ptr, len: arena.len - offset })
                }
                Place::Alias => None,
            };
        }
        let ctx = Context { graph, roots: &roots, packed: &packed };
        let profiling = crate::profile::enabled();
        for (i, node) in graph.nodes().iter().enumerate() {
            if profiling && !matches!(node.op, Op::Leaf | Op::View) {
                let start = std::time::Instant::now();
                self.run_node(&ctx, NodeId(i), node)?;
                crate::profile::record(crate::profile::key(graph, node), start.elapsed());
            } else {
                self.run_node(&ctx, NodeId(i), node)?;
            }
        }
        Ok(())
    }

    fn run_node(&mut self, ctx: &Context<'_>, id: NodeId, node: &Node) -> Result<(), StreamError> {
        match &node.op {
            Op::Leaf | Op::View => Ok(()),
            Op::MatMul => matmul::run(self, ctx, id),
            _ => ops::run(self, ctx, id),
        }
    }
}

/// Resolved storage of one computation.
pub(crate) struct Context<'a> {
    pub(crate) graph: &'a Graph,
    roots: &'a [Option<Storage>],
    /// Per node: the packed-weights cache of the sealed weights buffer it
    /// is bound to, if it is.
    packed: &'a [Option<&'a PackedCache>],
}

impl Context<'_> {
    /// The packed-weights cache of the sealed weights buffer that holds
    /// `id`'s storage, if it does.
    pub(crate) fn packed_cache(&self, id: NodeId) -> Option<&PackedCache> {
        self.packed[self.graph.storage_root(id).0]
    }

    /// The storage of `id` from its first byte (root storage + offset).
    pub(crate) fn storage(&self, id: NodeId) -> Result<Storage, StreamError> {
        let root = self.graph.storage_root(id);
        let base = self.roots[root.0].ok_or_else(|| node_error(self.graph, id, "no storage"))?;
        let node = self.graph.node(id);
        let root_node = self.graph.node(root);
        let offset = node.layout.offset - root_node.layout.offset;
        let need = node.layout.end_byte(node.dtype) - node.layout.offset;
        if offset.checked_add(need).is_none_or(|end| end > base.len) {
            return Err(node_error(self.graph, id, "view outside its storage"));
        }
        // SAFETY: `offset + need <= base.len`, checked just above.
        Ok(Storage { ptr: unsafe { base.ptr.add(offset) }, len: base.len - offset })
    }

    /// The bytes of `id`'s extent (from its first to one past its last byte).
    pub(crate) fn bytes(&self, id: NodeId) -> Result<&[u8], StreamError> {
        let s = self.storage(id)?;
        let node = self.graph.node(id);
        let len = node.layout.end_byte(node.dtype) - node.layout.offset;
        // SAFETY: `storage` checked `len` bytes exist from `ptr`; during this
        // op no one writes them (module doc: outputs never overlap inputs).
        Ok(unsafe { std::slice::from_raw_parts(s.ptr, len) })
    }

    /// `id` as a contiguous f32 slice (an error for other types/layouts).
    pub(crate) fn f32s(&self, id: NodeId) -> Result<&[f32], StreamError> {
        let node = self.graph.node(id);
        if node.dtype != DType::F32 || !node.layout.is_contiguous(node.dtype) {
            return Err(node_error(self.graph, id, "needs a contiguous f32 tensor; add contiguous()"));
        }
        let bytes = self.bytes(id)?;
        if !aligned::<f32>(bytes.as_ptr()) {
            return Err(node_error(self.graph, id, "f32 data is not 4-byte aligned"));
        }
        // SAFETY: aligned (checked), `len/4` whole f32s of initialised memory.
        Ok(unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast(), node.layout.shape.elems()) })
    }

    /// `id` as i32 indices.
    pub(crate) fn indices(&self, id: NodeId) -> Result<&[i32], StreamError> {
        let node = self.graph.node(id);
        if node.dtype != DType::I32 || !node.layout.is_contiguous(node.dtype) {
            return Err(node_error(self.graph, id, "needs contiguous i32 indices"));
        }
        let bytes = self.bytes(id)?;
        if !aligned::<i32>(bytes.as_ptr()) {
            return Err(node_error(self.graph, id, "i32 data is not 4-byte aligned"));
        }
        // SAFETY: as `f32s`.
        Ok(unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast(), node.layout.shape.elems()) })
    }

    /// The output of `id` (a node that owns contiguous f32 storage).
    ///
    /// # Safety
    ///
    /// The caller must not hold another slice of the same node's memory while
    /// this one lives (each op takes its own output once).
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn out_f32(&self, id: NodeId) -> Result<&mut [f32], StreamError> {
        let node = self.graph.node(id);
        let s = self.storage(id)?;
        if node.dtype != DType::F32 || !aligned::<f32>(s.ptr) {
            return Err(node_error(self.graph, id, "output must be aligned f32"));
        }
        // SAFETY: `storage` checked the extent; the output does not overlap the
        // op's inputs (module doc) and the caller holds no other view of it.
        Ok(unsafe { std::slice::from_raw_parts_mut(s.ptr.cast(), node.layout.shape.elems()) })
    }

    /// Raw start of `id`'s bytes, for strided writes (`copy_into`).
    pub(crate) fn raw(&self, id: NodeId) -> Result<Storage, StreamError> {
        self.storage(id)
    }
}

impl Storage {
    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr
    }
}

/// Whether `ptr` is aligned for `T`.
fn aligned<T>(ptr: *const u8) -> bool {
    (ptr as usize).is_multiple_of(std::mem::align_of::<T>())
}

/// Maps contiguous row ranges over the pool when there is enough work.
pub(crate) fn for_rows(exec: &Executor, rows: usize, row_elems: usize, task: &(dyn Fn(std::ops::Range<usize>) + Sync)) {
    let threads = exec.device.pool_threads();
    if threads == 1 || rows < 2 || rows * row_elems < 16 * 1024 {
        task(0..rows);
        return;
    }
    exec.device.pool.run(&|t| task(baton_core::parallel::split_range(rows, threads, t, 1)));
}

/// A lookup of a node's data type and layout, shorter at call sites.
pub(crate) fn node<'a>(ctx: &Context<'a>, id: NodeId) -> &'a Node {
    ctx.graph.node(id)
}
