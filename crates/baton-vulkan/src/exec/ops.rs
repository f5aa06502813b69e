//! Each op as one dispatch: its tensors, its parameters in the order of its
//! shader's `Params` (see `src/shaders/`), and its workgroup count.

use baton_core::backend::StreamError;
use baton_core::graph::{NodeId, RopeMode};
use baton_core::DType;

use super::recorder::{type_suffix, u32_of, Dispatch, Recorder, GROUP};

/// Workgroups of one invocation per item.
fn groups_for(items: usize) -> u32 {
    u32_of(items.div_ceil(GROUP as usize))
}

impl Recorder<'_> {
    fn elems(&self, id: NodeId) -> usize {
        self.node(id).layout.shape.elems()
    }

    pub(super) fn unary(&self, id: NodeId, mode: u32, factor: f32) -> Result<(), StreamError> {
        let x = self.node(id).inputs[0];
        let (xb, xw) = self.contiguous_words(x, DType::F32)?;
        let (yb, yw) = self.contiguous_words(id, DType::F32)?;
        let n = self.elems(id);
        let push = [xw, yw, u32_of(n), mode, factor.to_bits()];
        self.dispatch(
            id,
            Dispatch { shader: "unary", a: Some(&xb), b: None, out: &yb, push: &push, groups: groups_for(n) },
        )
    }

    pub(super) fn broadcast(&self, id: NodeId, mode: u32) -> Result<(), StreamError> {
        let node = self.node(id);
        let (a, b) = (node.inputs[0], node.inputs[1]);
        let (ab, aw) = self.contiguous_words(a, DType::F32)?;
        let (bb, bw) = self.contiguous_words(b, DType::F32)?;
        let (yb, yw) = self.contiguous_words(id, DType::F32)?;
        let a4 = node.layout.shape.dims4().map(u32_of);
        let b4 = self.node(b).layout.shape.dims4().map(u32_of);
        let n = self.elems(id);
        let push = [aw, bw, yw, u32_of(n), a4[1], a4[2], a4[3], b4[0], b4[1], b4[2], b4[3], mode];
        self.dispatch(
            id,
            Dispatch { shader: "broadcast", a: Some(&ab), b: Some(&bb), out: &yb, push: &push, groups: groups_for(n) },
        )
    }

    pub(super) fn rms_norm(&self, id: NodeId, eps: f32) -> Result<(), StreamError> {
        let x = self.node(id).inputs[0];
        let (xb, xw) = self.contiguous_words(x, DType::F32)?;
        let (yb, yw) = self.contiguous_words(id, DType::F32)?;
        let shape = self.node(id).layout.shape;
        let rows = u32_of(shape.rows());
        let push = [xw, yw, rows, u32_of(shape.last()), eps.to_bits()];
        self.dispatch(id, Dispatch { shader: "rms_norm", a: Some(&xb), b: None, out: &yb, push: &push, groups: rows })
    }

    pub(super) fn softmax(
        &self,
        id: NodeId,
        scale: f32,
        causal: bool,
        window: Option<usize>,
    ) -> Result<(), StreamError> {
        let node = self.node(id);
        let (xb, xw) = self.contiguous_words(node.inputs[0], DType::F32)?;
        let (yb, yw) = self.contiguous_words(id, DType::F32)?;
        let positions = match node.inputs.get(1) {
            Some(&p) => Some(self.contiguous_words(p, DType::I32)?),
            None => None,
        };
        let d4 = node.layout.shape.dims4();
        let rows = u32_of(node.layout.shape.rows());
        let push = [
            xw,
            yw,
            rows,
            u32_of(d4[3]),
            u32_of(d4[2]),
            scale.to_bits(),
            u32::from(causal),
            u32::from(positions.is_some()),
            positions.as_ref().map_or(0, |p| p.1),
            // 0: no window (a window of 0 keys is refused when built).
            window.map_or(0, u32_of),
        ];
        self.dispatch(
            id,
            Dispatch {
                shader: "softmax",
                a: Some(&xb),
                b: positions.as_ref().map(|p| &p.0),
                out: &yb,
                push: &push,
                groups: rows,
            },
        )
    }

    pub(super) fn rope(
        &self,
        id: NodeId,
        mode: RopeMode,
        dims: usize,
        base: f32,
        scale: f32,
    ) -> Result<(), StreamError> {
        let node = self.node(id);
        let (xb, xw) = self.contiguous_words(node.inputs[0], DType::F32)?;
        let (pb, pw) = self.contiguous_words(node.inputs[1], DType::I32)?;
        let (yb, yw) = self.contiguous_words(id, DType::F32)?;
        let d = node.layout.shape.dims();
        let n = self.elems(id);
        let push = [
            xw,
            yw,
            pw,
            u32_of(n),
            u32_of(d[1]),
            u32_of(d[2]),
            u32_of(dims),
            u32::from(mode == RopeMode::Neox),
            base.to_bits(),
            scale.to_bits(),
            u32_of(id.0),
        ];
        self.dispatch(
            id,
            Dispatch { shader: "rope", a: Some(&xb), b: Some(&pb), out: &yb, push: &push, groups: groups_for(n) },
        )
    }

    pub(super) fn get_rows(&self, id: NodeId) -> Result<(), StreamError> {
        let node = self.node(id);
        let (table, ids) = (node.inputs[0], node.inputs[1]);
        let t = self.node(table);
        let suffix = type_suffix(t.dtype).ok_or_else(|| self.err(id, format!("no row lookup for {}", t.dtype)))?;
        if !t.layout.rows_contiguous(t.dtype) {
            return Err(self.err(id, "table rows must be contiguous"));
        }
        let tb = self.bind(table)?;
        let (ib, iw) = self.contiguous_words(ids, DType::I32)?;
        let (yb, yw) = self.contiguous_words(id, DType::F32)?;
        let (vocab, width) = (t.layout.shape.dims()[0], t.layout.shape.dims()[1]);
        let tokens = self.node(ids).layout.shape.elems();
        let push =
            [tb.byte, iw, yw, u32_of(tokens), u32_of(width), u32_of(vocab), u32_of(t.layout.strides[0]), u32_of(id.0)];
        let shader = shader_name("get_rows", suffix);
        self.dispatch(
            id,
            Dispatch { shader, a: Some(&tb), b: Some(&ib), out: &yb, push: &push, groups: groups_for(tokens * width) },
        )
    }

    pub(super) fn matmul(&self, id: NodeId) -> Result<(), StreamError> {
        let node = self.node(id);
        let (x, w) = (node.inputs[0], node.inputs[1]);
        let wn = self.node(w);
        let suffix = type_suffix(wn.dtype).ok_or_else(|| self.err(id, format!("no matmul for {}", wn.dtype)))?;
        let (xb, xw) = self.contiguous_words(x, DType::F32)?;
        // Quantized weights: x rounded to 8 bits per block first, into the
        // stream's activation scratch, which the matmul then reads.
        let (xb, xw) = match act_words(self.node(x).layout.shape.elems(), wn.dtype) {
            Some(words) => {
                let acts = self.acts.ok_or_else(|| self.err(id, "no memory for quantized activations"))?;
                let ab = self.bind_span(acts, (words * 4) as u64);
                let block = wn.dtype.block_elems();
                let blocks = self.node(x).layout.shape.elems() / block;
                let push = [xw, ab.byte / 4, u32_of(blocks)];
                let shader = if block == 32 { "quantize_act_32" } else { "quantize_act_256" };
                self.dispatch(
                    id,
                    Dispatch { shader, a: None, b: Some(&xb), out: &ab, push: &push, groups: groups_for(blocks) },
                )?;
                let word = ab.byte / 4;
                (ab, word)
            }
            None => (xb, xw),
        };
        let wb = self.bind(w)?;
        let (yb, yw) = self.contiguous_words(id, DType::F32)?;
        let x4 = self.node(x).layout.shape.dims4();
        let w4 = wn.layout.shape.dims4();
        let ws4 = wn.layout.strides4();
        let (m, k, n) = (x4[2], x4[3], w4[2]);
        // Prompts take four rows of x per weight row (matmul_rows.wgsl).
        let (op, tiles) = if m >= MATMUL_ROWS { ("matmul_rows", m.div_ceil(MATMUL_ROWS)) } else { ("matmul", m) };
        let outputs = x4[0] * x4[1] * tiles * n;
        let push = [
            xw,
            wb.byte,
            yw,
            u32_of(m),
            u32_of(n),
            u32_of(k),
            u32_of(k / wn.dtype.block_elems()),
            u32_of(x4[1]),
            u32_of(x4[0] / w4[0].max(1)),
            u32_of(x4[1] / w4[1].max(1)),
            u32_of(ws4[0]),
            u32_of(ws4[1]),
            u32_of(ws4[2]),
            u32_of(outputs),
        ];
        let shader = shader_name(op, suffix);
        self.dispatch(
            id,
            // Eight outputs per workgroup (see matmul.wgsl).
            Dispatch { shader, a: Some(&wb), b: Some(&xb), out: &yb, push: &push, groups: u32_of(outputs.div_ceil(8)) },
        )
    }

    /// A store into a float view: its type's shader, or an error.
    fn store_suffix(&self, id: NodeId) -> Result<&'static str, StreamError> {
        let dtype = self.node(id).dtype;
        match dtype {
            DType::F32 | DType::F16 | DType::BF16 => Ok(type_suffix(dtype).unwrap_or("f32")),
            other => Err(self.err(id, format!("cannot write {other} elements"))),
        }
    }

    /// Dimensions 1..3 and the four byte strides of a node's view.
    fn view_params(&self, id: NodeId) -> Result<[u32; 7], StreamError> {
        let layout = self.node(id).layout;
        let d4 = layout.shape.dims4().map(u32_of);
        let s4 = layout.strides4().map(u32_of);
        Ok([d4[1], d4[2], d4[3], s4[0], s4[1], s4[2], s4[3]])
    }

    pub(super) fn copy_into(&self, id: NodeId) -> Result<(), StreamError> {
        let suffix = self.store_suffix(id)?;
        let src = self.node(id).inputs[1];
        let (sb, sw) = self.contiguous_words(src, DType::F32)?;
        let db = self.bind(id)?;
        let n = self.elems(id);
        let v = self.view_params(id)?;
        let push = [sw, db.byte, u32_of(n), v[0], v[1], v[2], v[3], v[4], v[5], v[6]];
        self.dispatch(
            id,
            Dispatch {
                shader: shader_name("copy_into", suffix),
                a: Some(&sb),
                b: None,
                out: &db,
                push: &push,
                groups: groups_for(n),
            },
        )
    }

    pub(super) fn scatter_rows(&self, id: NodeId) -> Result<(), StreamError> {
        let node = self.node(id);
        let suffix = match node.dtype {
            DType::Q8_0 | DType::Q4_0 => type_suffix(node.dtype).unwrap_or("missing"),
            _ => self.store_suffix(id)?,
        };
        let (src, rows) = (node.inputs[1], node.inputs[2]);
        let (sb, sw) = self.contiguous_words(src, DType::F32)?;
        let (rb, rw) = self.contiguous_words(rows, DType::I32)?;
        let db = self.bind(id)?;
        let outer = node.layout.shape.dims()[0];
        let per_row = self.elems(id) / outer.max(1);
        let mut n = self.elems(src);
        let v = self.view_params(id)?;
        if node.dtype.is_quantized() {
            // One invocation per block: the view's last dimension must be
            // whole blocks, each at its stride (the block's bytes).
            if !whole_blocks(node.dtype, &node.layout) {
                return Err(
                    self.err(id, format!("a {} destination takes rows of whole, contiguous blocks", node.dtype))
                );
            }
            n /= node.dtype.block_elems();
        }
        let push = [
            sw,
            db.byte,
            rw,
            u32_of(n),
            u32_of(outer),
            u32_of(per_row.max(1)),
            v[0],
            v[1],
            v[2],
            v[3],
            v[4],
            v[5],
            v[6],
            u32_of(id.0),
        ];
        self.dispatch(
            id,
            Dispatch {
                shader: shader_name("scatter_rows", suffix),
                a: Some(&sb),
                b: Some(&rb),
                out: &db,
                push: &push,
                groups: groups_for(n),
            },
        )
    }

    pub(super) fn contiguous(&self, id: NodeId) -> Result<(), StreamError> {
        let src = self.node(id).inputs[0];
        let s = self.node(src);
        let sb = self.bind(src)?;
        let db = self.bind(id)?;
        if db.byte % 4 != 0 {
            return Err(self.err(id, "the output must start on a 4-byte boundary"));
        }
        let layout = s.layout;
        let bytes = layout.shape.rows() * s.dtype.row_bytes(layout.shape.last()).unwrap_or(0);
        let d4 = layout.shape.dims4().map(u32_of);
        let s4 = layout.strides4().map(u32_of);
        let push = [
            sb.byte,
            db.byte,
            u32_of(bytes),
            u32_of(s.dtype.row_bytes(layout.shape.last()).unwrap_or(0).max(1)),
            u32_of(s.dtype.block_bytes()),
            s4[3],
            u32::from(layout.rows_contiguous(s.dtype) || s.dtype.is_quantized()),
            d4[1],
            d4[2],
            s4[0],
            s4[1],
            s4[2],
        ];
        self.dispatch(
            id,
            Dispatch {
                shader: "contiguous",
                a: Some(&sb),
                b: None,
                out: &db,
                push: &push,
                groups: groups_for(bytes.div_ceil(4)),
            },
        )
    }
}

