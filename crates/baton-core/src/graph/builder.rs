//! Adding nodes, with every shape and type rule checked at build time.

use super::{Flags, Graph, GraphError, Node, NodeId, Op, RopeMode};
use crate::shape::{Layout, Shape, ShapeError, MAX_DIMS};
use crate::DType;

fn shape_err(op: &'static str) -> impl Fn(ShapeError) -> GraphError {
    move |source| GraphError::Shape { op, source }
}

fn mismatch(op: &'static str, what: &'static str, a: Shape, b: Shape) -> GraphError {
    GraphError::Shape { op, source: ShapeError::Mismatch { what, left: a.dims().to_vec(), right: b.dims().to_vec() } }
}

impl Graph {
    pub(super) fn computed(
        &mut self,
        op: Op,
        inputs: Vec<NodeId>,
        dtype: DType,
        shape: Shape,
    ) -> Result<NodeId, GraphError> {
        let name = op.name();
        let layout = Layout::contiguous(dtype, shape).map_err(shape_err(name))?;
        Ok(self.push(Node { op, inputs, dtype, layout, name: None, flags: Flags::NONE, group: None }))
    }

    pub(super) fn require_f32(&self, op: &'static str, id: NodeId, input: usize) -> Result<&Node, GraphError> {
        let node = self.check(id)?;
        if node.dtype != DType::F32 {
            return Err(GraphError::Type { op, dtype: node.dtype, input });
        }
        Ok(node)
    }

    /// A leaf (input, weight or state) of `dtype` and `dims`, named.
    pub fn leaf(&mut self, name: &str, dtype: DType, dims: &[usize], flags: Flags) -> Result<NodeId, GraphError> {
        let shape = Shape::new(dims).map_err(shape_err("leaf"))?;
        let layout = Layout::contiguous(dtype, shape).map_err(shape_err("leaf"))?;
        if self.names.contains_key(name) {
            return Err(GraphError::DuplicateName(name.into()));
        }
        let id = self.push(Node { op: Op::Leaf, inputs: vec![], dtype, layout, name: None, flags, group: None });
        self.set_name(id, name)
    }

    /// Row lookup: `table [V, D]` (any type) at `ids [T]` (i32 as
    /// [`DType::F32`]-sized words; see [`Op::GetRows`]) gives `[T, D]` f32.
    pub fn get_rows(&mut self, table: NodeId, ids: NodeId) -> Result<NodeId, GraphError> {
        let t = self.check(table)?.layout.shape;
        let i = self.check(ids)?.layout.shape;
        if t.rank() != 2 || i.rank() != 1 {
            return Err(mismatch("get_rows", "table [V, D] and ids [T]", t, i));
        }
        let shape = Shape::new(&[i.dims()[0], t.dims()[1]]).map_err(shape_err("get_rows"))?;
        self.computed(Op::GetRows, vec![table, ids], DType::F32, shape)
    }

    /// `x · wᵀ` with batch broadcast; see [`Op::MatMul`].
    pub fn matmul(&mut self, x: NodeId, w: NodeId) -> Result<NodeId, GraphError> {
        let xs = self.require_f32("matmul", x, 0)?.layout.shape;
        let wn = self.check(w)?;
        let ws = wn.layout.shape;
        if !wn.layout.rows_contiguous(wn.dtype) {
            return Err(GraphError::Shape { op: "matmul", source: ShapeError::NotContiguous });
        }
        let (x4, w4) = (xs.dims4(), ws.dims4());
        let batch_ok = (0..2).all(|d| w4[d] != 0 && x4[d] % w4[d] == 0);
        if x4[3] != w4[3] || !batch_ok || xs.rank() < ws.rank() {
            return Err(mismatch("matmul", "x [.., M, K] and w [.., N, K]", xs, ws));
        }
        let mut dims = xs.dims().to_vec();
        let last = dims.len() - 1;
        dims[last] = w4[2];
        let shape = Shape::new(&dims).map_err(shape_err("matmul"))?;
        self.computed(Op::MatMul, vec![x, w], DType::F32, shape)
    }

