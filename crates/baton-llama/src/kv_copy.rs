//! Copies of a sequence's keys and values from one cache slot to another
//! (llama.cpp's `seq_cp`): a request whose prompt starts with what a
//! running sequence has evaluated takes those positions as a copy on the
//! device instead of evaluating them again. Every position's keys and
//! values are the same bits whatever else was in its batch, so the copy
//! gives the bits an evaluation would.

use baton_core::backend::{Stream, TensorRef};

use crate::config::LlamaConfig;
use crate::error::ModelError;
use crate::weights::KvCache;

impl KvCache {
    /// Rows of one slot in layer `l`'s cache: the ring's for a
    /// sliding-window layer with a ring, else the context.
    fn slot_rows(&self, config: &LlamaConfig, l: usize) -> usize {
        match (config.layer_attention(l).window, self.ring) {
            (Some(_), Some(rows)) => rows,
            _ => self.context,
        }
    }

    /// Queues on `stream_of(layer)` copies of slot `from`'s positions
    /// `0..len` into slot `to`: those rows of every layer, or a
    /// sliding-window layer's whole ring (the caller has checked the ring
    /// still holds the window before `len`). The streams' hazard tracking
    /// orders the copies after the writes of those rows and before later
    /// work on them. The slots must differ and exist.
    pub(crate) fn copy_prefix(
        &self,
        config: &LlamaConfig,
        (from, to, len): (usize, usize, usize),
        stream_of: &dyn Fn(usize) -> Stream,
    ) -> Result<(), ModelError> {
        if from >= self.slots || to >= self.slots || len > self.context || from == to {
            return Err(ModelError::Config(format!("a KV copy of {len} positions from slot {from} to slot {to}")));
        }
        for (l, (k, v)) in self.layers.iter().enumerate() {
            let stream = stream_of(l);
            let slot_rows = self.slot_rows(config, l);
            let rows = if slot_rows < self.context { slot_rows } else { len };
            for t in [k, v] {
                let row_bytes = t.dtype().row_bytes(config.head_dim).ok_or_else(|| {
                    ModelError::Config(format!("a {} KV cache row of {} values", t.dtype(), config.head_dim))
                })?;
                for head in 0..config.kv_heads {
                    let at = |slot: usize| t.offset() + ((head * self.slots + slot) * slot_rows) * row_bytes;
                    let dims = [rows, config.head_dim];
                    let src = TensorRef::new(t.buffer(), at(from), t.dtype(), &dims)?;
                    let dst = TensorRef::new(t.buffer(), at(to), t.dtype(), &dims)?;
                    stream.copy(&src, &dst, None)?;
                }
            }
        }
        Ok(())
    }
}
