//! Which instruction set the kernels use: detected once at run time, and
//! overridable per thread so tests can force every lower level.

use std::cell::Cell;
use std::sync::OnceLock;

/// An instruction-set level the kernels have code for, ordered by what a
/// kernel may use: each level includes [`Isa::Avx2`]'s extensions when it
/// is above it, but [`Isa::Avx512`] does not include [`Isa::AvxVnni`]'s
/// (Ice Lake and Zen 4 have AVX-512 VNNI and no AVX-VNNI), so a level is
/// chosen among those the CPU has ([`Isa::current`]), never by order alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Isa {
    /// Portable Rust, no target features beyond the compile-time baseline.
    Scalar,
    /// x86_64 AVX2 + FMA + F16C (Haswell and later, Zen and later).
    Avx2,
    /// [`Isa::Avx2`] plus AVX-VNNI (Alder Lake and later cores, Sierra
    /// Forest, Zen 5): the 256-bit VEX `vpdpbusd` and `vpdpwssd` for the
    /// integer dot products of the packed tiles, with AVX2's 16 registers.
    AvxVnni,
    /// [`Isa::Avx2`] plus AVX-512 F, BW, VL, DQ and VNNI (Ice Lake, Sapphire
    /// Rapids and later Xeons, Zen 4 and later): 512-bit registers, and
    /// `vpdpbusd` for the integer dot products.
    Avx512,
}

thread_local! {
    static OVERRIDE: Cell<Option<Isa>> = const { Cell::new(None) };
}

impl Isa {
    /// Every level, lowest first.
    pub const ALL: [Isa; 4] = [Isa::Scalar, Isa::Avx2, Isa::AvxVnni, Isa::Avx512];

    /// The level the kernels use in this process: the best one the running
    /// CPU supports, lowered to the best supported level at or below the
    /// one the `BATON_ISA` environment variable names (`scalar`, `avx2`,
    /// `avxvnni`, `avx512`; read once) if set, so a whole program can be
    /// measured at a lower level. Always [`Isa::Scalar`] under Miri, which
    /// interprets the portable code only.
    pub fn detected() -> Isa {
        static LEVEL: OnceLock<Isa> = OnceLock::new();
        *LEVEL.get_or_init(|| {
            let limit = std::env::var("BATON_ISA").ok().and_then(|name| Isa::from_name(&name));
            Isa::best_supported_up_to(limit.unwrap_or(Isa::Avx512))
        })
    }

    /// The best level at or below `limit` that the running CPU supports.
    fn best_supported_up_to(limit: Isa) -> Isa {
        Isa::ALL.into_iter().rev().find(|&isa| isa <= limit && isa.supported_by_cpu()).unwrap_or(Isa::Scalar)
    }

    /// Whether the running CPU has every extension of this level.
    fn supported_by_cpu(self) -> bool {
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        {
            // `is_x86_feature_detected!` caches its answer in an atomic.
            use std::arch::is_x86_feature_detected as has;
            let avx2 = has!("avx2") && has!("fma") && has!("f16c");
            match self {
                Isa::Scalar => true,
                Isa::Avx2 => avx2,
                Isa::AvxVnni => avx2 && has!("avxvnni"),
                Isa::Avx512 => {
                    avx2 && has!("avx512f")
                        && has!("avx512bw")
                        && has!("avx512vl")
                        && has!("avx512dq")
                        && has!("avx512vnni")
                }
            }
        }
        #[cfg(not(all(target_arch = "x86_64", not(miri))))]
        {
            self == Isa::Scalar
        }
    }

    /// The levels kernels may run at in this process: every level at or
    /// below [`Isa::detected`] that the CPU supports, lowest first (what
    /// the tests force one after another).
    pub fn available() -> Vec<Isa> {
        Isa::ALL.into_iter().filter(|&isa| isa <= Isa::detected() && isa.supported_by_cpu()).collect()
    }

    /// The level named `name` (`scalar`, `avx2`, `avxvnni` or `avx512`, any
    /// case).
    pub fn from_name(name: &str) -> Option<Isa> {
        Isa::ALL.into_iter().find(|isa| format!("{isa:?}").eq_ignore_ascii_case(name.trim()))
    }

    /// The level kernels called on this thread use: the override set by
    /// [`with_isa`] if any, lowered to the best level at or below both it
    /// and [`Isa::detected`] that the CPU supports, else the detected one.
    ///
    /// Every `Isa` a kernel dispatches on comes from here, so `Isa::Avx2`
    /// reaching a kernel implies the CPU has AVX2, FMA and F16C,
    /// `Isa::AvxVnni` that it also has AVX-VNNI, and `Isa::Avx512` that it
    /// has AVX2's extensions and AVX-512 F, BW, VL, DQ and VNNI.
    pub fn current() -> Isa {
        let detected = Isa::detected();
        match OVERRIDE.with(Cell::get) {
            Some(forced) if forced < detected => Isa::best_supported_up_to(forced),
            _ => detected,
        }
    }

    /// Whether this level includes AVX2, FMA and F16C (every x86 SIMD level
    /// does), so a kernel's AVX2 code may run at it.
    pub fn has_avx2(self) -> bool {
        self >= Isa::Avx2
    }

