//! What one computation resolved: where each node's bytes are, and the
//! checked views of them the ops' kernels read and write (the facts relied
//! on are in the module doc of `exec`).

use baton_core::backend::StreamError;
use baton_core::graph::{Graph, Node, NodeId};
use baton_core::DType;

use crate::packed_cache::PackedCache;

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
    pub(super) ptr: *mut u8,
    pub(super) len: usize,
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

/// Resolved storage of one computation.
pub(crate) struct Context<'a> {
    pub(crate) graph: &'a Graph,
    pub(super) roots: &'a [Option<Storage>],
    /// Per node: the packed-weights cache of the sealed weights buffer it
    /// is bound to, if it is.
    pub(super) packed: &'a [Option<&'a PackedCache>],
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

    /// The output of `id` (a node that owns contiguous i32 storage).
    ///
    /// # Safety
    ///
    /// As [`Context::out_f32`].
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn out_i32(&self, id: NodeId) -> Result<&mut [i32], StreamError> {
        let node = self.graph.node(id);
        let s = self.storage(id)?;
        if node.dtype != DType::I32 || !aligned::<i32>(s.ptr) {
            return Err(node_error(self.graph, id, "output must be aligned i32"));
        }
        // SAFETY: as `out_f32`.
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

/// A lookup of a node's data type and layout, shorter at call sites.
pub(crate) fn node<'a>(ctx: &Context<'a>, id: NodeId) -> &'a Node {
    ctx.graph.node(id)
}
