//! A sequence's first positions moved between cache slots and host memory:
//! copied from one slot to another on the device (llama.cpp's `seq_cp`),
//! so a request whose prompt starts with what a running sequence has
//! evaluated takes those positions instead of evaluating them again; and
//! saved to host memory and written back later (llama-server's
//! `--cache-ram`), so a prompt a slot held before it was reused is not
//! evaluated again either. Every position's keys and values are the same
//! bits whatever else was in its batch, so a copied or restored prefix
//! gives the bits an evaluation would.

use baton_core::backend::{Stream, TensorRef};

use baton_core::DType;

use super::kv_cache::{rows_per_slot, KvCache, LayerCache};
use crate::config::LlamaConfig;
use crate::error::ModelError;

/// A slot's keys and values at positions `0..len` (and a hybrid model's
/// recurrent state, which is that of exactly `len` positions), in host memory
/// ([`Model::save_prefix`](crate::Model::save_prefix)).
#[derive(Debug)]
pub struct SavedPrefix {
    len: usize,
    /// Only a hybrid model's recurrent state, not the attention layers'
    /// keys and values (a checkpoint: the keys and values stay in the
    /// slot).
    pub(crate) recurrent_only: bool,
    /// The slot's frontier when saved (its rings' contents).
    pub(crate) frontier: usize,
    /// Per layer, keys then values, per KV head: the rows.
    chunks: Vec<Vec<u8>>,
}

impl SavedPrefix {
    /// Positions it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no position.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Host bytes it takes.
    pub fn bytes(&self) -> usize {
        self.chunks.iter().map(Vec::len).sum()
    }
}

impl KvCache {
    /// Rows of one slot in layer `l`'s cache: the ring's for a
    /// sliding-window layer with a ring, else the context.
    fn slot_rows(&self, config: &LlamaConfig, l: usize) -> usize {
        rows_per_slot(config, l, self.context, self.ring)
    }

    /// The rows of slot `slot` that hold positions `0..len` (a
    /// sliding-window layer's whole ring), per layer, keys then values, per
    /// KV head, with each one's layer.
    fn prefix_views(
        &self,
        config: &LlamaConfig,
        (slot, len): (usize, usize),
        recurrent_only: bool,
    ) -> Result<Vec<(usize, TensorRef)>, ModelError> {
        if slot >= self.slots || len > self.context {
            return Err(ModelError::Config(format!(
                "positions 0..{len} of slot {slot} (the cache has {} slots of {})",
                self.slots, self.context
            )));
        }
        let mut views = Vec::with_capacity(self.layers.len() * 2 * config.kv_heads);
        for (l, layer) in self.layers.iter().enumerate() {
            let (k, v) = match layer {
                LayerCache::Attention(..) if recurrent_only => continue,
                // Another layer's keys and values (Gemma 4's shared ones):
                // that layer's views hold them.
                LayerCache::Attention(..) if config.kv_source(l) != l => continue,
                LayerCache::Attention(k, v) => (k, v),
                LayerCache::Recurrent(conv, delta) => {
                    // The slot's whole state: it holds exactly the positions
                    // the slot evaluated (the model checks `len` is that).
                    for t in [conv, delta] {
                        let shape = t.shape();
                        let per_slot: usize = shape.dims()[1..].iter().product();
                        let at = t.offset() + slot * per_slot * 4;
                        views.push((l, TensorRef::new(t.buffer(), at, DType::F32, &[per_slot])?));
                    }
                    continue;
                }
            };
            let slot_rows = self.slot_rows(config, l);
            let rows = if slot_rows < self.context { slot_rows } else { len };
            let attention = config.layer_attention(l);
            let head_dim = attention.head_dim;
            for t in [k, v] {
                let row_bytes = t.dtype().row_bytes(head_dim).ok_or_else(|| {
                    ModelError::Config(format!("a {} KV cache row of {} values", t.dtype(), head_dim))
                })?;
                for head in 0..attention.kv_heads {
                    let at = t.offset() + ((head * self.slots + slot) * slot_rows) * row_bytes;
                    views.push((l, TensorRef::new(t.buffer(), at, t.dtype(), &[rows, head_dim])?));
                }
            }
        }
        Ok(views)
    }

    /// Queues on `stream_of(layer)` copies of slot `from`'s positions
    /// `0..len` into slot `to` (the caller has checked that `from`'s rings
    /// still hold the window before `len`). The streams' hazard tracking
    /// orders the copies after the writes of those rows and before later
    /// work on them.
    pub(crate) fn copy_prefix(
        &self,
        config: &LlamaConfig,
        (from, to, len): (usize, usize, usize),
        stream_of: &dyn Fn(usize) -> Stream,
    ) -> Result<(), ModelError> {
        if from == to {
            return Err(ModelError::Config(format!("a KV copy from slot {from} to itself")));
        }
        let pairs = self.prefix_views(config, (from, len), false)?.into_iter().zip(self.prefix_views(
            config,
            (to, len),
            false,
        )?);
        for ((l, src), (_, dst)) in pairs {
            stream_of(l).copy(&src, &dst, None)?;
        }
        Ok(())
    }

    /// Reads slot `slot`'s positions `0..len` into host memory, waiting
    /// for the reads.
    pub(crate) fn save_prefix(
        &self,
        config: &LlamaConfig,
        (slot, len, frontier): (usize, usize, usize),
        recurrent_only: bool,
        stream_of: &dyn Fn(usize) -> Stream,
    ) -> Result<SavedPrefix, ModelError> {
        let reads = self
            .prefix_views(config, (slot, len), recurrent_only)?
            .into_iter()
            .map(|(l, view)| stream_of(l).read_async(&view))
            .collect::<Result<Vec<_>, _>>()?;
        let chunks = reads.into_iter().map(|r| r.wait()).collect::<Result<Vec<_>, _>>()?;
        Ok(SavedPrefix { len, recurrent_only, frontier, chunks })
    }

    /// Writes `saved` into slot `slot`, waiting for the writes.
    pub(crate) fn restore_prefix(
        &self,
        config: &LlamaConfig,
        slot: usize,
        saved: &SavedPrefix,
        stream_of: &dyn Fn(usize) -> Stream,
    ) -> Result<(), ModelError> {
        let views = self.prefix_views(config, (slot, saved.len), saved.recurrent_only)?;
        let fits = views.len() == saved.chunks.len()
            && views.iter().zip(&saved.chunks).all(|((_, v), c)| v.bytes() == c.len());
        if !fits {
            return Err(ModelError::Config("a saved prefix of another cache's geometry".into()));
        }
        let writes = views
            .iter()
            .zip(&saved.chunks)
            .map(|((l, view), chunk)| stream_of(*l).write_async(view, chunk.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        for write in writes {
            write.wait()?;
        }
        Ok(())
    }
}
