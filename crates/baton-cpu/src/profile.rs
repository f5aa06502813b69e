//! Per-op timing of the CPU executor: off by default, switched on for a
//! measurement (`baton bench --op-profile`), so that "where does a decoded
//! token's time go" is answered by the engine itself.
//!
//! While on, every op of every CPU stream is timed on the stream thread that
//! runs it (the op's wall time, all pool threads included) and added to a
//! process-wide table keyed by op, weight type and kind. The table lock is
//! taken once per op only while profiling; off, the cost is one relaxed load
//! per graph.

use baton_core::loom::plain::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use baton_core::graph::{Graph, Node, NodeId, Op};
use baton_core::DType;

static ENABLED: AtomicBool = AtomicBool::new(false);
static TABLE: Mutex<Option<HashMap<OpKey, OpTime>>> = Mutex::new(None);

/// What the table groups by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OpKey {
    /// The op's name (`Op::name`).
    pub op: &'static str,
    /// The type of the op's second input for matmul and get_rows (the
    /// weights or the KV cache), else the output's type.
    pub dtype: DType,
    /// Whether a matmul is batched (attention heads) rather than a linear
    /// layer.
    pub batched: bool,
}

impl std::fmt::Display for OpKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.op, self.batched) {
            ("matmul", true) => write!(f, "matmul attention ({} cache)", self.dtype),
            ("matmul", false) => write!(f, "matmul linear ({} weights)", self.dtype),
            ("get_rows", _) => write!(f, "get_rows ({})", self.dtype),
            (op, _) => write!(f, "{op}"),
        }
    }
}

/// Calls and total time of one key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpTime {
    /// Ops run.
    pub calls: u64,
    /// Their summed wall time.
    pub time: Duration,
}

/// Starts or stops profiling (the table is kept; see [`reset`]).
pub fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

/// Whether ops are being timed.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Empties the table.
pub fn reset() {
    *TABLE.lock() = None;
}

/// The table, largest total time first.
pub fn snapshot() -> Vec<(OpKey, OpTime)> {
    let table = TABLE.lock();
    let mut rows: Vec<_> = table.iter().flatten().map(|(k, v)| (*k, *v)).collect();
    rows.sort_by(|a, b| b.1.time.cmp(&a.1.time).then_with(|| a.0.to_string().cmp(&b.0.to_string())));
    rows
}

/// The key of a node.
pub(crate) fn key(graph: &Graph, node: &Node) -> OpKey {
    let (dtype, batched) = match node.op {
        Op::MatMul | Op::GetRows => {
            let second = graph.node(node.inputs.get(1).copied().unwrap_or(NodeId(0)));
            let dims = second.layout.shape.dims4();
            let w = if matches!(node.op, Op::MatMul) { second } else { graph.node(node.inputs[0]) };
            (w.dtype, matches!(node.op, Op::MatMul) && dims[0] * dims[1] > 1)
        }
        _ => (node.dtype, false),
    };
    OpKey { op: node.op.name(), dtype, batched }
}

/// Adds one op's time.
pub(crate) fn record(key: OpKey, time: Duration) {
    let mut table = TABLE.lock();
    let entry = table.get_or_insert_with(HashMap::new).entry(key).or_default();
    entry.calls += 1;
    entry.time += time;
}