    fn broadcast(&mut self, op: Op, a: NodeId, b: NodeId) -> Result<NodeId, GraphError> {
        let name = op.name();
        let a_shape = self.require_f32(name, a, 0)?.layout.shape;
        let b_shape = self.require_f32(name, b, 1)?.layout.shape;
        let (a4, b4) = (a_shape.dims4(), b_shape.dims4());
        if b_shape.rank() > a_shape.rank() || (0..MAX_DIMS).any(|d| b4[d] != a4[d] && b4[d] != 1) {
            return Err(mismatch(name, "b broadcast over a", a_shape, b_shape));
        }
        self.computed(op, vec![a, b], DType::F32, a_shape)
    }

    /// `a + b`, `b` broadcast.
    pub fn add(&mut self, a: NodeId, b: NodeId) -> Result<NodeId, GraphError> {
        self.broadcast(Op::Add, a, b)
    }

    /// `a * b`, `b` broadcast.
    pub fn mul(&mut self, a: NodeId, b: NodeId) -> Result<NodeId, GraphError> {
        self.broadcast(Op::Mul, a, b)
    }

    fn unary(&mut self, op: Op, x: NodeId) -> Result<NodeId, GraphError> {
        let shape = self.require_f32(op.name(), x, 0)?.layout.shape;
        self.computed(op, vec![x], DType::F32, shape)
    }

    /// `x * factor`.
    pub fn scale(&mut self, x: NodeId, factor: f32) -> Result<NodeId, GraphError> {
        self.unary(Op::Scale(factor), x)
    }

    /// RMS norm over the last dimension.
    pub fn rms_norm(&mut self, x: NodeId, eps: f32) -> Result<NodeId, GraphError> {
        self.unary(Op::RmsNorm { eps }, x)
    }

    /// SiLU.
    pub fn silu(&mut self, x: NodeId) -> Result<NodeId, GraphError> {
        self.unary(Op::Silu, x)
    }

    /// GELU (tanh form); see [`Op::Gelu`].
    pub fn gelu(&mut self, x: NodeId) -> Result<NodeId, GraphError> {
        self.unary(Op::Gelu, x)
    }

    /// gpt-oss's clamped SwiGLU of `gate` and `up` (one shape); see
    /// [`Op::SwiGluClamped`].
    pub fn swiglu_clamped(&mut self, gate: NodeId, up: NodeId, alpha: f32, limit: f32) -> Result<NodeId, GraphError> {
        let g = self.require_f32("swiglu_clamped", gate, 0)?.layout.shape;
        let u = self.require_f32("swiglu_clamped", up, 1)?.layout.shape;
        if g != u {
            return Err(mismatch("swiglu_clamped", "gate and up of one shape", g, u));
        }
        self.computed(Op::SwiGluClamped { alpha, limit }, vec![gate, up], DType::F32, g)
    }

    /// Softmax over the last dimension, optionally causal; see [`Op::Softmax`].
    pub fn softmax(&mut self, x: NodeId, scale: f32, causal: bool) -> Result<NodeId, GraphError> {
        self.unary(Op::Softmax { scale, causal, window: None }, x)
    }

    /// A contiguous copy of `x`.
    pub fn contiguous(&mut self, x: NodeId) -> Result<NodeId, GraphError> {
        let node = self.check(x)?;
        let (dtype, shape) = (node.dtype, node.layout.shape);
        self.computed(Op::Contiguous, vec![x], dtype, shape)
    }

    /// Rotary embedding of `x [T, H, D]` at `positions [T]`; see [`Op::Rope`].
    pub fn rope(
        &mut self,
        x: NodeId,
        positions: NodeId,
        mode: RopeMode,
        dims: usize,
        freq_base: f32,
        freq_scale: f32,
    ) -> Result<NodeId, GraphError> {
        self.rope_yarn(x, positions, mode, dims, (freq_base, freq_scale), None)
    }

    /// Rotary embedding with YaRN's scaling where `yarn` is given; see
    /// [`Op::Rope`] and [`Yarn`](super::Yarn).
    pub fn rope_yarn(
        &mut self,
        x: NodeId,
        positions: NodeId,
        mode: RopeMode,
        dims: usize,
        (freq_base, freq_scale): (f32, f32),
        yarn: Option<super::Yarn>,
    ) -> Result<NodeId, GraphError> {
        self.rope_pairs((x, positions), (mode, dims, None), (freq_base, freq_scale), yarn)
    }