/// Words of `elems` activations rounded for a matmul with `dtype` weights
/// (act_q8.wgsl's blocks), or `None` for float weights (no rounding).
pub(super) fn act_words(elems: usize, dtype: DType) -> Option<usize> {
    let block = dtype.block_elems();
    dtype.is_quantized().then(|| elems / block * (1 + block / 4))
}

/// Rows of x that `matmul_rows` takes per weight row; prompts of at least
/// this many rows use it.
const MATMUL_ROWS: usize = 4;

/// The name of an op's shader for a type (`matmul_q4_1`), as a static str
/// from the compiled table.
fn shader_name(op: &str, suffix: &str) -> &'static str {
    crate::pipelines::shader_names()
        .find(|n| n.strip_prefix(op).and_then(|r| r.strip_prefix('_')) == Some(suffix))
        .unwrap_or("missing")
}

/// The attention shader's name for keys and values of these types, if it
/// has one.
fn attention_shader(k: DType, v: DType) -> Option<&'static str> {
    let suffix = |t: DType| match t {
        DType::F32 | DType::F16 | DType::BF16 | DType::Q8_0 | DType::Q4_0 => type_suffix(t),
        _ => None,
    };
    let (k, v) = (suffix(k)?, suffix(v)?);
    crate::pipelines::shader_names().find(|n| {
        n.strip_prefix("attention_").and_then(|r| r.strip_prefix(k)).and_then(|r| r.strip_prefix('_')) == Some(v)
    })
}

