//! A plan: the splits of a graph, the copies between them, and where the
//! scheduler keeps the crossing tensors.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use baton_core::graph::{Graph, NodeId};

use crate::error::SchedError;
use crate::placement::place;
use crate::split::{cut, LeafSource, Split};

/// Alignment of crossing tensors in the scheduler's buffers.
const ALIGN: usize = 64;

/// How a cross-device edge is synchronised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncPath {
    /// The consumer's stream waits on the producer's point natively (both
    /// timelines in host memory, as for CPU devices).
    NativeWait,
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
    fn place(&mut self, key: (usize, NodeId), bytes: usize) -> usize {
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
    /// Places, cuts and lays out `graph` over `devices`.
    ///
    /// `group_device` maps the builder's placement groups (layers) to device
    /// indices; `leaf_device` gives the device of each bound leaf.
    pub fn new(
        graph: Arc<Graph>,
        devices: Vec<String>,
        group_device: &dyn Fn(u32) -> Option<usize>,
        leaf_device: &dyn Fn(NodeId) -> Option<usize>,
    ) -> Result<Plan, SchedError> {
        let placement = place(&graph, group_device, leaf_device)?;
        let splits = cut(&graph, &placement)?;
        let mut arenas = vec![DeviceArena::default(); devices.len()];
        let mut copies = Vec::new();
        for split in &splits {
            for &(original, _) in &split.crossings_out {
                let node = graph.node(original);
                let bytes = node.layout.end_byte(node.dtype) - node.layout.offset;
                arenas[split.device].place((split.index, original), bytes);
            }
        }
        for split in &splits {
            for leaf in &split.leaves {
                if let LeafSource::Crossing { original, from } = leaf.source {
                    let same_device = from.is_some_and(|f| splits[f].device == split.device);
                    if !same_device {
                        arenas[split.device].place((split.index, original), leaf.bytes);
                    }
                    copies.push(PlannedCopy {
                        original,
                        from_split: from,
                        to_split: split.index,
                        bytes: if same_device { 0 } else { leaf.bytes },
                        path: if same_device { SyncPath::StreamOrder } else { SyncPath::NativeWait },
                    });
                }
            }
        }
        Ok(Plan { graph, devices, splits, copies, arenas })
    }

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
                    None => "a caller's tensor on another device".into(),
                };
                let how = match copy.path {
                    SyncPath::NativeWait => "copy on the consumer's stream after a native wait on the producer's point (both timelines in host memory)",
                    SyncPath::StreamOrder => "same device: no copy, stream order",
                };
                writeln!(f, "  <- {} ({} bytes) from {from}: {how}", self.label(copy.original), copy.bytes)?;
            }
        }
        Ok(())
    }
}