    /// Rotary embedding of `x` at `positions`, paired by `mode` over `dims`
    /// but rotating only the first `rotated_pairs` pairs (all where `None`),
    /// with YaRN's scaling where `yarn` is given; see [`Op::Rope`].
    pub fn rope_pairs(
        &mut self,
        (x, positions): (NodeId, NodeId),
        (mode, dims, rotated_pairs): (RopeMode, usize, Option<usize>),
        (freq_base, freq_scale): (f32, f32),
        yarn: Option<super::Yarn>,
    ) -> Result<NodeId, GraphError> {
        let xs = self.require_f32("rope", x, 0)?.layout.shape;
        let ps = self.check(positions)?.layout.shape;
        if xs.rank() != 3
            || ps.rank() != 1
            || ps.dims()[0] != xs.dims()[0]
            || dims > xs.last()
            || !dims.is_multiple_of(2)
            || rotated_pairs.is_some_and(|n| n > dims / 2)
        {
            return Err(mismatch("rope", "x [T, H, D], positions [T], even dims <= D, pairs <= dims/2", xs, ps));
        }
        let op = Op::Rope { mode, dims, freq_base, freq_scale, yarn, rotated_pairs };
        self.computed(op, vec![x, positions], DType::F32, xs)
    }

    /// Writes `src` into `dst` (a leaf or a view of one) and returns the
    /// written view; see [`Op::CopyInto`].
    pub fn copy_into(&mut self, dst: NodeId, src: NodeId) -> Result<NodeId, GraphError> {
        let s = self.require_f32("copy_into", src, 1)?.layout.shape;
        let d = self.check(dst)?.clone();
        if !matches!(self.node(self.storage_root(dst)).op, Op::Leaf) {
            return Err(GraphError::CopyTargetNotLeaf);
        }
        if s.elems() != d.layout.shape.elems() || d.dtype.is_quantized() {
            return Err(mismatch("copy_into", "same element count, float target", d.layout.shape, s));
        }
        Ok(self.push(Node {
            op: Op::CopyInto,
            inputs: vec![dst, src],
            dtype: d.dtype,
            layout: d.layout,
            name: None,
            flags: Flags::NONE,
            group: None,
        }))
    }

    /// Writes row `t` of `src [T, ..]` into row `rows[t]` of `dst [N, ..]`
    /// (a leaf or a view of one) and returns `dst`; see [`Op::ScatterRows`].
    pub fn scatter_rows(&mut self, dst: NodeId, src: NodeId, rows: NodeId) -> Result<NodeId, GraphError> {
        let s = self.require_f32("scatter_rows", src, 1)?.layout.shape;
        let r = self.check(rows)?.clone();
        let d = self.check(dst)?.clone();
        if !matches!(self.node(self.storage_root(dst)).op, Op::Leaf) {
            return Err(GraphError::CopyTargetNotLeaf);
        }
        if r.dtype != DType::I32 {
            return Err(GraphError::Type { op: "scatter_rows", dtype: r.dtype, input: 2 });
        }
        let (sd, dd) = (s.dims(), d.layout.shape.dims());
        // A quantized target takes whole rows of blocks (a quantized KV cache).
        let quantized_rows = d.dtype.is_quantized() && !d.layout.rows_contiguous(d.dtype);
        if sd.len() != dd.len() || sd[1..] != dd[1..] || r.layout.shape.dims() != [sd[0]] || quantized_rows {
            return Err(mismatch("scatter_rows", "src [T, ..], dst [N, ..], rows [T]", d.layout.shape, s));
        }
        Ok(self.push(Node {
            op: Op::ScatterRows,
            inputs: vec![dst, src, rows],
            dtype: d.dtype,
            layout: d.layout,
            name: None,
            flags: Flags::NONE,
            group: None,
        }))
    }

    /// Softmax over the last dimension of `x [.., T, S]`, row `t` seeing keys
    /// `0..=positions[t]` only; see [`Op::Softmax`].
    pub fn softmax_at(&mut self, x: NodeId, scale: f32, positions: NodeId) -> Result<NodeId, GraphError> {
        self.softmax_window(x, scale, positions, None)
    }