/// Whether a view of `dtype` (a block type of 32 values) has a last
/// dimension of whole blocks, each at its stride: what the block shaders
/// (ScatterRows into a cache, attention over one) read and write.
fn whole_blocks(dtype: DType, layout: &baton_core::Layout) -> bool {
    let rank = layout.shape.rank();
    dtype.block_elems() == 32
        && layout.shape.last().is_multiple_of(dtype.block_elems())
        && layout.strides()[rank - 1] == dtype.block_bytes()
}

/// Elements per head the attention shader handles at most.
const ATTENTION_MAX_DIM: usize = 256;

impl Recorder<'_> {
    pub(super) fn attention(&self, id: NodeId, scale: f32, window: Option<usize>) -> Result<(), StreamError> {
        let node = self.node(id);
        let [qi, ki, vi, pi] = node.inputs[..] else { return Err(self.err(id, "attention takes four inputs")) };
        let (qn, kn, vn) = (self.node(qi), self.node(ki), self.node(vi));
        let shader = attention_shader(kn.dtype, vn.dtype).ok_or_else(|| {
            self.err(
                id,
                format!(
                    "keys of {} and values of {}: this device attends over f32, f16, bf16, q8_0 or q4_0",
                    kn.dtype, vn.dtype
                ),
            )
        })?;
        let [t_len, heads, dim] = qn.layout.shape.dims()[..] else { return Err(self.err(id, "q is not [T, H, D]")) };
        let (kv_heads, s_len) = (kn.layout.shape.dims()[0], kn.layout.shape.dims()[1]);
        if dim > ATTENTION_MAX_DIM {
            return Err(
                self.err(id, format!("heads of {dim} elements (this device takes {ATTENTION_MAX_DIM} at most)"))
            );
        }
        for cache in [kn, vn] {
            if cache.dtype.is_quantized() && !whole_blocks(cache.dtype, &cache.layout) {
                return Err(self.err(id, format!("a {} cache takes heads of whole, contiguous blocks", cache.dtype)));
            }
        }
        let (qb, qw) = self.words(qi)?;
        let q_strides = &qn.layout.strides;
        if qn.dtype != DType::F32 || (dim > 1 && q_strides[2] != 4) || q_strides[..2].iter().any(|s| s % 4 != 0) {
            return Err(self.err(id, "queries must be f32 rows at whole-word strides"));
        }
        let (kb, vb) = (self.bind(ki)?, self.bind(vi)?);
        let (pb, pw) = self.contiguous_words(pi, DType::I32)?;
        let (yb, yw) = self.contiguous_words(id, DType::F32)?;
        let push = [
            qw,
            u32_of(q_strides[0] / 4),
            u32_of(q_strides[1] / 4),
            kb.byte,
            u32_of(kn.layout.strides[0]),
            u32_of(kn.layout.strides[1]),
            vb.byte,
            u32_of(vn.layout.strides[0]),
            u32_of(vn.layout.strides[1]),
            pw,
            yw,
            u32_of(t_len),
            u32_of(heads),
            u32_of(heads / kv_heads.max(1)),
            u32_of(dim),
            u32_of(s_len),
            scale.to_bits(),
            // 0: no window (a window of 0 keys is refused when built).
            window.map_or(0, u32_of),
            u32_of(id.0),
        ];
        self.dispatch_more(
            id,
            Dispatch { shader, a: Some(&kb), b: Some(&qb), out: &yb, push: &push, groups: u32_of(t_len * heads) },
            [Some(&vb), Some(&pb)],
        )
    }
}
