//! How each op's output is held, given how its inputs are: the states each
//! input must be brought to (by a gate or a local slice) and the output's.
//!
//! The rules keep work split wherever the math allows and fall back to
//! mirrored inputs (everything gathered, computed on every device)
//! otherwise, which is always correct.

use std::ops::Range;

use baton_core::graph::{Graph, Node, Op};

use crate::split::TensorSplit::{self, Mirror, Partial, Split};

/// The states an op's inputs must have, and its output's.
pub(crate) struct Rule {
    pub(crate) inputs: Vec<TensorSplit>,
    pub(crate) output: TensorSplit,
    /// A grouped-query product whose devices' query heads need not start or
    /// end on a group boundary: `group` query heads (x's split axis) share
    /// one key head (w's). A device whose heads do is built as the one op;
    /// one whose heads do not, group by group ([`GroupedHeads`]).
    pub(crate) grouped: Option<GroupedHeads>,
}

/// How a device computes its query heads of a grouped-query product (a
/// matmul of queries against keys, or a fused attention).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GroupedHeads {
    /// The head axis of the queries (x).
    pub(crate) axis: usize,
    /// The head axis of the keys (w) and values.
    pub(crate) kv_axis: usize,
    /// Query heads per key head.
    pub(crate) group: usize,
}

fn rule(inputs: Vec<TensorSplit>, output: TensorSplit) -> Rule {
    Rule { inputs, output, grouped: None }
}

/// Whether each device's key heads `wp` are exactly the groups of its query
/// heads `xp` (one segment each): a group split between two devices is held
/// by both.
fn holds_its_groups(xp: &[Vec<Range<usize>>], wp: &[Vec<Range<usize>>], group: usize) -> bool {
    xp.len() == wp.len()
        && xp.iter().zip(wp).all(|(x, w)| match (x.as_slice(), w.as_slice()) {
            ([x], [w]) => !x.is_empty() && w.start == x.start / group && w.end == x.end.div_ceil(group),
            _ => false,
        })
}

/// Every input mirrored, the output mirrored.
fn mirrored(n: usize) -> Rule {
    rule(vec![Mirror; n], Mirror)
}

fn split(axis: usize, parts: &[Vec<Range<usize>>]) -> TensorSplit {
    Split { axis, parts: parts.to_vec() }
}

/// `parts` scaled by `factor` (heads of a grouped-query product).
fn scaled(parts: &[Vec<Range<usize>>], factor: usize) -> Vec<Vec<Range<usize>>> {
    parts.iter().map(|s| s.iter().map(|r| r.start * factor..r.end * factor).collect()).collect()
}

/// The rule of `node` whose inputs are in `states`.
pub(crate) fn rule_of(graph: &Graph, node: &Node, states: &[TensorSplit]) -> Rule {
    let dims = |i: usize| graph.node(node.inputs[i]).layout.shape.dims().to_vec();
    let n = states.len();
    match (&node.op, states) {
        (Op::MatMul, [x, w]) => matmul(&dims(0), &dims(1), x, w),
        (Op::Add | Op::Mul, [a, b]) => elementwise(&node.op, &dims(0), &dims(1), a, b),
        (Op::Scale(_) | Op::Contiguous, [x]) => rule(vec![x.clone()], x.clone()),
        (Op::Silu | Op::Gelu, [x]) if *x != Partial => rule(vec![x.clone()], x.clone()),
        (Op::RmsNorm { .. }, [Split { axis, parts }]) if axis + 1 < dims(0).len() => {
            rule(vec![split(*axis, parts)], split(*axis, parts))
        }
        (Op::Rope { .. }, [Split { axis: 1, parts }, _]) => rule(vec![split(1, parts), Mirror], split(1, parts)),
        (Op::Softmax { .. }, [Split { axis, parts }, ..]) if axis + 2 < dims(0).len() => {
            let mut inputs = vec![split(*axis, parts)];
            inputs.extend(std::iter::repeat_n(Mirror, n - 1));
            rule(inputs, split(*axis, parts))
        }
        (
            Op::Attention { sinks: false, .. },
            [q @ Split { axis: 1, parts: qp }, k @ Split { axis: 0, parts: kp }, v, ..],
        ) if k == v => {
            // By heads: each device its query heads with their key-value
            // heads; the positions (and slots) whole.
            let group = dims(0)[1] / dims(1)[0].max(1);
            let mut inputs = vec![q.clone(), k.clone(), k.clone()];
            inputs.extend(std::iter::repeat_n(Mirror, n - 3));
            if *qp == scaled(kp, group) {
                rule(inputs, q.clone())
            } else if holds_its_groups(qp, kp, group) {
                Rule { inputs, output: q.clone(), grouped: Some(GroupedHeads { axis: 1, kv_axis: 0, group }) }
            } else {
                mirrored(n)
            }
        }
        (Op::GetRows, [Split { axis: 1, parts }, _]) => rule(vec![split(1, parts), Mirror], split(1, parts)),
        (Op::ScatterRows, [dst, ..]) => {
            // The target is memory: its state is fixed; the rows follow it.
            rule(vec![dst.clone(), dst.clone(), Mirror], dst.clone())
        }
        (Op::CopyInto, [dst, _]) if dims(0) == dims(1) || *dst == Mirror => {
            rule(vec![dst.clone(), dst.clone()], dst.clone())
        }
        _ => mirrored(n),
    }
}

