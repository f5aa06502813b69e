//! What an op's kernel uses besides its tensors: the device (its thread
//! pool), scratch per pool thread, a conversion buffer and the rotary
//! angles of recent positions; kept by the stream's executor.

use std::sync::Arc;

use baton_core::loom::Mutex;
use baton_core::Parallel;
use baton_kernels::{AttentionScratch, Scratch};

use super::rope_cache::RopeCache;
use crate::device_shared::CpuDeviceShared;

/// The kernels' workspace of one stream.
pub(crate) struct Workspace {
    pub(crate) device: Arc<CpuDeviceShared>,
    pub(crate) scratch: Vec<Mutex<Scratch>>,
    /// The attention kernel's blocks of keys and values, per pool thread.
    pub(crate) attention: Vec<Mutex<AttentionScratch>>,
    pub(crate) convert: Vec<u8>,
    /// Rotary angles of recent positions (`rope_cache`).
    pub(crate) rope: Mutex<RopeCache>,
    /// The input of the last op run, if it was a product: a product of the
    /// same input right after it reuses its quantized rows (nothing has
    /// written them since: the only op between wrote its own output, and
    /// the plan never places an output over an input still to be read).
    pub(crate) last_product_input: Option<baton_core::graph::NodeId>,
    /// The experts' products' rows gathered by expert, their outputs and
    /// one activation scratch per expert (`experts`).
    pub(crate) experts: super::expert_scratch::ExpertScratch,
}

impl Workspace {
    pub(crate) fn new(device: Arc<CpuDeviceShared>) -> Self {
        let threads = device.pool_threads();
        Workspace {
            device,
            scratch: (0..threads).map(|_| Mutex::new(Scratch::new())).collect(),
            attention: (0..threads).map(|_| Mutex::new(AttentionScratch::default())).collect(),
            convert: Vec::new(),
            rope: Mutex::new(RopeCache::default()),
            last_product_input: None,
            experts: super::expert_scratch::ExpertScratch::default(),
        }
    }
}

/// Maps contiguous row ranges over the pool when there is enough work.
pub(crate) fn for_rows(
    exec: &Workspace,
    rows: usize,
    row_elems: usize,
    task: &(dyn Fn(std::ops::Range<usize>) + Sync),
) {
    let threads = exec.device.pool_threads();
    if threads == 1 || rows < 2 || rows * row_elems < 16 * 1024 {
        task(0..rows);
        return;
    }
    exec.device.pool.run(&|t| task(baton_core::parallel::split_range(rows, threads, t, 1)));
}
