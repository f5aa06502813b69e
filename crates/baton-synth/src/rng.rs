//! A tiny seeded pseudo-random generator for synthetic weights.
//!
//! The workspace has no `rand` crate, and test weights need neither
//! cryptographic quality nor a long period: they need to be deterministic in
//! the seed, independent between tensors, cheap (one generator step per
//! weight; writing the 135M-parameter shape is dominated by quantization and
//! disk I/O) and spread out enough that a forward pass is not degenerate. SplitMix64 (Steele, Lea and Flood, "Fast
//! splittable pseudorandom number generators", OOPSLA 2014; the seeding
//! generator of Java's `SplittableRandom` and of the xoshiro family) gives
//! all of that in a dozen lines and passes BigCrush.

/// SplitMix64's increment: the odd integer nearest 2^64 / φ.
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// SplitMix64: a 64-bit counter stepped by the golden-ratio increment, each
/// output a bijective mix of the counter.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// The generator for one tensor: its stream depends on the model seed and
    /// the tensor's name, so tensors are independent of each other and of the
    /// order they are written in.
    pub(crate) fn for_tensor(seed: u64, name: &str) -> Self {
        let mut mixer = Self { state: seed ^ fnv1a(name.as_bytes()) };
        Self { state: mixer.next_u64() }
    }

    /// The generator `steps` outputs further on: SplitMix64's state is a
    /// counter, so skipping ahead costs one multiplication. Every
    /// [`next_normal`](Self::next_normal) takes one step, so a writer can
    /// start each row of a tensor at its own offset on its own thread and
    /// still write the bytes of one sequential pass.
    pub(crate) fn skipped(&self, steps: u64) -> Self {
        Self { state: self.state.wrapping_add(GAMMA.wrapping_mul(steps)) }
    }

    /// The next 64 uniformly distributed bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GAMMA);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A normal-looking sample with mean 0 and standard deviation 1.
    ///
    /// The Irwin–Hall sum of four uniforms taken from the four 16-bit lanes
    /// of one output, centred and scaled by `sqrt(3)`: a bell curve bounded
    /// by ±2√3 ≈ ±3.46, one generator step per value and no transcendental
    /// functions. Bounded tails are a feature here: no outlier blows up a
    /// quantization block's scale.
    pub(crate) fn next_normal(&mut self) -> f32 {
        const LANE: f32 = 65536.0;
        let bits = self.next_u64();
        let sum: f32 = (0..4).map(|lane| ((bits >> (16 * lane)) & 0xffff) as f32 + 0.5).sum();
        // Each lane is uniform on (0, 1) after dividing by 2^16; four of them
        // sum to mean 2 and variance 4/12 = 1/3.
        (sum / LANE - 2.0) * 3f32.sqrt()
    }
}

/// FNV-1a, 64-bit: a stable hash of a tensor name (std's `Hasher`s are not
/// guaranteed stable across releases, and the file must not change with the
/// toolchain).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_matches_the_published_sequence() {
        // First outputs of SplitMix64 seeded with 0 (reference C code by
        // Sebastiano Vigna, prng.di.unimi.it/splitmix64.c).
        let mut rng = SplitMix64 { state: 0 };
        assert_eq!(rng.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(rng.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn normal_samples_have_unit_moments_and_bounded_tails() {
        let mut rng = SplitMix64::for_tensor(7, "w");
        let n = 100_000;
        let samples: Vec<f32> = (0..n).map(|_| rng.next_normal()).collect();
        let mean = samples.iter().sum::<f32>() / n as f32;
        let var = samples.iter().map(|x| (x - mean).powi(2)).sum::<f32>() / n as f32;
        assert!(mean.abs() < 0.02, "mean {mean}");
        assert!((var.sqrt() - 1.0).abs() < 0.02, "std {}", var.sqrt());
        assert!(samples.iter().all(|x| x.abs() <= 3.47));
    }

    #[test]
    fn skipping_ahead_lands_where_stepping_does() {
        let mut stepped = SplitMix64::for_tensor(3, "w");
        let skipped = stepped.skipped(1_000);
        for _ in 0..1_000 {
            stepped.next_normal();
        }
        assert_eq!(stepped.clone().next_u64(), skipped.clone().next_u64());
        assert_eq!(skipped.skipped(0).next_u64(), stepped.next_u64());
    }

    #[test]
    fn streams_differ_by_seed_and_by_name() {
        let first = |seed, name| SplitMix64::for_tensor(seed, name).next_u64();
        assert_ne!(first(1, "a"), first(2, "a"));
        assert_ne!(first(1, "a"), first(1, "b"));
        assert_eq!(first(1, "a"), first(1, "a"));
    }
}
