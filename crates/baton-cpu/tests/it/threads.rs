//! Ops whose work a device splits differently by its number of threads:
//! a device of three threads beside one of one, so the split paths run on
//! any machine (the conformance suite's `cpu:0,cpu:1` may have one thread
//! each).

use baton_conformance::{ops, Fixture};
use std::sync::Arc;

use baton_cpu::CpuDevice;

fn devices() -> Fixture {
    let open = |name: &str, threads| Arc::new(CpuDevice::new(name, Vec::new(), threads, 0.5).expect("a CPU device"));
    Fixture::new([open("cpu:threads3", 3), open("cpu:threads1", 1)])
}

/// A decode step over a long cache: the keys split over the threads by
/// segment, then combined.
#[test]
fn attention_over_a_long_cache_split_by_key_segments() {
    ops::op_attention_long(&devices());
}

/// Prompt rows split by chunks of rows.
#[test]
fn attention_of_prompt_rows_split_by_chunks() {
    ops::op_attention_f16(&devices());
    ops::op_attention_window(&devices());
}

/// Every sequence of a batched step in one attention op (in slots): runs
/// of rows over their own caches share the threads.
#[test]
fn attention_in_slots_over_threads() {
    ops::op_attention_in_slots(&devices());
    ops::op_attention_in_blocks(&devices());
}
