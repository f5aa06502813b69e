//! The rotary angles of recent positions, computed once and shared by every
//! rope op of a stream: a decoded token's 30 layers rotate queries and keys
//! at the same position 60 times, and computing the angles (a power and a
//! sine and cosine in f64 per pair) cost more than rotating the heads.

use std::collections::HashMap;
use std::sync::Arc;

use baton_core::graph::Yarn;
use baton_kernels::RopeAngles;

/// Positions kept; past this the cache starts over (a long prompt).
const KEPT: usize = 8192;

/// Angles by position, for one set of rope parameters.
#[derive(Default)]
pub(crate) struct RopeCache {
    /// Rotated dimensions, frequency base and scale (as bits), and YaRN's.
    params: (usize, u32, u32, Option<[u32; 5]>),
    by_position: HashMap<usize, Arc<RopeAngles>>,
}

impl RopeCache {
    /// The angles of each of `positions` (computed for those not kept).
    pub(crate) fn angles(
        &mut self,
        positions: impl Iterator<Item = usize>,
        dims: usize,
        (freq_base, freq_scale): (f32, f32),
        yarn: Option<&Yarn>,
    ) -> Vec<Arc<RopeAngles>> {
        let yarn_bits = yarn.map(|y| {
            [
                y.orig_context as u32,
                y.ext_factor.to_bits(),
                y.attn_factor.to_bits(),
                y.beta_fast.to_bits(),
                y.beta_slow.to_bits(),
            ]
        });
        let params = (dims, freq_base.to_bits(), freq_scale.to_bits(), yarn_bits);
        if params != self.params || self.by_position.len() >= KEPT {
            self.params = params;
            self.by_position.clear();
        }
        positions
            .map(|p| {
                self.by_position
                    .entry(p)
                    .or_insert_with(|| {
                        let mut angles = RopeAngles::new();
                        angles.compute_yarn(p, dims, (freq_base, freq_scale), yarn);
                        Arc::new(angles)
                    })
                    .clone()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_angles_are_the_computed_ones_and_new_parameters_start_over() {
        let mut cache = RopeCache::default();
        let first = cache.angles([3, 7, 3].into_iter(), 64, (10_000.0, 1.0), None);
        assert!(Arc::ptr_eq(&first[0], &first[2]), "one computation per position");
        let mut fresh = RopeAngles::new();
        fresh.compute(7, 64, 10_000.0, 1.0);
        let mut head: Vec<f32> = (0..64).map(|i| i as f32 * 0.1).collect();
        let mut want = head.clone();
        first[1].apply(&mut head, baton_kernels::RopeMode::Normal);
        fresh.apply(&mut want, baton_kernels::RopeMode::Normal);
        assert_eq!(head, want);
        let other = cache.angles([3].into_iter(), 64, (100_000.0, 1.0), None);
        assert!(!Arc::ptr_eq(&first[0], &other[0]), "another base computes again");
    }
}
