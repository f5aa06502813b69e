//! The nodes of a mixture of experts, with their shape and type rules: the
//! router's picks ([`Op::TopK`], [`Op::TakeColumns`]), the product of each
//! token by its chosen experts only ([`Op::MatMulId`]) and the sum of their
//! weighted outputs ([`Op::SumRows`]).

use super::{Graph, GraphError, NodeId, Op};
use crate::shape::{Shape, ShapeError};
use crate::DType;

fn mismatch(op: &'static str, what: &'static str, left: &[usize], right: &[usize]) -> GraphError {
    GraphError::Shape { op, source: ShapeError::Mismatch { what, left: left.to_vec(), right: right.to_vec() } }
}

fn shape(op: &'static str, dims: &[usize]) -> Result<Shape, GraphError> {
    Shape::new(dims).map_err(|source| GraphError::Shape { op, source })
}

impl Graph {
    /// The indices of the `k` largest values of each row of `x [.., N]`,
    /// largest first (`[.., k]` i32); see [`Op::TopK`].
    pub fn top_k(&mut self, x: NodeId, k: usize) -> Result<NodeId, GraphError> {
        let xs = self.require_f32("top_k", x, 0)?.layout.shape;
        let n = xs.last();
        if k == 0 || k > n {
            return Err(mismatch("top_k", "1 <= k <= N for x [.., N]", xs.dims(), &[k]));
        }
        let mut dims = xs.dims().to_vec();
        let last = dims.len() - 1;
        dims[last] = k;
        self.computed(Op::TopK { k }, vec![x], DType::I32, shape("top_k", &dims)?)
    }

    /// The values of each row of `x [.., N]` at that row's indices `ids
    /// [.., k]` (i32), as `[.., k]`; see [`Op::TakeColumns`].
    pub fn take_columns(&mut self, x: NodeId, ids: NodeId) -> Result<NodeId, GraphError> {
        let xs = self.require_f32("take_columns", x, 0)?.layout.shape;
        let idn = self.check(ids)?;
        if idn.dtype != DType::I32 {
            return Err(GraphError::Type { op: "take_columns", dtype: idn.dtype, input: 1 });
        }
        let is = idn.layout.shape;
        let (xd, id) = (xs.dims(), is.dims());
        if xd.len() != id.len() || xd[..xd.len() - 1] != id[..id.len() - 1] {
            return Err(mismatch("take_columns", "x [.., N] and ids [.., k] with the same rows", xd, id));
        }
        self.computed(Op::TakeColumns, vec![x, ids], DType::F32, is)
    }

    /// Each token's input row `x [T, S, K]` (`S` 1 or `k`) times the
    /// experts `ids [T, k]` (i32) it chose among `w [E, N, K]`, as `[T, k,
    /// N]`; see [`Op::MatMulId`].
    pub fn matmul_id(&mut self, x: NodeId, w: NodeId, ids: NodeId) -> Result<NodeId, GraphError> {
        self.expert_product(Op::MatMulId, x, w, ids)
    }

    /// As [`matmul_id`](Self::matmul_id) with `w [E, N, K]` holding experts
    /// `first..first + E` of the layer: rows whose id is outside are
    /// `-0.0`; see [`Op::MatMulIdShare`].
    pub fn matmul_id_share(&mut self, x: NodeId, w: NodeId, ids: NodeId, first: usize) -> Result<NodeId, GraphError> {
        self.expert_product(Op::MatMulIdShare { first }, x, w, ids)
    }

    /// A product by experts (`op` is [`Op::MatMulId`] or
    /// [`Op::MatMulIdShare`]), its inputs checked.
    fn expert_product(&mut self, op: Op, x: NodeId, w: NodeId, ids: NodeId) -> Result<NodeId, GraphError> {
        let name = op.name();
        let xs = self.require_f32(name, x, 0)?.layout.shape;
        let wn = self.check(w)?;
        if !wn.layout.rows_contiguous(wn.dtype) {
            return Err(GraphError::Shape { op: name, source: ShapeError::NotContiguous });
        }
        if wn.dtype == DType::I32 {
            return Err(GraphError::Type { op: name, dtype: wn.dtype, input: 1 });
        }
        let ws = wn.layout.shape;
        let idn = self.check(ids)?;
        if idn.dtype != DType::I32 {
            return Err(GraphError::Type { op: name, dtype: idn.dtype, input: 2 });
        }
        let is = idn.layout.shape;
        let (xd, wd, id) = (xs.dims(), ws.dims(), is.dims());
        if xd.len() != 3 || wd.len() != 3 || id.len() != 2 || wd[0] == 0 {
            return Err(mismatch(name, "x [T, S, K], w [E, N, K] and ids [T, k]", xd, wd));
        }
        let (t, s, k) = (xd[0], xd[1], id[1]);
        if id[0] != t || (s != 1 && s != k) || xd[2] != wd[2] {
            return Err(mismatch(name, "x [T, 1 or k, K], ids [T, k] and w [E, N, K]", xd, id));
        }
        self.computed(op, vec![x, w, ids], DType::F32, shape(name, &[t, k, wd[1]])?)
    }

    /// The rows of each matrix of `x [.., R, C]` summed in order, as `[..,
    /// C]`; see [`Op::SumRows`].
    pub fn sum_rows(&mut self, x: NodeId) -> Result<NodeId, GraphError> {
        let xs = self.require_f32("sum_rows", x, 0)?.layout.shape;
        let d = xs.dims();
        if d.len() < 2 {
            return Err(mismatch("sum_rows", "x [.., R, C]", d, d));
        }
        let mut dims = d.to_vec();
        dims.remove(d.len() - 2);
        self.computed(Op::SumRows, vec![x], DType::F32, shape("sum_rows", &dims)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Flags;

    #[test]
    fn expert_nodes_take_their_shapes_and_refuse_others() {
        let mut g = Graph::new();
        let x = g.leaf("x", DType::F32, &[5, 64], Flags::INPUT).unwrap();
        let router = g.leaf("router", DType::F32, &[8, 64], Flags::WEIGHT).unwrap();
        let experts = g.leaf("experts", DType::Q8_0, &[8, 96, 64], Flags::WEIGHT).unwrap();
        let logits = g.matmul(x, router).unwrap();
        let ids = g.top_k(logits, 2).unwrap();
        assert_eq!(g.node(ids).dtype, DType::I32);
        assert_eq!(g.node(ids).layout.shape.dims(), [5, 2]);
        assert!(g.top_k(logits, 9).is_err() && g.top_k(logits, 0).is_err());
        let picked = g.take_columns(logits, ids).unwrap();
        assert_eq!(g.node(picked).layout.shape.dims(), [5, 2]);
        assert!(g.take_columns(logits, logits).is_err(), "f32 ids");
        let rows = g.reshape(x, &[5, 1, 64]).unwrap();
        let y = g.matmul_id(rows, experts, ids).unwrap();
        assert_eq!(g.node(y).layout.shape.dims(), [5, 2, 96]);
        assert!(g.matmul_id(x, experts, ids).is_err(), "x must be [T, S, K]");
        let three = g.reshape(x, &[5, 1, 64]).unwrap();
        let wrong = g.leaf("wrong", DType::F32, &[8, 96, 32], Flags::WEIGHT).unwrap();
        assert!(g.matmul_id(three, wrong, ids).is_err(), "K differs");
        let summed = g.sum_rows(y).unwrap();
        assert_eq!(g.node(summed).layout.shape.dims(), [5, 96]);
    }
}
