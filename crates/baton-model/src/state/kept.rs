//! A hybrid model's recurrent states kept after each position of a
//! verification step, so that the sequence can be cut back to the drafts
//! it accepts without evaluating them again (vLLM's approach).
//!
//! A recurrent layer's state folds every position in: once a step has
//! evaluated drafted tokens, the state holds them all. So while such a
//! step runs, the recurrent ops also copy the state after each of its rows
//! into rows of scratch kept here (`kept`, see
//! [`KeptStates`](baton_core::graph::KeptStates)); when the sequence has
//! accepted some of the drafts, the row after the last accepted position
//! is copied back into its slot. The ops take such a step's rows one by
//! one, so a kept row holds the bits decoding those tokens one at a time
//! would leave.
//!
//! The scratch holds `rows` rows per run in flight: the rows a step keeps
//! stay valid until as many more steps are submitted as runs in flight
//! (the rule for a step's logits, too).

use baton_core::backend::{Device, Stream, TensorRef};
use baton_core::DType;

use super::kv_cache::LayerCache;
use crate::config::LlamaConfig;
use crate::error::ModelError;

/// A slot's rows kept by its last step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Run {
    /// Positions the slot held before the step.
    past: usize,
    /// The first kept row: row `first + j` holds the state after position
    /// `past + j` (so of `past + j + 1` positions).
    first: usize,
    /// Rows kept.
    count: usize,
    /// The run in flight (its part of the scratch) and the serial of the
    /// step there: a later step there overwrites the rows.
    part: usize,
    serial: u64,
}

/// The kept states of every recurrent layer, and what each slot's last step
/// kept.
#[derive(Debug, Default)]
pub struct KeptRows {
    /// Per recurrent layer: its index, its kept convolution and delta-rule
    /// states (`[rows × parts, ...]`, one slot's shape per row).
    layers: Vec<(usize, TensorRef, TensorRef)>,
    /// Rows per run in flight.
    rows: usize,
    /// Per slot, what its last step kept.
    runs: Vec<Option<Run>>,
    /// Per run in flight, the serial of its last step.
    serials: Vec<u64>,
}

/// A recurrent state tensor's `row`-th slot (or kept row), flat.
fn row_view(t: &TensorRef, row: usize) -> Result<TensorRef, ModelError> {
    let per_row: usize = t.shape().dims()[1..].iter().product();
    Ok(TensorRef::new(t.buffer(), t.offset() + row * per_row * 4, DType::F32, &[per_row])?)
}

impl KeptRows {
    /// Scratch for `rows` kept rows per run in flight (`parts` of them),
    /// on each recurrent layer's device (`device_of(l)`), for `slots`
    /// slots.
    pub(crate) fn new(
        config: &LlamaConfig,
        (rows, parts, slots): (usize, usize, usize),
        device_of: &dyn Fn(usize) -> std::sync::Arc<dyn Device>,
    ) -> Result<KeptRows, ModelError> {
        let mut layers = Vec::new();
        if let Some(r) = config.recurrent.as_ref().filter(|_| rows > 0) {
            for l in (0..config.layers).filter(|&l| r.is_recurrent(l)) {
                let device = device_of(l);
                let alloc = |dims: &[usize]| -> Result<TensorRef, ModelError> {
                    let bytes = dims.iter().product::<usize>() * 4;
                    Ok(TensorRef::new(&device.alloc(bytes)?, 0, DType::F32, dims)?)
                };
                let conv = alloc(&r.conv_state_dims(rows * parts))?;
                let delta = alloc(&r.delta_state_dims(rows * parts))?;
                layers.push((l, conv, delta));
            }
        }
        Ok(KeptRows { layers, rows, runs: vec![None; slots], serials: vec![0; parts] })
    }

    /// Rows a step may keep (0: none).
    pub fn rows(&self) -> usize {
        if self.layers.is_empty() {
            0
        } else {
            self.rows
        }
    }

