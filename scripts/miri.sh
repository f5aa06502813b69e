#!/usr/bin/env bash
# Runs the unsafe core under Miri: baton-core's backend (buffers, host
# slots, streams: where its unsafe blocks are) and memory planner; the CPU
# backend's pool, bell, and the contract and op tests that exercise every
# unsafe path of it (raw buffer access, copies, executor slices, host
# slots); a sample of the model-based test of the safe async API (two
# short random cases over CPU, chaos and composite devices); and two of the
# attention kernel's tests. Left out:
# baton-core's sync tests (no unsafe code; the loom models of
# scripts/loom.sh check every interleaving of the sync core, and under Miri
# their timed waits take about 60 of the crate's 70 s), and the kernels
# (about 8 minutes; run with BATON_MIRI_KERNELS=1). Kernels run their portable scalar path under Miri
# (no runtime-detected AVX2 there). BATON_MIRI_ALL=1 runs every baton-core
# test and four model-based cases.
# Needs: rustup component add miri rust-src --toolchain nightly
set -euo pipefail
cd "$(dirname "$0")/.."
export MIRIFLAGS="${MIRIFLAGS:--Zmiri-disable-isolation}"
export CARGO_TARGET_DIR=target/miri
if [ "${BATON_MIRI_ALL:-0}" = 1 ]; then
  cargo +nightly miri test -p baton-core --lib
  cases=4
else
  cargo +nightly miri test -p baton-core --lib -- backend:: graph::
  cases=2
fi
cargo +nightly miri test -p baton-cpu -- pool:: bell:: \
  contract_block::h_own contract_block::c_order contract_block::m_order contract_block::d_defer \
  contract_block::d_return contract_block::e_sticky contract_block::q_fifo contract_block::r_own \
  ops::op_copy_into ops::op_matmul_batched ops::op_matmul_strided ops::op_get_rows \
  ops::op_softmax_causal ops::op_rope_normal ops::op_contiguous_permuted ops::op_add_broadcast \
  ops::op_attention_window
BATON_MODEL_CASES=$cases BATON_MODEL_OPS=12 cargo +nightly miri test -p baton-composite --test model_based \
  random_sequences_keep_the_contract
# The attention kernel on a q8_0 ring that crosses a segment edge (a byte
# view of decoded keys), its values read in place (an `align_to` view of
# an f32 cache's bytes) and decoded, and its argument checks.
cargo +nightly miri test -p baton-kernels --lib -- \
  attention::tests::a_ring_of_the_last_positions_gives_the_bits_of_the_whole_cache \
  attention::tests::rows_read_in_place_give_the_bits_of_rows_decoded_first \
  attention::tests::bad_arguments_are_errors
# The kernels' packing and portable packed tiles (about 8 minutes: outside
# CI's time budget; run with BATON_MIRI_KERNELS=1).
if [ "${BATON_MIRI_KERNELS:-0}" = 1 ]; then
  cargo +nightly miri test -p baton-kernels --lib packed
fi
