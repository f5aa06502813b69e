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

use baton_core::graph::ATTENTION_BLOCK;
use baton_core::DType;

use super::blocks::BlockCopy;
use super::kv_cache::{rows_per_slot, KvCache, LayerCache};
use crate::config::LlamaConfig;
use crate::error::ModelError;

/// A slot's keys and values at positions `0..len` (and a hybrid model's
/// recurrent state, which is that of exactly `len` positions), in host memory
/// ([`Model::save_prefix`](crate::Model::save_prefix)).
#[derive(Debug)]
pub struct SavedPrefix {
    pub(crate) len: usize,
    /// Only a hybrid model's recurrent state, not the attention layers'
    /// keys and values (a checkpoint: the keys and values stay in the
    /// slot).
    pub(crate) recurrent_only: bool,
    /// The slot's frontier when saved (its rings' contents).
    pub(crate) frontier: usize,
    /// Per layer, keys then values, per KV head: the rows.
    pub(crate) chunks: Vec<Vec<u8>>,
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

/// Which layers' rows [`KvCache::prefix_views`] lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layers {
    /// Every layer's.
    All,
    /// The recurrent layers' state only (a checkpoint).
    Recurrent,
    /// All but a paged pool's blocks (which a copy shares instead).
    Unpaged,
}

impl KvCache {
    /// Rows of one slot in layer `l`'s cache: the ring's for a
    /// sliding-window layer with a ring, else the context.
    fn slot_rows(&self, config: &LlamaConfig, l: usize) -> usize {
        rows_per_slot(config, l, self.context, self.ring)
    }

    /// Whether layer `l`'s keys and values are blocks of a paged pool.
    /// (A layer reading another's keys and values, Gemma 4's shared ones,
    /// is not: its source's blocks are those.)
    fn is_paged(&self, config: &LlamaConfig, l: usize) -> bool {
        self.blocks.is_some()
            && matches!(self.layers.get(l), Some(LayerCache::Attention(..)))
            && config.kv_source(l) == l
            && self.slot_rows(config, l) == self.context
    }

    /// Bytes of one block of the pool: keys and values of every paged
    /// layer (0 without a paged cache).
    pub(crate) fn block_bytes(&self, config: &LlamaConfig) -> usize {
        match self.blocks {
            Some(_) => KvCache::pool_block_bytes(config, (self.context, self.ring), self.dtypes),
            None => 0,
        }
    }

    /// Block `block` of a paged layer's tensor `t` (`[kv_heads, pool rows,
    /// head_dim]`) for KV head `head`: its first `rows` rows.
    fn block_view(t: &TensorRef, (head, block, rows): (usize, usize, usize)) -> Result<TensorRef, ModelError> {
        let [_, pool_rows, head_dim] = t.shape().dims()[..] else {
            return Err(ModelError::Config(format!("a KV cache of shape {:?}", t.shape().dims())));
        };
        let row_bytes = t
            .dtype()
            .row_bytes(head_dim)
            .ok_or_else(|| ModelError::Config(format!("a {} KV cache row of {head_dim} values", t.dtype())))?;
        let at = t.offset() + (head * pool_rows + block * ATTENTION_BLOCK) * row_bytes;
        Ok(TensorRef::new(t.buffer(), at, t.dtype(), &[rows, head_dim])?)
    }