fn matmul(x_dims: &[usize], w_dims: &[usize], x: &TensorSplit, w: &TensorSplit) -> Rule {
    let (xr, wr) = (x_dims.len(), w_dims.len());
    match (x, w) {
        (Mirror, Mirror) => mirrored(2),
        // Rows of the weight: columns of the output.
        (Mirror, Split { axis, parts }) if *axis + 2 == wr => rule(vec![Mirror, w.clone()], split(xr - 1, parts)),
        // The inner dimension on both: partial sums (of disjoint parts; an
        // index two devices held would be added twice).
        (Split { axis: xa, parts: xp }, Split { axis: wa, parts: wp })
            if xa + 1 == xr && wa + 1 == wr && xp == wp && TensorSplit::disjoint(xp) =>
        {
            rule(vec![x.clone(), w.clone()], Partial)
        }
        // A batch dimension on both (grouped-query attention: each device
        // holds its query heads with the key heads of their groups).
        (Split { axis: xa, parts: xp }, Split { axis: wa, parts: wp })
            if xr == wr && xa == wa && xa + 2 < xr && x_dims[*xa].is_multiple_of(w_dims[*wa]) =>
        {
            let group = x_dims[*xa] / w_dims[*wa];
            if *xp == scaled(wp, group) {
                rule(vec![x.clone(), w.clone()], x.clone())
            } else if holds_its_groups(xp, wp, group) {
                let grouped = Some(GroupedHeads { axis: *xa, kv_axis: *xa, group });
                Rule { inputs: vec![x.clone(), w.clone()], output: x.clone(), grouped }
            } else {
                mirrored(2)
            }
        }
        // Rows of x against a whole weight.
        (Split { axis, .. }, Mirror) if *axis + 2 == xr && wr == 2 => rule(vec![x.clone(), Mirror], x.clone()),
        // Linear in x.
        (Partial, Mirror) => rule(vec![Partial, Mirror], Partial),
        _ => mirrored(2),
    }
}

fn elementwise(op: &Op, a_dims: &[usize], b_dims: &[usize], a: &TensorSplit, b: &TensorSplit) -> Rule {
    // b's dimension aligned with a's `axis` (b is broadcast from the right).
    let b_axis = |axis: usize| (axis + b_dims.len()).checked_sub(a_dims.len());
    match (a, b) {
        (Mirror, Mirror) => mirrored(2),
        (Split { axis: x, parts: p }, Split { axis: y, parts: q }) if Some(*y) == b_axis(*x) && p == q => {
            rule(vec![a.clone(), b.clone()], a.clone())
        }
        (Split { axis, parts }, Mirror) => match b_axis(*axis) {
            None => rule(vec![a.clone(), Mirror], a.clone()),
            Some(ba) if b_dims[ba] == 1 => rule(vec![a.clone(), Mirror], a.clone()),
            Some(ba) if b_dims[ba] == a_dims[*axis] => rule(vec![a.clone(), split(ba, parts)], a.clone()),
            Some(_) => mirrored(2),
        },
        (Partial, Partial) if *op == Op::Add => rule(vec![Partial, Partial], Partial),
        (Partial, Mirror) if *op == Op::Mul => rule(vec![Partial, Mirror], Partial),
        _ => mirrored(2),
    }
}
