//! Every check of the suite, listed once: the contract rules and the op
//! cases. The test macros of the crate root expand these lists into
//! `#[test]`s; [`CONTRACT_RULES`] and [`OP_CASES`] are the same lists as
//! functions, for running the suite outside `cargo test` (`baton
//! conformance`) and for checking a rule's name.
//!
//! A list macro takes the macro to call as `scope::name` (`$crate::op_tests`
//! from the crate root's macros, `self::case_lists` here), so it names no
//! item of the crate itself.

use crate::contract;
use crate::ops;
use crate::util::Fixture;

/// Every contract rule, once: its test name (the rule ID in lower case) and
/// whether [`chaos_contract_tests!`](crate::chaos_contract_tests) runs it under the chaos wrapper too
/// (`chaos`) or not (`plain`; P-MONO, P-WAIT and P-TIMEOUT, for one, use no
/// device at all). Calls
/// `$scope::$callback! { $args ; rule: kind, ... }`: the test macros,
/// [`CONTRACT_RULES`] and the chaos tests are all made from this list.
#[doc(hidden)]
#[macro_export]
macro_rules! for_each_contract_rule {
    ($scope:tt :: $callback:ident { $($args:tt)* }) => {
        $scope::$callback! { $($args)* ;
            p_mono: plain, p_visible: chaos, p_wait: plain, p_timeout: plain, p_fail: plain,
            h_release: chaos, h_abandon: plain, q_fifo: chaos, q_nonblock: chaos,
            w_order: chaos, w_fail: chaos, w_foreign: plain, w_bound: chaos, w_hold: chaos,
            g_sealed: chaos, m_order: chaos, h_own: chaos, r_own: chaos, d_return: chaos, c_order: chaos,
            c_cross: chaos, g_async: chaos, e_sticky: chaos, e_nopanic: plain,
            d_noblock: chaos, d_defer: chaos, d_cancel: chaos
        }
    };
}

/// Every op case, once, by its test name (a function of [`ops`](crate::ops)). Calls
/// `$scope::$callback! { $args ; case, ... }`: [`op_tests!`](crate::op_tests) and
/// [`OP_CASES`] are made from this list.
#[doc(hidden)]
#[macro_export]
macro_rules! for_each_op_case {
    ($scope:tt :: $callback:ident { $($args:tt)* }) => {
        $scope::$callback! { $($args)* ;
            op_get_rows, op_matmul_f32, op_matmul_f16, op_matmul_bf16, op_matmul_q8_0,
            op_matmul_q4_0, op_matmul_q4_1, op_matmul_q5_0, op_matmul_q5_1, op_matmul_q2_k,
            op_matmul_q3_k, op_matmul_q4_k, op_matmul_q5_k, op_matmul_q6_k, op_matmul_q8_k, op_matmul_mxfp4,
            op_matmul_batched_broadcast, op_matmul_strided_weight,
            op_add_broadcast, op_mul_broadcast, op_scale, op_rms_norm, op_rope_normal, op_rope_neox,
            op_softmax_causal, op_softmax_plain, op_silu, op_gelu, op_copy_into_f16_strided,
            op_copy_into_f32, op_contiguous_permuted, op_scatter_rows, op_softmax_at_positions,
            op_softmax_window, op_attention_f16, op_attention_window, op_attention_q8_0, op_attention_q4_0_keys,
            op_scatter_rows_q8_0, op_attention_ring, op_attention_long, op_attention_in_slots, op_attention_in_blocks,
            op_top_k_and_take_columns, op_sum_rows, op_matmul_id, op_matmul_id_share, op_attention_sinks, op_rope_yarn,
            op_rope_rotated_pairs, op_swiglu_clamped, op_sigmoid_softplus_l2_norm, op_ssm_conv, op_gated_delta_net,
            op_recurrent_kept_states
        }
    };
}

/// A named check of the suite.
pub type Case = (&'static str, fn(&Fixture));

macro_rules! case_lists {
    (contract; $($rule:ident: $kind:ident),*) => {
        /// Every contract rule, by its test name (the rule ID in lower case), for
        /// running the suite outside `cargo test` (`baton conformance`).
        pub const CONTRACT_RULES: &[Case] = &[$((stringify!($rule), contract::$rule)),*];
    };
    (ops; $($case:ident),*) => {
        /// Every op case, by its test name.
        pub const OP_CASES: &[Case] = &[$((stringify!($case), ops::$case)),*];
    };
}
use case_lists;

for_each_contract_rule!(self::case_lists { contract });
for_each_op_case!(self::case_lists { ops });

#[cfg(test)]
mod tests {
    use baton_core::DType;

    /// A device may declare any real-valued type a weight type; each has its
    /// matmul case (the row lookup case takes every declared type).
    #[test]
    fn every_weight_type_a_device_may_declare_has_a_matmul_case() {
        for dtype in DType::ALL.into_iter().filter(|t| t.is_float()) {
            let case = format!("op_matmul_{}", dtype.name());
            assert!(super::OP_CASES.iter().any(|(name, _)| *name == case), "no op case {case}");
        }
    }
}
