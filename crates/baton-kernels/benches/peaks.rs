//! What one core of this CPU can issue: the throughput of the instructions
//! the tiles are built from, each in a loop of independent accumulators
//! (so latency does not bound it) over registers only (so memory does not),
//! side by side in one run:
//!
//! - f32 FMA at 256 and 512 bits (`vfmadd231ps`), the float tiles' work;
//! - `vpdpbusd` at 256 bits (AVX-VNNI) and 512 bits (AVX-512 VNNI), the
//!   quantized tiles' work (4 byte products a lane);
//! - `vdpbf16ps` at 512 bits (AVX-512 BF16: 2 bf16 products a lane), the
//!   instruction a BF16 tile could take in place of widening and FMA.
//!
//! Each line gives instructions per nanosecond, the multiply-adds per
//! nanosecond they stand for, and those as a ratio to the 512-bit FMA's
//! (or the 256-bit one's without AVX-512). A dependent chain of FMAs gives
//! the clock, at the 4 cycles of latency most cores have. Instructions the
//! CPU lacks are left out. Run with
//! `cargo bench -p baton-kernels --bench peaks`; each figure is the best of
//! 5 rounds of about 50 ms.

use std::time::Instant;

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Independent accumulators a loop carries: more than any core's latency
/// times its ports, fewer than the 16 registers AVX2 has.
const CHAINS: usize = 12;
/// Instructions per accumulator a round.
const STEPS: usize = 4_000_000;

/// Nanoseconds of the fastest of 5 rounds of `f`.
fn best_ns(mut f: impl FnMut() -> f32) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let start = Instant::now();
        std::hint::black_box(f());
        best = best.min(start.elapsed().as_secs_f64() * 1e9);
    }
    best
}

