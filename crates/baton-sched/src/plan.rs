//! A plan: the splits of a graph, the copies between them, and where the
//! scheduler keeps the crossing tensors.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use baton_core::backend::{CopyPath, WaitPath};
use baton_core::graph::{Graph, NodeId};

use crate::split::Split;

/// Alignment of crossing tensors in the scheduler's buffers.
const ALIGN: usize = 64;

/// How a cross-device edge goes: how the consumer's stream waits on the
/// producer's point, and how it copies the tensor
/// ([`Runner::edge_path`](crate::Runner::edge_path) decides both).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EdgePath {
    /// Native wait or relay.
    pub wait: WaitPath,
    /// Direct or host-staged copy.
    pub copy: CopyPath,
}

/// How an edge between two splits is synchronised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncPath {
    /// Another device: a copy on the consumer's stream after a wait on the
    /// producer's point, each by the path its streams take.
    CrossDevice(EdgePath),
    /// Same device: stream order alone (no copy, no wait).
    StreamOrder,
}

/// One copy the plan makes per run.
#[derive(Clone, Debug)]
pub struct PlannedCopy {
    /// The original tensor.
    pub original: NodeId,
    /// Producing split (`None`: a caller's leaf on another device).
    pub from_split: Option<usize>,
    /// The device of the tensor copied (the producing split's, or where a
    /// caller's leaf is bound).
    pub from_device: usize,
    /// Consuming split.
    pub to_split: usize,
    /// Bytes moved.
    pub bytes: usize,
    /// How the edge is synchronised.
    pub path: SyncPath,
}

/// Where crossing tensors live on one device, per run slot.
#[derive(Clone, Debug, Default)]
pub struct DeviceArena {
    /// Byte offset of each (split, original) region.
    pub offsets: HashMap<(usize, NodeId), usize>,
    /// Bytes needed.
    pub bytes: usize,
}

impl DeviceArena {
    /// Places the region `key` of `bytes` after the others, aligned; returns
    /// its offset.
    pub(crate) fn place(&mut self, key: (usize, NodeId), bytes: usize) -> usize {
        let offset = self.bytes.div_ceil(ALIGN) * ALIGN;
        self.bytes = offset + bytes;
        self.offsets.insert(key, offset);
        offset
    }
}

/// The plan of one graph over a set of devices.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The original graph.
    pub graph: Arc<Graph>,
    /// Device names, by index.
    pub devices: Vec<String>,
    /// The splits, in run order.
    pub splits: Vec<Split>,
    /// The copies of one run.
    pub copies: Vec<PlannedCopy>,
    /// Crossing tensors per device.
    pub arenas: Vec<DeviceArena>,
}

impl Plan {
    /// Bytes copied between devices per run.
    pub fn bytes_per_run(&self) -> usize {
        self.copies.iter().map(|c| c.bytes).sum()
    }

    fn label(&self, id: NodeId) -> String {
        let node = self.graph.node(id);
        node.name.clone().unwrap_or_else(|| format!("node {} ({} {:?})", id.0, node.op.name(), node.layout.shape))
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} splits over {} device(s); {} bytes copied per run",
            self.splits.len(),
            self.devices.len(),
            self.bytes_per_run()
        )?;
        for split in &self.splits {
            writeln!(
                f,
                "split {} on {}: {} nodes, {} leaves, {} crossing out",
                split.index,
                self.devices[split.device],
                split.nodes,
                split.leaves.len(),
                split.crossings_out.len()
            )?;
            for copy in self.copies.iter().filter(|c| c.to_split == split.index) {
                let from = match copy.from_split {
                    Some(s) => format!("split {} on {}", s, self.devices[self.splits[s].device]),
                    None => format!("a caller's tensor on {}", self.devices[copy.from_device]),
                };
                let to = &self.devices[split.device];
                let producer = &self.devices[copy.from_device];
                let how = match copy.path {
                    SyncPath::CrossDevice(edge) => {
                        format!("{}; {}", wait_reason(edge.wait, to, producer), copy_reason(edge.copy, to, producer))
                    }
                    SyncPath::StreamOrder => "same device: no copy, stream order".into(),
                };
                writeln!(f, "  <- {} ({} bytes) from {from}: {how}", self.label(copy.original), copy.bytes)?;
            }
        }
        Ok(())
    }
}

/// Why the consumer's stream waits as it does, in words.
fn wait_reason(wait: WaitPath, consumer: &str, producer: &str) -> String {
    match wait {
        WaitPath::Native => format!("native wait on the producer's point ({consumer} streams wait on {producer} timelines)"),
        WaitPath::Relay => format!(
            "relay wait: a host thread waits for the producer's point ({consumer} streams cannot wait natively on {producer} timelines)"
        ),
        WaitPath::StreamOrder => "stream order".into(),
    }
}

/// Why the consumer's stream copies as it does, in words.
fn copy_reason(copy: CopyPath, consumer: &str, producer: &str) -> String {
    match copy {
        CopyPath::Direct => format!("direct copy on the consumer's stream ({consumer} addresses {producer} memory)"),
        CopyPath::HostStaged => format!(
            "host-staged copy: {producer} reads into host memory, {consumer} writes it ({consumer} cannot address {producer} memory)"
        ),
    }
}
