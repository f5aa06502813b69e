//! The conformance suite: tests every backend expands and passes.
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

pub mod chaos;
pub mod contract;
pub mod expected;
pub mod ops;
pub mod reference;
mod util;

pub use expected::{expected_failures, judge, ExpectedFailure, Outcome};
pub use util::{random, Fixture, RULE_TIMEOUT};

/// Expands every contract rule into a `#[test]` for a backend (the same
/// rules as [`CONTRACT_RULES`]).
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
        $crate::contract_tests!(@each $open, $after, &[$($unsupported),*];
            p_mono, p_visible, p_wait, p_timeout, p_fail, h_release, h_abandon,
            q_fifo, q_nonblock, w_order, w_fail, w_foreign, w_bound, w_hold, m_order,
            h_own, r_own, d_return, c_order, c_cross, g_async,
            e_sticky, e_nopanic, d_noblock, d_defer, d_cancel);
    };
    (@each $open:path, $after:path, $unsupported:expr; $($rule:ident),*) => {
        $(
            #[test]
            fn $rule() {
                let Some(devices) = $crate::Devices::into_devices($open()) else { return };
                let mut expected = $crate::expected::listed_unsupported($unsupported);
                expected.extend($crate::expected_failures(&devices).expect("probing the devices' streams"));
                let devices = std::sync::Mutex::new(Some(devices));
                $crate::run_rule(stringify!($rule), &expected, &|| {
                    let devices = devices.lock().unwrap_or_else(|p| p.into_inner()).take();
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

impl Devices for Vec<std::sync::Arc<dyn baton_core::backend::Device>> {
    fn into_devices(self) -> Option<Vec<std::sync::Arc<dyn baton_core::backend::Device>>> {
        Some(self)
    }
}

impl Devices for Option<Vec<std::sync::Arc<dyn baton_core::backend::Device>>> {
    fn into_devices(self) -> Option<Vec<std::sync::Arc<dyn baton_core::backend::Device>>> {
        self
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

/// Expands every contract rule into a `#[test]` that runs it under the
/// chaos wrapper for `$seeds` seeds (`BATON_CHAOS_SEEDS` overrides), each
/// item delayed by up to 200 µs; a failure names its seed.
#[macro_export]
macro_rules! chaos_contract_tests {
    ($open:path, $seeds:expr) => {
        $crate::chaos_contract_tests!(@each $open, $seeds;
            p_visible, h_release, q_fifo, q_nonblock, w_order, w_fail, w_bound, w_hold, m_order,
            h_own, r_own, d_return, c_order, c_cross, g_async, e_sticky, d_noblock, d_defer, d_cancel);
    };
    (@each $open:path, $seeds:expr; $($rule:ident),*) => {
        $(
            #[test]
            fn $rule() {
                $crate::chaos::for_seeds(
                    0..$crate::chaos::seed_count($seeds),
                    &$open,
                    std::time::Duration::from_micros(200),
                    &|devices| $crate::contract::$rule(&$crate::Fixture::new(devices)),
                );
            }
        )*
    };
}

/// Expands every op case into a `#[test]` for a backend; `after:` as for
/// [`contract_tests!`].
#[macro_export]
macro_rules! op_tests {
    ($open:path) => {
        $crate::op_tests!($open, after: $crate::nothing_after);
    };
    ($open:path, after: $after:path) => {
        $crate::op_tests!(@each $open, $after;
            op_get_rows, op_matmul_f32, op_matmul_f16, op_matmul_bf16, op_matmul_q8_0,
            op_matmul_q4_0, op_matmul_q4_1, op_matmul_q4_k, op_matmul_q5_k, op_matmul_q6_k,
            op_matmul_q8_k,
            op_matmul_batched_broadcast, op_matmul_strided_weight,
            op_add_broadcast, op_mul_broadcast, op_scale, op_rms_norm, op_rope_normal, op_rope_neox,
            op_softmax_causal, op_softmax_plain, op_silu, op_copy_into_f16_strided,
            op_copy_into_f32, op_contiguous_permuted, op_scatter_rows, op_softmax_at_positions);
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

/// A named check of the suite.
pub type Case = (&'static str, fn(&Fixture));

/// Every contract rule, by its test name (the rule ID in lower case), for
/// running the suite outside `cargo test` (`baton conformance`).
pub const CONTRACT_RULES: &[Case] = &[
    ("p_mono", contract::p_mono),
    ("p_visible", contract::p_visible),
    ("p_wait", contract::p_wait),
    ("p_timeout", contract::p_timeout),
    ("p_fail", contract::p_fail),
    ("h_release", contract::h_release),
    ("h_abandon", contract::h_abandon),
    ("q_fifo", contract::q_fifo),
    ("q_nonblock", contract::q_nonblock),
    ("w_order", contract::w_order),
    ("w_fail", contract::w_fail),
    ("w_foreign", contract::w_foreign),
    ("w_bound", contract::w_bound),
    ("w_hold", contract::w_hold),
    ("m_order", contract::m_order),
    ("h_own", contract::h_own),
    ("r_own", contract::r_own),
    ("d_return", contract::d_return),
    ("c_order", contract::c_order),
    ("c_cross", contract::c_cross),
    ("g_async", contract::g_async),
    ("e_sticky", contract::e_sticky),
    ("e_nopanic", contract::e_nopanic),
    ("d_noblock", contract::d_noblock),
    ("d_defer", contract::d_defer),
    ("d_cancel", contract::d_cancel),
];

/// Every op case, by its test name.
pub const OP_CASES: &[Case] = &[
    ("op_get_rows", ops::op_get_rows),
    ("op_matmul_f32", ops::op_matmul_f32),
    ("op_matmul_f16", ops::op_matmul_f16),
    ("op_matmul_bf16", ops::op_matmul_bf16),
    ("op_matmul_q8_0", ops::op_matmul_q8_0),
    ("op_matmul_q4_0", ops::op_matmul_q4_0),
    ("op_matmul_q4_1", ops::op_matmul_q4_1),
    ("op_matmul_q4_k", ops::op_matmul_q4_k),
    ("op_matmul_q5_k", ops::op_matmul_q5_k),
    ("op_matmul_q6_k", ops::op_matmul_q6_k),
    ("op_matmul_q8_k", ops::op_matmul_q8_k),
    ("op_matmul_batched_broadcast", ops::op_matmul_batched_broadcast),
    ("op_matmul_strided_weight", ops::op_matmul_strided_weight),
    ("op_add_broadcast", ops::op_add_broadcast),
    ("op_mul_broadcast", ops::op_mul_broadcast),
    ("op_scale", ops::op_scale),
    ("op_rms_norm", ops::op_rms_norm),
    ("op_rope_normal", ops::op_rope_normal),
    ("op_rope_neox", ops::op_rope_neox),
    ("op_softmax_causal", ops::op_softmax_causal),
    ("op_softmax_plain", ops::op_softmax_plain),
    ("op_silu", ops::op_silu),
    ("op_copy_into_f16_strided", ops::op_copy_into_f16_strided),
    ("op_copy_into_f32", ops::op_copy_into_f32),
    ("op_contiguous_permuted", ops::op_contiguous_permuted),
    ("op_scatter_rows", ops::op_scatter_rows),
    ("op_softmax_at_positions", ops::op_softmax_at_positions),
];
