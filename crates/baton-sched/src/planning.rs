//! Making a plan: placing and cutting a graph over a runner's devices,
//! laying out the crossing tensors, and asking the runner's streams how
//! each cross-device edge goes.

use std::collections::HashMap;
use std::sync::Arc;

use baton_core::graph::{Graph, NodeId};

use crate::error::SchedError;
use crate::placement::place;
use crate::plan::{DeviceArena, EdgePath, Plan, PlannedCopy, SyncPath};
use crate::runner::Runner;
use crate::split::{cut, LeafSource};

impl Plan {
    /// Places, cuts and lays out `graph` over the devices of `runner`, and
    /// asks its streams how each cross-device edge goes
    /// ([`Runner::edge_path`]).
    ///
    /// `group_device` maps the builder's placement groups (layers) to device
    /// indices; `leaf_device` gives the device of each bound leaf.
    pub fn new(
        graph: Arc<Graph>,
        runner: &Runner,
        group_device: &dyn Fn(u32) -> Option<usize>,
        leaf_device: &dyn Fn(NodeId) -> Option<usize>,
    ) -> Result<Plan, SchedError> {
        let devices: Vec<String> = runner.devices().iter().map(|d| d.info().name.clone()).collect();
        let placement = place(&graph, group_device, leaf_device)?;
        let mut edges: HashMap<(usize, usize), EdgePath> = HashMap::new();
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
                    // A caller's tensor lives where it was placed.
                    let from_device = from.map_or(placement[original.0], |f| splits[f].device);
                    let same_device = from.is_some() && from_device == split.device;
                    let path = if same_device {
                        SyncPath::StreamOrder
                    } else {
                        arenas[split.device].place((split.index, original), leaf.bytes);
                        let key = (from_device, split.device);
                        let edge = match edges.get(&key) {
                            Some(edge) => *edge,
                            None => {
                                let edge = runner.edge_path(from_device, split.device)?;
                                edges.insert(key, edge);
                                edge
                            }
                        };
                        SyncPath::CrossDevice(edge)
                    };
                    copies.push(PlannedCopy {
                        original,
                        from_split: from,
                        from_device,
                        to_split: split.index,
                        bytes: if same_device { 0 } else { leaf.bytes },
                        path,
                    });
                }
            }
        }
        Ok(Plan { graph, devices, splits, copies, arenas })
    }
}