    /// Queues on `stream_of(layer)` copies of whole blocks of a paged pool
    /// (a write into a block another slot still holds: see
    /// [`BlockTables::prepare`](super::BlockTables::prepare)), every paged
    /// layer's keys and values.
    pub(crate) fn copy_blocks(
        &self,
        config: &LlamaConfig,
        copies: &[BlockCopy],
        stream_of: &dyn Fn(usize) -> Stream,
    ) -> Result<(), ModelError> {
        for (l, layer) in self.layers.iter().enumerate().filter(|&(l, _)| self.is_paged(config, l)) {
            for t in layer.tensors() {
                for head in 0..t.shape().dims()[0] {
                    for c in copies {
                        let src = Self::block_view(t, (head, c.from as usize, ATTENTION_BLOCK))?;
                        let dst = Self::block_view(t, (head, c.to as usize, ATTENTION_BLOCK))?;
                        stream_of(l).copy(&src, &dst, None)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The rows of slot `slot` that hold positions `0..len` (a
    /// sliding-window layer's whole ring; a paged layer's blocks), per
    /// layer, keys then values, per KV head, with each one's layer; `which`
    /// layers.
    fn prefix_views(
        &self,
        config: &LlamaConfig,
        (slot, len): (usize, usize),
        which: Layers,
    ) -> Result<Vec<(usize, TensorRef)>, ModelError> {
        let recurrent_only = which == Layers::Recurrent;
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
                LayerCache::Attention(..) if self.is_paged(config, l) => {
                    if which == Layers::All {
                        let table = self.blocks.as_ref().map_or(&[][..], |b| b.table(slot));
                        let blocks = len.div_ceil(ATTENTION_BLOCK);
                        if table.len() < blocks {
                            return Err(ModelError::Config(format!("slot {slot} holds fewer than {len} positions")));
                        }
                        for t in layer.tensors() {
                            for head in 0..t.shape().dims()[0] {
                                for (j, &block) in table[..blocks].iter().enumerate() {
                                    let rows = (len - j * ATTENTION_BLOCK).min(ATTENTION_BLOCK);
                                    views.push((l, Self::block_view(t, (head, block as usize, rows))?));
                                }
                            }
                        }
                    }
                    continue;
                }
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
        &mut self,
        config: &LlamaConfig,
        (from, to, len): (usize, usize, usize),
        stream_of: &dyn Fn(usize) -> Stream,
    ) -> Result<(), ModelError> {
        if from == to {
            return Err(ModelError::Config(format!("a KV copy from slot {from} to itself")));
        }
        // A paged cache's blocks are shared, not copied (a write into one
        // both hold copies it first); rings and recurrent state are copied.
        if let Some(tables) = self.blocks.as_mut() {
            tables.share(from, to, len);
        }
        let views = |slot| self.prefix_views(config, (slot, len), Layers::Unpaged);
        for ((l, src), (_, dst)) in views(from)?.into_iter().zip(views(to)?) {
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
        let which = if recurrent_only { Layers::Recurrent } else { Layers::All };
        let reads = self
            .prefix_views(config, (slot, len), which)?
            .into_iter()
            .map(|(l, view)| stream_of(l).read_async(&view))
            .collect::<Result<Vec<_>, _>>()?;
        let chunks = reads.into_iter().map(|r| r.wait()).collect::<Result<Vec<_>, _>>()?;
        Ok(SavedPrefix { len, recurrent_only, frontier, chunks })
    }

    /// Writes `saved` into slot `slot`, waiting for the writes.
    pub(crate) fn restore_prefix(
        &mut self,
        config: &LlamaConfig,
        slot: usize,
        saved: &SavedPrefix,
        stream_of: &dyn Fn(usize) -> Stream,
    ) -> Result<(), ModelError> {
        let which = if saved.recurrent_only { Layers::Recurrent } else { Layers::All };
        if slot >= self.slots {
            return Err(ModelError::Config(format!("slot {slot} (the cache has {} slots)", self.slots)));
        }
        // A paged cache: blocks of the slot's own for the saved positions,
        // the slot's tables as they were if the prefix does not fit.
        let before = self.blocks.clone();
        if let (Some(tables), Layers::All) = (self.blocks.as_mut(), which) {
            tables.truncate(slot, 0);
            if let Err(full) = tables.prepare(slot, 0, saved.len) {
                self.blocks = before;
                return Err(full.into());
            }
        }
        let views = self.prefix_views(config, (slot, saved.len), which);
        let fits = views.as_ref().is_ok_and(|views| {
            views.len() == saved.chunks.len() && views.iter().zip(&saved.chunks).all(|((_, v), c)| v.bytes() == c.len())
        });
        let views = match (views, fits) {
            (Ok(views), true) => views,
            (views, _) => {
                self.blocks = before;
                views?;
                return Err(ModelError::Config("a saved prefix of another cache's geometry".into()));
            }
        };
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
