//! How a mixture of experts is split over devices by its experts
//! (expert parallelism, `--split-mode expert`).

use std::ops::Range;

use crate::config::{Experts, LlamaConfig};
use crate::error::ModelError;

/// An expert-parallel split (`--split-mode expert`): every layer on the
/// first device, and each device holding one share of every layer's
/// experts, experts `0..E/n` on the first, the next on the second, as
/// balanced as the count allows ([`ExpertSplit::shares`]).
///
/// Each device's share of a layer's stacked experts
/// (`blk.N.ffn_*_exps.weight`) is a range of the file (the experts are
/// the outermost dimension), mapped from it where the device maps files:
/// nothing is copied. The experts' biases of the gate and up products,
/// where the architecture has them, are small and held whole by every
/// device; the router, the down product's bias and the rest of the layer
/// stay on the first device.
///
/// A step sends each layer's normalised rows and the router's picks to
/// every device; each multiplies the rows by the chosen experts it holds
/// only ([`Op::MatMulIdShare`]). Then either each device sums its own
/// experts' weighted outputs and the first adds those partial sums (one
/// row per token comes back from each device), or, `exact`, every
/// device's outputs of every pick come back (`used` rows per token), put
/// together (another share's rows are `-0.0`, which adds without changing
/// a bit) and weighted and summed on the first device in the order of
/// one device's graph: the logits are bit for bit one device's.
///
/// [`Op::MatMulIdShare`]: baton_core::graph::Op::MatMulIdShare
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ExpertSplit {
    /// Devices sharing the experts (the first holds the rest of every
    /// layer too).
    pub devices: usize,
    /// Whether the experts' outputs are gathered and summed as one device
    /// sums them (bit for bit one device's logits), rather than summed per
    /// device.
    pub exact: bool,
}

/// The separator of a share's weight name: `blk.0.ffn_up_exps.weight@1`
/// is device 1's share of `blk.0.ffn_up_exps.weight`.
const SHARE_MARK: char = '@';

impl ExpertSplit {
    /// The split of `config`'s experts over `devices` devices; an error
    /// for a model without experts, fewer than 2 devices or more devices
    /// than experts.
    pub fn new(config: &LlamaConfig, devices: usize, exact: bool) -> Result<ExpertSplit, ModelError> {
        let Some(experts) = config.experts else {
            return Err(ModelError::Config(
                "--split-mode expert splits a mixture of experts, and this model has none: split by layer".into(),
            ));
        };
        if devices < 2 || devices > experts.count {
            return Err(ModelError::Config(format!(
                "--split-mode expert over {devices} devices: from 2 devices to one per expert ({})",
                experts.count
            )));
        }
        Ok(ExpertSplit { devices, exact })
    }

    /// Each device's experts of a layer of `count`: consecutive ranges, the
    /// first `count mod devices` one expert longer.
    pub fn shares(&self, count: usize) -> Vec<Range<usize>> {
        let (each, extra) = (count / self.devices, count % self.devices);
        let mut start = 0;
        (0..self.devices)
            .map(|d| {
                let len = each + usize::from(d < extra);
                start += len;
                start - len..start
            })
            .collect()
    }

    /// How weight `name` (of a model with `experts`) is held: split by
    /// experts, whole on every device, or `None`: whole on its layer's
    /// device.
    pub fn holding(&self, name: &str) -> Option<ShareHolding> {
        let role = name.strip_prefix("blk.").and_then(|r| r.split_once('.')).map(|(_, r)| r)?;
        match role {
            "ffn_gate_exps.weight" | "ffn_up_exps.weight" | "ffn_down_exps.weight" => Some(ShareHolding::Split),
            // Added before the gate's activation, so on each device.
            "ffn_gate_exps.bias" | "ffn_up_exps.bias" => Some(ShareHolding::Mirror),
            _ => None,
        }
    }

    /// Bytes of activations that cross between devices per token and MoE
    /// layer, for a model of `dim` wide with `experts`: the normalised row
    /// (f32) and the picks (i32) to each other device, and back from each
    /// either a partial sum (one row) or, exact, the outputs of every pick.
    pub fn traffic_bytes_per_token(&self, dim: usize, experts: Experts) -> usize {
        let others = self.devices - 1;
        let to = dim * 4 + experts.used * 4 + if self.exact { 0 } else { experts.used * 4 };
        let back = if self.exact { experts.used * dim * 4 } else { dim * 4 };
        others * (to + back)
    }
}

/// How a device holds a weight under an expert split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShareHolding {
    /// Its share of the experts (a range of the outermost dimension).
    Split,
    /// The whole tensor, on every device.
    Mirror,
}

/// The name of device `device`'s share of weight `name`.
pub fn share_name(name: &str, device: usize) -> String {
    format!("{name}{SHARE_MARK}{device}")
}

/// The weight a share belongs to and its device, or the name itself.
pub fn share_of(name: &str) -> (&str, Option<usize>) {
    match name.rsplit_once(SHARE_MARK) {
        Some((base, device)) => match device.parse() {
            Ok(d) => (base, Some(d)),
            Err(_) => (name, None),
        },
        None => (name, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(devices: usize, exact: bool) -> ExpertSplit {
        ExpertSplit { devices, exact }
    }

    #[test]
    fn shares_cover_every_expert_once_and_differ_by_one_at_most() {
        for (count, devices) in [(8, 2), (128, 2), (32, 3), (5, 5), (7, 2)] {
            let shares = split(devices, false).shares(count);
            assert_eq!(shares.len(), devices);
            assert_eq!(shares[0].start, 0);
            assert_eq!(shares[devices - 1].end, count);
            assert!(shares.windows(2).all(|w| w[0].end == w[1].start), "{shares:?}");
            let lens: Vec<usize> = shares.iter().map(|r| r.len()).collect();
            assert!(lens.iter().max().unwrap() - lens.iter().min().unwrap() <= 1, "{lens:?}");
        }
        assert_eq!(split(2, false).shares(7), vec![0..4, 4..7]);
    }

    #[test]
    fn share_names_round_trip_and_others_are_whole() {
        let name = share_name("blk.3.ffn_up_exps.weight", 1);
        assert_eq!(name, "blk.3.ffn_up_exps.weight@1");
        assert_eq!(share_of(&name), ("blk.3.ffn_up_exps.weight", Some(1)));
        assert_eq!(share_of("blk.3.ffn_up_exps.weight"), ("blk.3.ffn_up_exps.weight", None));
        let s = split(2, false);
        assert_eq!(s.holding("blk.0.ffn_down_exps.weight"), Some(ShareHolding::Split));
        assert_eq!(s.holding("blk.0.ffn_gate_exps.bias"), Some(ShareHolding::Mirror));
        assert_eq!(s.holding("blk.0.ffn_down_exps.bias"), None, "added after the outputs meet");
        assert_eq!(s.holding("blk.0.ffn_gate_inp.weight"), None, "the router stays");
        assert_eq!(s.holding("output.weight"), None);
    }

    #[test]
    fn exact_sends_every_pick_back() {
        let experts = Experts { count: 128, used: 8, ffn_dim: 768, shared: None };
        // Row (2048 f32) and picks (8 i32) there, then weights (8 f32)
        // there and a row back, or every pick's row back.
        assert_eq!(split(2, false).traffic_bytes_per_token(2048, experts), 2048 * 4 + 64 + 2048 * 4);
        assert_eq!(split(2, true).traffic_bytes_per_token(2048, experts), 2048 * 4 + 32 + 8 * 2048 * 4);
    }
}