    /// Softmax over the last dimension of `x [.., T, S]`, row `t` seeing
    /// keys `positions[t] - window < s <= positions[t]` (every earlier key
    /// with `None`); see [`Op::Softmax`]. A window of 0 is refused.
    pub fn softmax_window(
        &mut self,
        x: NodeId,
        scale: f32,
        positions: NodeId,
        window: Option<usize>,
    ) -> Result<NodeId, GraphError> {
        let xs = self.require_f32("softmax", x, 0)?.layout.shape;
        let p = self.check(positions)?.clone();
        if p.dtype != DType::I32 {
            return Err(GraphError::Type { op: "softmax", dtype: p.dtype, input: 1 });
        }
        if xs.rank() < 2 || p.layout.shape.dims() != [xs.dims()[xs.rank() - 2]] {
            return Err(mismatch("softmax", "x [.., T, S] and positions [T]", xs, p.layout.shape));
        }
        if window == Some(0) {
            return Err(mismatch("softmax", "a window of at least one key", xs, p.layout.shape));
        }
        self.computed(Op::Softmax { scale, causal: true, window }, vec![x, positions], DType::F32, xs)
    }

    /// A view of `x` with an explicit layout (offset relative to `x`'s own
    /// offset); checked to stay inside `x`'s storage extent.
    pub fn view(&mut self, x: NodeId, dims: &[usize], strides: &[usize], offset: usize) -> Result<NodeId, GraphError> {
        let node = self.check(x)?.clone();
        let shape = Shape::new(dims).map_err(shape_err("view"))?;
        if strides.len() != shape.rank() {
            return Err(mismatch("view", "one stride per dimension", shape, shape));
        }
        let mut all = [0; MAX_DIMS];
        all[..strides.len()].copy_from_slice(strides);
        let layout = Layout { shape, strides: all, offset: node.layout.offset + offset };
        let root = self.node(self.storage_root(x));
        let root_end = root.layout.end_byte(root.dtype);
        let end = layout.end_byte(node.dtype);
        if end > root_end {
            return Err(GraphError::Shape {
                op: "view",
                source: ShapeError::OutOfBounds { view: dims.to_vec(), end, len: root_end },
            });
        }
        if node.dtype.is_quantized() && !layout.rows_contiguous(node.dtype) {
            return Err(GraphError::Shape { op: "view", source: ShapeError::NotContiguous });
        }
        Ok(self.push(Node {
            op: Op::View,
            inputs: vec![x],
            dtype: node.dtype,
            layout,
            name: None,
            flags: Flags::NONE,
            group: None,
        }))
    }

    /// `x` with new dimensions (same element count; `x` must be contiguous).
    pub fn reshape(&mut self, x: NodeId, dims: &[usize]) -> Result<NodeId, GraphError> {
        let node = self.check(x)?.clone();
        if !node.layout.is_contiguous(node.dtype) {
            return Err(GraphError::Shape { op: "reshape", source: ShapeError::NotContiguous });
        }
        let shape = Shape::new(dims).map_err(shape_err("reshape"))?;
        if shape.elems() != node.layout.shape.elems() {
            return Err(mismatch("reshape", "same element count", node.layout.shape, shape));
        }
        let layout = Layout::contiguous(node.dtype, shape).map_err(shape_err("reshape"))?;
        self.view(x, dims, layout.strides(), 0)
    }

    /// `x` with its dimensions reordered: output dim `i` is input dim `perm[i]`.
    pub fn permute(&mut self, x: NodeId, perm: &[usize]) -> Result<NodeId, GraphError> {
        let node = self.check(x)?.clone();
        let rank = node.layout.shape.rank();
        let mut seen = [false; MAX_DIMS];
        if perm.len() != rank || perm.iter().any(|&p| p >= rank || std::mem::replace(&mut seen[p], true)) {
            return Err(GraphError::Shape { op: "permute", source: ShapeError::BadPermutation(perm.to_vec()) });
        }
        let dims: Vec<usize> = perm.iter().map(|&p| node.layout.shape.dims()[p]).collect();
        let strides: Vec<usize> = perm.iter().map(|&p| node.layout.strides[p]).collect();
        self.view(x, &dims, &strides, 0)
    }

    /// The sub-range `start..start + len` of dimension `dim` of `x`.
    pub fn narrow(&mut self, x: NodeId, dim: usize, start: usize, len: usize) -> Result<NodeId, GraphError> {
        let node = self.check(x)?.clone();
        let shape = node.layout.shape;
        let fits = dim < shape.rank() && start.checked_add(len).is_some_and(|e| e <= shape.dims()[dim]);
        if !fits || (dim + 1 == shape.rank() && node.dtype.is_quantized()) {
            return Err(mismatch("narrow", "a range inside the dimension", shape, shape));
        }
        let mut dims = shape.dims().to_vec();
        dims[dim] = len;
        self.view(x, &dims, node.layout.strides(), start * node.layout.strides[dim])
    }
}
