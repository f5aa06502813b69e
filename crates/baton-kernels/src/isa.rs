//! Which instruction set the kernels use: detected once at run time, and
//! overridable per thread so tests can force the portable fallback.

use std::cell::Cell;

/// An instruction-set level the kernels have code for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Isa {
    /// Portable Rust, no target features beyond the compile-time baseline.
    Scalar,
    /// x86_64 AVX2 + FMA + F16C (Haswell and later, Zen and later).
    Avx2,
}

thread_local! {
    static OVERRIDE: Cell<Option<Isa>> = const { Cell::new(None) };
}

impl Isa {
    /// The best level the running CPU supports.
    pub fn detected() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            // `is_x86_feature_detected!` caches its answer in an atomic.
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
                && std::arch::is_x86_feature_detected!("f16c")
            {
                return Isa::Avx2;
            }
        }
        Isa::Scalar
    }

    /// The level kernels called on this thread use: the override set by
    /// [`with_isa`] if any (never above [`Isa::detected`]), else the detected one.
    ///
    /// Every `Isa` a kernel dispatches on comes from here, so `Isa::Avx2`
    /// reaching a kernel implies the CPU has AVX2, FMA and F16C.
    pub fn current() -> Isa {
        let detected = Isa::detected();
        match OVERRIDE.with(Cell::get) {
            Some(Isa::Scalar) => Isa::Scalar,
            _ => detected,
        }
    }
}

/// Runs `f` with the kernels called on this thread limited to `isa` (clamped
/// to what the CPU supports). Parallel kernels read the level on the calling
/// thread and hand it to their workers, so the override covers them too.
///
/// Used by tests and benchmarks to exercise the portable fallback.
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

/// Defines `$name(isa, args...)` that runs one portable body either as is or
/// compiled with AVX2+FMA+F16C enabled (so LLVM vectorizes it with 256-bit
/// registers), chosen by `isa`. Bodies are written as lane-parallel loops
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

            match isa {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: `Isa::Avx2` only comes from `Isa::current()`, which
                // returns it only when the CPU reports AVX2, FMA and F16C.
                $crate::isa::Isa::Avx2 => unsafe { body_avx2($($arg),*) },
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
    fn override_forces_scalar_and_restores() {
        let before = Isa::current();
        with_isa(Isa::Scalar, || assert_eq!(Isa::current(), Isa::Scalar));
        assert_eq!(Isa::current(), before);
        with_isa(Isa::Avx2, || assert_eq!(Isa::current(), Isa::detected()));
    }
}
