//! Shared helpers of the integration tests: a deterministic generator,
//! the NMSE measure, guarded output buffers, the ISA loop and raw random
//! block integers.

use baton_kernels::{with_isa, DType, Isa};

/// xorshift64*: deterministic, dependency-free test data.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in [-1, 1).
    pub fn uniform(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    /// Roughly normal (sum of four uniforms), scaled.
    pub fn normal(&mut self, scale: f32) -> f32 {
        (self.uniform() + self.uniform() + self.uniform() + self.uniform()) * 0.866 * scale
    }

    pub fn vec(&mut self, len: usize, scale: f32) -> Vec<f32> {
        (0..len).map(|_| self.normal(scale)).collect()
    }
}

/// Normalised mean squared error: `Σ (a - b)² / Σ b²` (0 when both are 0).
pub fn nmse(actual: &[f32], expected: &[f64]) -> f64 {
    assert_eq!(actual.len(), expected.len());
    let err: f64 = actual.iter().zip(expected).map(|(&a, &b)| (f64::from(a) - b).powi(2)).sum();
    let norm: f64 = expected.iter().map(|b| b * b).sum();
    if norm == 0.0 {
        err
    } else {
        err / norm
    }
}

/// Sentinel written around (and between) outputs; must survive every kernel.
pub const SENTINEL: f32 = -7.77e30;
/// Sentinel elements before and after a guarded buffer.
pub const GUARD: usize = 37;

/// A buffer of `len` elements with sentinel guard regions on both sides.
pub struct Guarded(pub Vec<f32>);

impl Guarded {
    pub fn new(len: usize) -> Self {
        Guarded(vec![SENTINEL; len + 2 * GUARD])
    }
    pub fn inner(&mut self) -> &mut [f32] {
        let len = self.0.len() - 2 * GUARD;
        &mut self.0[GUARD..GUARD + len]
    }
    pub fn view(&self) -> &[f32] {
        &self.0[GUARD..self.0.len() - GUARD]
    }
    /// Panics unless both guard regions still hold the sentinel.
    pub fn check_guards(&self, what: &str) {
        let n = self.0.len();
        for (i, &v) in self.0[..GUARD].iter().chain(&self.0[n - GUARD..]).enumerate() {
            assert_eq!(v.to_bits(), SENTINEL.to_bits(), "{what}: guard element {i} overwritten with {v}");
        }
    }
}

/// The instruction sets to test: the portable path always, then every SIMD
/// level this CPU has (so an AVX-512 machine still tests the AVX2 kernels).
pub fn isas() -> Vec<Isa> {
    Isa::available()
}

/// Runs `f` once per instruction set, forced on this thread.
pub fn for_each_isa(mut f: impl FnMut(Isa)) {
    for isa in isas() {
        with_isa(isa, || f(isa));
    }
}

/// Replaces the integers of every block of `row` with random bytes where
/// any byte is valid and the reference quantizer leaves some unwritten:
/// Q8_0's signed bytes (-128 among them) and MXFP4's codes (code 8, E2M1's
/// negative zero, among them). Other types are left as they are.
pub fn randomize_integers(dtype: DType, row: &mut [u8], rng: &mut Rng) {
    let first = match dtype {
        DType::Q8_0 => 2,
        DType::MXFP4 => 1,
        _ => return,
    };
    for block in row.chunks_exact_mut(dtype.block_bytes()) {
        block[first..].iter_mut().for_each(|q| *q = rng.next_u64() as u8);
    }
}
