//! How a model is spread over its devices, as a type: what each way of
//! spreading it allows is asked of it, not of which options were set.

/// How a model is spread over its devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Every layer on one device.
    OneDevice,
    /// Consecutive layers per device of this process (`-sm layer`: graph
    /// splits, a pipeline).
    Layers,
    /// Every weight split over the devices of a composite (`-sm tensor`).
    TensorShares,
    /// Layers over the ranks of an MPI job (each rank holds its own).
    Ranks,
    /// Every layer on the first device, each device of this process
    /// holding a share of every layer's experts (`-sm expert`).
    ExpertShares,
}

impl Placement {
    /// The placement of a model whose layers are on `layer_device`'s
    /// devices, over a composite (`tensor_shares`) or over ranks.
    pub(super) fn of(layer_device: &[usize], tensor_shares: bool, ranks: bool) -> Placement {
        match (tensor_shares, ranks) {
            (true, _) => Placement::TensorShares,
            (false, true) => Placement::Ranks,
            _ if layer_device.iter().any(|&d| d != layer_device[0]) => Placement::Layers,
            _ => Placement::OneDevice,
        }
    }

    /// Whether this process holds every slot's rows whole, each layer's
    /// on one device of its own: then a slot's state can be copied,
    /// saved and restored, and hidden states read per step. Not with
    /// tensor shares (a composite holds parts of each row) nor over ranks
    /// (other processes hold other layers). A share of the experts holds
    /// no state.
    pub fn holds_slots_whole(self) -> bool {
        matches!(self, Placement::OneDevice | Placement::Layers | Placement::ExpertShares)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_placement_follows_the_spread() {
        assert_eq!(Placement::of(&[0, 0, 0], false, false), Placement::OneDevice);
        assert_eq!(Placement::of(&[0, 0, 1], false, false), Placement::Layers);
        assert_eq!(Placement::of(&[0, 0], true, false), Placement::TensorShares);
        assert_eq!(Placement::of(&[0, 1], false, true), Placement::Ranks);
        let whole: Vec<bool> = [Placement::OneDevice, Placement::Layers, Placement::TensorShares, Placement::Ranks]
            .iter()
            .map(|p| p.holds_slots_whole())
            .collect();
        assert_eq!(whole, [true, true, false, false]);
    }
}
