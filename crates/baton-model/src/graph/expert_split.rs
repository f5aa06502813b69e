//! A mixture of experts split over devices by its experts (see
//! [`ExpertSplit`]): the router where the layer's experts group runs,
//! each device's share of the experts in a group of its own, their
//! outputs met again where the router ran.

use baton_core::graph::{GraphError, NodeId};

use super::{expert_share_group, Builder};
use crate::config::Experts;
use crate::expert_parallel::ExpertSplit;

impl Builder<'_> {
    /// Layer `l`'s mixture of experts on the normalised rows `h [T, dim]`
    /// under `split`: the router in the current group; each device's rows
    /// through the chosen experts it holds in its own group
    /// ([`expert_share_group`]); then either the sum of each device's
    /// weighted outputs, or (`exact`) every pick's output gathered (the
    /// other devices' rows of a pick are `-0.0`, so the adds leave its
    /// bits), weighted and summed as [`experts`](Self::experts) does on
    /// one device.
    pub(super) fn split_experts(
        &mut self,
        l: usize,
        h: NodeId,
        e: Experts,
        split: ExpertSplit,
    ) -> Result<NodeId, GraphError> {
        let router_group = self.g.group();
        let (picked, weights) = self.router(l, h, e)?;
        // The biases' rows are looked up through a view of the picks: each
        // split that does reads its own copy of them (a view does not
        // cross splits).
        let biases = self.config.traits().expert_biases;
        let picks = |b: &mut Self| match biases {
            true => b.g.contiguous(picked),
            false => Ok(picked),
        };
        let mut parts = Vec::with_capacity(split.devices);
        for (d, experts) in split.shares(e.count).into_iter().enumerate() {
            self.g.set_group(Some(expert_share_group(self.config, l, d)));
            // A view does not cross devices: each share copies its rows.
            let rows = self.g.contiguous(h)?;
            let ids = picks(self)?;
            let outs = self.expert_products(l, rows, ids, e, Some((d, experts)))?;
            parts.push(match split.exact {
                true => outs,
                false => {
                    let weights = self.g.contiguous(weights)?;
                    self.weighted_sum(outs, weights)?
                }
            });
        }
        self.g.set_group(router_group);
        // The router's split ended where the first share's began: its
        // weights are read here as a copy (a view does not cross splits).
        let weights = self.g.contiguous(weights)?;
        let ids = picks(self)?;
        let mut y = parts[0];
        for &part in &parts[1..] {
            y = self.g.add(y, part)?;
        }
        let down_bias = format!("blk.{l}.ffn_down_exps.bias");
        if split.exact {
            let outs = self.expert_bias(&down_bias, y, ids, e.count)?;
            return self.weighted_sum(outs, weights);
        }
        if !self.config.traits().expert_biases {
            return Ok(y);
        }
        // The down product's biases, weighted as their outputs are.
        let t = self.g.node(h).layout.shape.dims()[0];
        let table = self.weight(&down_bias, &[e.count, self.config.dim])?;
        let flat = self.g.reshape(ids, &[t * e.used])?;
        let rows = self.g.get_rows(table, flat)?;
        let rows = self.g.reshape(rows, &[t, e.used, self.config.dim])?;
        let biases = self.weighted_sum(rows, weights)?;
        self.g.add(y, biases)
    }
}