/// `CHAINS` accumulators, `STEPS` times over: `$step(acc)` returns the next
/// value of one accumulator; the lanes' sum keeps the work alive.
#[cfg(target_arch = "x86_64")]
macro_rules! chains {
    ($zero:expr, $step:expr, $sum:expr) => {{
        let mut acc = [$zero; CHAINS];
        for _ in 0..STEPS {
            for a in acc.iter_mut() {
                *a = $step(*a);
            }
        }
        acc.iter().map(|a| $sum(*a)).sum::<f32>()
    }};
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn fma256() -> f32 {
    let (a, b) = (_mm256_set1_ps(0.999_9), _mm256_set1_ps(1e-3));
    chains!(_mm256_setzero_ps(), |acc| _mm256_fmadd_ps(a, b, acc), sum256)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,avx512f")]
fn fma512() -> f32 {
    let (a, b) = (_mm512_set1_ps(0.999_9), _mm512_set1_ps(1e-3));
    chains!(_mm512_setzero_ps(), |acc| _mm512_fmadd_ps(a, b, acc), _mm512_reduce_add_ps)
}

/// One accumulator: every FMA waits for the one before.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn fma_chain() -> f32 {
    let (a, b) = (_mm256_set1_ps(0.999_9), _mm256_set1_ps(1e-3));
    let mut acc = _mm256_setzero_ps();
    for _ in 0..STEPS * CHAINS / 4 {
        acc = _mm256_fmadd_ps(a, acc, b);
    }
    sum256(acc)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,avxvnni")]
fn dpbusd256() -> f32 {
    let (a, b) = (_mm256_set1_epi8(3), _mm256_set1_epi8(-2));
    chains!(_mm256_setzero_si256(), |acc| _mm256_dpbusd_avx_epi32(acc, a, b), |v| sum256(_mm256_cvtepi32_ps(v)))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,avx512f,avx512vnni")]
fn dpbusd512() -> f32 {
    let (a, b) = (_mm512_set1_epi8(3), _mm512_set1_epi8(-2));
    chains!(_mm512_setzero_si512(), |acc| _mm512_dpbusd_epi32(acc, a, b), |v| _mm512_reduce_add_ps(_mm512_cvtepi32_ps(
        v
    )))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,avx512f,avx512bf16")]
fn dpbf16_512() -> f32 {
    // bf16 pairs (1.0, 1.0) and (2^-10, 2^-10), as 32-bit lanes.
    // SAFETY: both are 64 bytes of plain lanes; any bits are a valid
    // vector of bf16.
    let (a, b) = unsafe {
        (
            std::mem::transmute::<__m512i, __m512bh>(_mm512_set1_epi32(0x3f80_3f80)),
            std::mem::transmute::<__m512i, __m512bh>(_mm512_set1_epi32(0x3a80_3a80)),
        )
    };
    chains!(_mm512_setzero_ps(), |acc| _mm512_dpbf16_ps(acc, a, b), _mm512_reduce_add_ps)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn sum256(v: __m256) -> f32 {
    let mut lanes = [0.0f32; 8];
    // SAFETY: `lanes` is 8 writable f32.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), v) };
    lanes.iter().sum()
}

#[cfg(target_arch = "x86_64")]
fn main() {
    let has = |feature: &str| match feature {
        "avx2" => is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"),
        "avx512" => is_x86_feature_detected!("avx512f"),
        "avxvnni" => is_x86_feature_detected!("avxvnni"),
        "avx512vnni" => is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vnni"),
        "avx512bf16" => is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bf16"),
        _ => false,
    };
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    println!("cpu: {cpu}; one thread, {CHAINS} independent accumulators, registers only");
    if !has("avx2") {
        println!("no AVX2 and FMA: nothing to time");
        return;
    }
    let count = (STEPS * CHAINS) as f64;
    // SAFETY: AVX2 and FMA were detected just above.
    let chain_ns = best_ns(|| unsafe { fma_chain() });
    println!("clock at 4 cycles of FMA latency: {:.2} GHz", 4.0 * (count / 4.0) / chain_ns);
    type Line = (&'static str, &'static str, f64, fn() -> f32);
    // Each function runs only where `has` holds for the feature beside it
    // (the filter below), which is what its `target_feature` names.
    let lines: [Line; 5] = [
        // SAFETY: run only where AVX2 and FMA were detected.
        ("vfmadd231ps ymm", "avx2", 8.0, || unsafe { fma256() }),
        // SAFETY: run only where AVX-512 F was detected.
        ("vfmadd231ps zmm", "avx512", 16.0, || unsafe { fma512() }),
        // SAFETY: run only where AVX-VNNI was detected.
        ("vpdpbusd ymm (AVX-VNNI)", "avxvnni", 32.0, || unsafe { dpbusd256() }),
        // SAFETY: run only where AVX-512 F and VNNI were detected.
        ("vpdpbusd zmm", "avx512vnni", 64.0, || unsafe { dpbusd512() }),
        // SAFETY: run only where AVX-512 F and BF16 were detected.
        ("vdpbf16ps zmm", "avx512bf16", 32.0, || unsafe { dpbf16_512() }),
    ];
    let rates: Vec<(&str, f64, f64)> = lines
        .into_iter()
        .filter(|(_, feature, _, _)| has(feature))
        .map(|(name, _, macs, run)| {
            let per_ns = count / best_ns(run);
            (name, per_ns, per_ns * macs)
        })
        .collect();
    // The widest FMA is the last one timed.
    let fma =
        rates.iter().filter(|(name, _, _)| name.starts_with("vfmadd")).map(|r| r.2).next_back().unwrap_or(f64::NAN);
    println!("| instruction | per ns | multiply-adds per ns | over the widest f32 FMA |");
    println!("| --- | ---: | ---: | ---: |");
    for (name, per_ns, rate) in rates {
        println!("| {name} | {per_ns:.2} | {rate:.1} | {:.2}x |", rate / fma);
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn main() {
    println!("peaks: x86-64 only");
}