    /// The CPU extensions this level's kernels use, as `/proc/cpuinfo`
    /// names them (for `baton devices`).
    pub fn extensions(self) -> &'static [&'static str] {
        match self {
            Isa::Scalar => &[],
            Isa::Avx2 => &["avx2", "fma", "f16c"],
            Isa::AvxVnni => &["avx2", "fma", "f16c", "avx_vnni"],
            Isa::Avx512 => &["avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512vnni"],
        }
    }
}

/// Runs `f` with the kernels called on this thread limited to `isa` (clamped
/// to what the CPU supports), so tests and benchmarks can run every lower
/// level. Parallel kernels read the level on the calling thread and hand it
/// to their workers, so the override covers them too.
pub fn with_isa<R>(isa: Isa, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Isa>);
    impl Drop for Restore {
        fn drop(&mut self) {
            OVERRIDE.with(|o| o.set(self.0));
        }
    }
    let _restore = Restore(OVERRIDE.with(|o| o.replace(Some(isa))));
    f()
}

/// Defines `$name(isa, args...)` that runs one portable body either as is,
/// compiled with AVX2+FMA+F16C enabled (so LLVM vectorizes it with 256-bit
/// registers) or with AVX-512 enabled too (512-bit registers), chosen by
/// `isa`. Bodies are written as lane-parallel loops
/// that vectorize without reassociating floating-point sums.
macro_rules! multiversion {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident : $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$meta])*
        $vis fn $name(isa: $crate::isa::Isa, $($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            fn body($($arg: $ty),*) $(-> $ret)? $body

            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,fma,f16c")]
            unsafe fn body_avx2($($arg: $ty),*) $(-> $ret)? {
                body($($arg),*)
            }

            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")]
            unsafe fn body_avx512($($arg: $ty),*) $(-> $ret)? {
                body($($arg),*)
            }

            match isa {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `Isa::Avx512` only comes from `Isa::current()`,
                // which returns it only when the CPU reports AVX2, FMA, F16C
                // and AVX-512 F, BW, VL, DQ and VNNI.
                $crate::isa::Isa::Avx512 => unsafe { body_avx512($($arg),*) },
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `Isa::Avx2` and `Isa::AvxVnni` only come from
                // `Isa::current()`, which returns them only when the CPU
                // reports AVX2, FMA and F16C (and AVX-VNNI, unused here).
                $crate::isa::Isa::Avx2 | $crate::isa::Isa::AvxVnni => unsafe { body_avx2($($arg),*) },
                _ => body($($arg),*),
            }
        }
    };
}
pub(crate) use multiversion;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn override_forces_each_lower_level_and_restores() {
        let before = Isa::current();
        assert_eq!(before, Isa::detected());
        for forced in Isa::ALL {
            let expected = Isa::available().into_iter().rfind(|&isa| isa <= forced).expect("scalar is always there");
            with_isa(forced, || assert_eq!(Isa::current(), expected, "forcing {forced:?}"));
            assert_eq!(Isa::current(), before, "restored after forcing {forced:?}");
        }
        with_isa(Isa::Avx2, || {
            with_isa(Isa::Scalar, || assert_eq!(Isa::current(), Isa::Scalar));
            assert_eq!(Isa::current(), Isa::Avx2.min(Isa::detected()), "nested override restored");
        });
    }

    #[test]
    fn levels_are_found_by_name() {
        assert_eq!(Isa::from_name("avx2"), Some(Isa::Avx2));
        assert_eq!(Isa::from_name(" AVX512 "), Some(Isa::Avx512));
        assert_eq!(Isa::from_name("Scalar"), Some(Isa::Scalar));
        assert_eq!(Isa::from_name("avxVNNI"), Some(Isa::AvxVnni));
        assert_eq!(Isa::from_name("sse2"), None);
        assert!(Isa::detected().supported_by_cpu());
    }

    #[test]
    fn a_forced_level_the_cpu_lacks_falls_to_one_it_has() {
        // Every level a kernel can see is one the CPU supports, whatever is
        // forced: AVX-512 does not imply AVX-VNNI.
        for forced in Isa::ALL {
            let got = with_isa(forced, Isa::current);
            assert!(got <= forced && got.supported_by_cpu(), "forcing {forced:?} gave {got:?}");
            assert!(Isa::available().contains(&got));
        }
        assert_eq!(Isa::available().first(), Some(&Isa::Scalar));
        assert_eq!(Isa::available().last(), Some(&Isa::detected()));
        assert_eq!(Isa::best_supported_up_to(Isa::Scalar), Isa::Scalar);
    }

    #[test]
    fn levels_are_ordered_and_name_their_extensions() {
        assert!(Isa::Scalar < Isa::Avx2 && Isa::Avx2 < Isa::AvxVnni && Isa::AvxVnni < Isa::Avx512);
        assert!(Isa::Scalar.extensions().is_empty());
        assert!(!Isa::Scalar.has_avx2() && Isa::ALL[1..].iter().all(|isa| isa.has_avx2()));
        for ext in Isa::Avx2.extensions() {
            assert!(Isa::Avx512.extensions().contains(ext), "{ext} missing from Avx512's list");
            assert!(Isa::AvxVnni.extensions().contains(ext), "{ext} missing from AvxVnni's list");
        }
        assert!(Isa::Avx512.extensions().contains(&"avx512vnni"));
        assert!(Isa::AvxVnni.extensions().contains(&"avx_vnni"));
    }

    #[test]
    #[cfg(miri)]
    fn miri_runs_the_portable_path() {
        assert_eq!(Isa::detected(), Isa::Scalar);
    }
}