    /// Rows of each layer's kept states (every run in flight's).
    pub(crate) fn leaf_rows(&self) -> usize {
        self.rows() * self.serials.len()
    }

    /// Bytes of the scratch.
    pub fn bytes(&self) -> usize {
        self.layers.iter().map(|(_, c, d)| c.bytes() + d.bytes()).sum()
    }

    /// Each recurrent layer's kept convolution and delta-rule states, for
    /// the graph's leaves.
    pub(crate) fn tensors(&self) -> impl Iterator<Item = (usize, &TensorRef, &TensorRef)> {
        self.layers.iter().map(|(l, c, d)| (*l, c, d))
    }

    /// The kept row of each row of a step submitted in run slot `part`
    /// (-1: not kept), for its sequences `(slot, past, tokens, wanted)` in
    /// order: a wanted sequence of several tokens keeps the states after
    /// each token but its last (the state after the last is its slot's), as
    /// long as the scratch has room; every sequence's earlier rows are
    /// forgotten.
    pub(crate) fn assign(&mut self, part: usize, seqs: &[(usize, usize, usize, bool)]) -> Vec<i32> {
        let Some(serial) = self.serials.get_mut(part) else { return Vec::new() };
        *serial += 1;
        let serial = *serial;
        let base = part * self.rows;
        let mut used = 0;
        let mut keep = Vec::with_capacity(seqs.iter().map(|s| s.2).sum());
        for &(slot, past, tokens, wanted) in seqs {
            let count = tokens.saturating_sub(1);
            let fits = wanted && count > 0 && !self.layers.is_empty() && used + count <= self.rows;
            let run = fits.then_some(Run { past, first: base + used, count, part, serial });
            if let Some(entry) = self.runs.get_mut(slot) {
                *entry = run;
            }
            match run {
                Some(run) => {
                    keep.extend((run.first..run.first + count).map(|r| r as i32));
                    keep.push(-1);
                    used += count;
                }
                None => keep.extend(std::iter::repeat_n(-1, tokens)),
            }
        }
        keep
    }

    /// Forgets what slot `slot`'s last step kept (its state was replaced).
    pub(crate) fn forget(&mut self, slot: usize) {
        if let Some(run) = self.runs.get_mut(slot) {
            *run = None;
        }
    }

    /// The positions slot `slot` can be cut back to: those its last step
    /// kept the state of, while no later step overwrote them.
    pub(crate) fn kept_positions(&self, slot: usize) -> std::ops::Range<usize> {
        match self.runs.get(slot).copied().flatten() {
            Some(run) if self.serials.get(run.part) == Some(&run.serial) => run.past + 1..run.past + 1 + run.count,
            _ => 0..0,
        }
    }

    /// Queues on `stream_of(layer)` the copies of slot `slot`'s kept state
    /// of `len` positions into the slot's state (`cache`'s layers), and
    /// forgets the slot's kept rows. The caller has checked that `len` is
    /// one of [`kept_positions`](Self::kept_positions).
    pub(crate) fn restore(
        &mut self,
        cache: &[LayerCache],
        (slot, len): (usize, usize),
        stream_of: &dyn Fn(usize) -> Stream,
    ) -> Result<(), ModelError> {
        let Some(run) = self.runs.get(slot).copied().flatten() else {
            return Err(ModelError::Config(format!("slot {slot} kept no state")));
        };
        let row = run.first + (len - run.past - 1);
        for (l, conv_kept, delta_kept) in &self.layers {
            let LayerCache::Recurrent(conv, delta) = &cache[*l] else {
                return Err(ModelError::Config(format!("layer {l} kept states but is not recurrent")));
            };
            let stream = stream_of(*l);
            stream.copy(&row_view(conv_kept, row)?, &row_view(conv, slot)?, None)?;
            stream.copy(&row_view(delta_kept, row)?, &row_view(delta, slot)?, None)?;
        }
        self.forget(slot);
        Ok(())
    }
}
