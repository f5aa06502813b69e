//! The conformance suite: tests every backend expands and passes.
//!
//! Depends on baton-core alone; each backend crate (baton-cpu, baton-vulkan,
//! baton-composite) expands it in its tests, and baton-cli runs it against
//! the machine's devices (`baton conformance`).
//!
//! Two parts, both written once against the backend traits of `baton-core`:
//! - [`contract`]: one function per rule of `docs/contract.md`, named after
//!   the rule's ID (`q_fifo` checks Q-FIFO);
//! - [`ops`]: every op against a plain f64 reference, with an NMSE bound per
//!   type and guard bytes around every output that must stay untouched.
//!
//! A backend crate expands them into `#[test]`s with [`contract_tests!`],
//! [`op_tests!`] and [`chaos_contract_tests!`] (the rules again under the
//! [`chaos`] wrapper), giving a function that opens two devices; `baton
//! conformance` runs the same lists ([`CONTRACT_RULES`], [`OP_CASES`])
//! against the devices of the machine. Every backend runs every rule; a
//! rule the devices may fail is an expected failure (it must still fail,
//! never silently skipped, see [`run_rule`] and [`expected`]):
//! [`expected_failures`] derives them from what the backends declare (two
//! logical Vulkan devices, whose streams cannot wait natively on each
//! other, may fail W-ORDER and M-ORDER: the relay bridges such waits), for
//! the test macros and `baton conformance` alike; a backend that lacks a
//! feature lists the rule in `contract_tests!(open, unsupported:
//! ["w_foreign"])`. The CPU backend has none.
//!
//! The open function may return `Option` (see [`Devices`]): `None` runs
//! nothing, for a backend whose hardware this machine lacks (the backend
//! prints why, and fails instead where the hardware is required). An
//! `after:` function runs after each case, once its devices are dropped:
//! the Vulkan tests check the validation layer's verdict there.
#![deny(missing_docs)]

mod attention_ops;
mod cases;
pub mod chaos;
pub mod contract;
pub mod expected;
mod expert_ops;
mod op_harness;
pub mod ops;
mod oss_ops;
mod recurrent_ops;
pub mod reference;
mod relay;
mod util;

pub use cases::{Case, CONTRACT_RULES, OP_CASES};
pub use expected::{expected_failures, judge, ExpectedFailure, Outcome};
pub use util::{random, Fixture, RULE_TIMEOUT};

/// Expands every contract rule into a `#[test]` for a backend (the rules
/// of [`CONTRACT_RULES`]).
///
/// `$open` is a path to a function returning the devices under test (at
/// least two; see [`Devices`]). `after: $check` names a function run after
/// each rule, once its devices are dropped (a backend's own oracle, such as
/// the Vulkan validation layer's error count).
#[macro_export]
macro_rules! contract_tests {
    ($open:path) => {
        $crate::contract_tests!($open, unsupported: []);
    };
    ($open:path, after: $after:path) => {
        $crate::contract_tests!($open, unsupported: [], after: $after);
    };
    ($open:path, unsupported: [$($unsupported:literal),*]) => {
        $crate::contract_tests!($open, unsupported: [$($unsupported),*], after: $crate::nothing_after);
    };
    ($open:path, unsupported: [$($unsupported:literal),*], after: $after:path) => {
        $crate::for_each_contract_rule!($crate::contract_tests { @each $open, $after, &[$($unsupported),*] });
    };
    (@each $open:path, $after:path, $unsupported:expr; $($rule:ident: $kind:ident),*) => {
        $(
            #[test]
            fn $rule() {
                let Some(devices) = $crate::Devices::into_devices($open()) else { return };
                let mut expected = $crate::expected::listed_unsupported($unsupported);
                expected.extend($crate::expected_failures(&devices).expect("probing the devices' streams"));
                let devices = $crate::__private::Mutex::new(Some(devices));
                $crate::run_rule(stringify!($rule), &expected, &|| {
                    let devices = devices.lock().take();
                    let fixture = $crate::Fixture::new(devices.expect("each rule runs once"));
                    $crate::contract::$rule(&fixture);
                });
                $after();
            }
        )*
    };
}

/// What a backend's open function returns to the test macros: its devices,
/// or (`Option`) `None` when the machine has none of its kind, which the
/// backend decides and reports itself (the Vulkan tests skip with a printed
/// notice on a machine without a driver, and fail where one is required).
pub trait Devices {
    /// The devices, or `None` to run nothing.
    fn into_devices(self) -> Option<Vec<std::sync::Arc<dyn baton_core::backend::Device>>>;
}

impl<D: baton_core::IntoDevice> Devices for Vec<D> {
    fn into_devices(self) -> Option<Vec<std::sync::Arc<dyn baton_core::backend::Device>>> {
        Some(baton_core::backend::into_devices(self))
    }
}

impl<D: baton_core::IntoDevice> Devices for Option<Vec<D>> {
    fn into_devices(self) -> Option<Vec<std::sync::Arc<dyn baton_core::backend::Device>>> {
        self.map(baton_core::backend::into_devices)
    }
}

/// The default `after:` check of the test macros: nothing.
pub fn nothing_after() {}

/// Runs one rule. A rule listed in `expected` is an expected failure: it
/// must fail (one that passes is an error: take it off the list), and it
/// is never skipped.
pub fn run_rule(name: &str, expected: &[ExpectedFailure], check: &dyn Fn()) {
    match expected.iter().find(|e| e.rule == name) {
        None => check(),
        Some(e) => {
            if let Outcome::UnexpectedPass { why } = judge(Some(e), check) {
                panic!("{name} is an expected failure ({why}) but passes: take it off the list");
            }
        }
    }
}

/// Expands every contract rule marked `chaos` in the list of
/// [`CONTRACT_RULES`] into a `#[test]` that runs it under the chaos wrapper
/// for `$seeds` seeds (`BATON_CHAOS_SEEDS` overrides), each item delayed by
/// up to 200 µs; a failure names its seed.
#[macro_export]
macro_rules! chaos_contract_tests {
    ($open:path, $seeds:expr) => {
        $crate::for_each_contract_rule!($crate::chaos_contract_tests { @each $open, $seeds });
    };
    (@each $open:path, $seeds:expr; $($rule:ident: $kind:ident),*) => {
        $( $crate::chaos_contract_tests!(@one $kind $rule, $open, $seeds); )*
    };
    (@one plain $rule:ident, $open:path, $seeds:expr) => {};
    (@one chaos $rule:ident, $open:path, $seeds:expr) => {
        #[test]
        fn $rule() {
            $crate::chaos::for_seeds(
                0..$crate::chaos::seed_count($seeds),
                &$open,
                std::time::Duration::from_micros(200),
                &|devices| $crate::contract::$rule(&$crate::Fixture::new(devices)),
            );
        }
    };
}

/// Expands every op case into a `#[test]` for a backend (the cases of
/// [`OP_CASES`]); `after:` as for [`contract_tests!`].
#[macro_export]
macro_rules! op_tests {
    ($open:path) => {
        $crate::op_tests!($open, after: $crate::nothing_after);
    };
    ($open:path, after: $after:path) => {
        $crate::for_each_op_case!($crate::op_tests { @each $open, $after });
    };
    (@each $open:path, $after:path; $($case:ident),*) => {
        $(
            #[test]
            fn $case() {
                let Some(devices) = $crate::Devices::into_devices($open()) else { return };
                $crate::ops::$case(&$crate::Fixture::new(devices));
                $after();
            }
        )*
    };
}

/// What the test macros use from outside the crate's public API.
#[doc(hidden)]
pub mod __private {
    pub use baton_core::loom::Mutex;
}
