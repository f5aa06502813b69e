//! The KV cache of a model's sequences: one slot of `context` positions a
//! sequence, every layer's keys and values, sliding-window layers as rings
//! of their last positions, of any float or block type (`-ctk`, `-ctv`).

use std::collections::HashMap;
use std::sync::Arc;

use baton_composite::CompositeDevice;
use baton_core::backend::{Buffer, Device, TensorRef};
use baton_core::graph::ATTENTION_BLOCK;
use baton_core::DType;

use super::blocks::BlockTables;
use crate::config::LlamaConfig;
use crate::error::ModelError;
use crate::tensor_parallel::TensorShares;

/// What one layer keeps of its sequences between steps.
#[derive(Clone, Debug)]
pub enum LayerCache {
    /// An attention layer's keys and values, both `[kv_heads, slots ×
    /// rows, head_dim]`.
    Attention(TensorRef, TensorRef),
    /// A recurrent layer's state (f32, not indexed by position): the
    /// convolution's last inputs `[slots, conv_dim, conv_kernel - 1]` and
    /// the delta rule's `[slots, value_heads, head_dim, head_dim]` (see
    /// [`Recurrent`](crate::hybrid::Recurrent)).
    Recurrent(TensorRef, TensorRef),
}

impl LayerCache {
    /// Its two tensors (keys and values, or the two states).
    pub fn tensors(&self) -> [&TensorRef; 2] {
        match self {
            LayerCache::Attention(a, b) | LayerCache::Recurrent(a, b) => [a, b],
        }
    }

    /// Bytes it holds.
    pub fn bytes(&self) -> usize {
        self.tensors().iter().map(|t| t.bytes()).sum()
    }
}

/// The KV cache of every layer: keys and values both `[kv_heads, slots ×
/// context, head_dim]`, so that attention reads a block of positions as
/// contiguous rows (whole blocks of a quantized type). Slot `s` (one
/// sequence) holds positions `s × context..(s + 1) × context`. A hybrid
/// model's recurrent layers hold their state per slot instead.
pub struct KvCache {
    /// Per layer: keys and values, or a recurrent layer's state.
    pub layers: Vec<LayerCache>,
    /// Element types of the keys and of the values.
    pub dtypes: KvTypes,
    /// Positions of one slot.
    pub context: usize,
    /// Sequences it holds.
    pub slots: usize,
    /// Rows of one slot in a sliding-window layer's cache, if they are a
    /// ring of the last positions (position `p` at row `p mod ring`)
    /// rather than every position; see [`ring_rows`].
    pub ring: Option<usize>,
    /// A paged cache's tables: the attention layers without a ring hold
    /// one pool of blocks (`[kv_heads, blocks × ATTENTION_BLOCK,
    /// head_dim]`) that every slot's table points into, rather than
    /// `context` rows per slot (see [`BlockTables`]).
    pub blocks: Option<BlockTables>,
}

/// Rows of a sliding-window layer's ring for prompt batches of up to
/// `batch` tokens: the window, plus room for a batch's new positions not to
/// overwrite the ones its first rows still see, in whole blocks of the
/// attention kernel. `None` when the model has no such layer or a ring would
/// not be smaller than `context`.
pub fn ring_rows(config: &LlamaConfig, batch: usize, context: usize) -> Option<usize> {
    let window = (0..config.layers).filter_map(|l| config.layer_attention(l).window).max()?;
    let rows = (window + batch).next_multiple_of(baton_core::graph::ATTENTION_BLOCK);
    (rows < context).then_some(rows)
}

/// Rows of one slot in layer `l`'s cache: the ring's rows for a
/// sliding-window layer whose cache has rings, else the whole context.
/// The one rule for them: allocating, copying, saving and restoring all
/// ask it.
pub(crate) fn rows_per_slot(config: &LlamaConfig, l: usize, context: usize, ring: Option<usize>) -> usize {
    // (A paged cache's layers without a ring hold blocks of a pool instead:
    // `KvCache::layer_rows`.)
    match (config.layer_attention(l).window, ring) {
        (Some(_), Some(rows)) => rows,
        _ => context,
    }
}

/// Element types of a KV cache's keys and values (llama.cpp's `-ctk` and
/// `-ctv`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KvTypes {
    /// The keys'.
    pub k: DType,
    /// The values'.
    pub v: DType,
}

impl KvTypes {
    /// Both of one type.
    pub fn same(dtype: DType) -> KvTypes {
        KvTypes { k: dtype, v: dtype }
    }

    /// Bytes of one position of the widest layer (keys and values of every
    /// KV head), or an error naming a type whose blocks do not divide a
    /// layer's head size.
    pub fn position_bytes(&self, config: &LlamaConfig) -> Result<usize, ModelError> {
        let mut most = 0;
        for l in 0..config.layers {
            let layer = config.layer_attention(l);
            let row = |dtype: DType| {
                dtype.row_bytes(layer.head_dim).ok_or_else(|| {
                    ModelError::Config(format!(
                        "a {dtype} KV cache needs a head size that is a multiple of {} (this model's is {})",
                        dtype.block_elems(),
                        layer.head_dim
                    ))
                })
            };
            most = most.max(layer.kv_heads * (row(self.k)? + row(self.v)?));
        }
        Ok(most)
    }
}

impl KvCache {
    /// Bytes of one block of a paged pool of this shape: keys and values
    /// of [`ATTENTION_BLOCK`] positions in every layer the pool holds (an
    /// attention layer with its own keys and values and no ring).
    pub fn pool_block_bytes(config: &LlamaConfig, (context, ring): (usize, Option<usize>), dtypes: KvTypes) -> usize {
        let recurrent = |l| config.recurrent.as_ref().is_some_and(|r| r.is_recurrent(l));
        (0..config.layers)
            .filter(|&l| {
                !recurrent(l) && config.kv_source(l) == l && rows_per_slot(config, l, context, ring) == context
            })
            .map(|l| {
                let layer = config.layer_attention(l);
                let row = |dtype: DType| dtype.row_bytes(layer.head_dim).unwrap_or(0);
                ATTENTION_BLOCK * layer.kv_heads * (row(dtypes.k) + row(dtypes.v))
            })
            .sum()
    }

    /// Rows of layer `l`'s keys (and values): a ring's or a slot's context
    /// per slot, or a paged cache's pool.
    pub fn layer_rows(&self, config: &LlamaConfig, l: usize) -> usize {
        Self::rows_of(config, l, (self.context, self.slots, self.ring), self.blocks.as_ref())
    }

    fn rows_of(
        config: &LlamaConfig,
        l: usize,
        (context, slots, ring): (usize, usize, Option<usize>),
        blocks: Option<&BlockTables>,
    ) -> usize {
        let per_slot = rows_per_slot(config, l, context, ring);
        match blocks {
            Some(tables) if per_slot == context => tables.blocks() * ATTENTION_BLOCK,
            _ => slots * per_slot,
        }
    }

    /// Allocates a zeroed cache for `slots` sequences of `context` positions,
    /// each layer's on the device `device_of(layer)`; sliding-window layers
    /// hold rings of `ring` rows per slot (see [`ring_rows`]). With `pool`
    /// (a count of blocks), the layers without a ring are a paged pool of
    /// that many blocks instead of a slot each (memory becomes resident as
    /// blocks are first written: see `baton_cpu`'s buffers).
    pub fn new(
        config: &LlamaConfig,
        (context, slots, ring, pool): (usize, usize, Option<usize>, Option<usize>),
        dtypes: KvTypes,
        devices: &[Arc<dyn Device>],
        device_of: &dyn Fn(usize) -> usize,
    ) -> Result<KvCache, ModelError> {
        dtypes.position_bytes(config)?;
        let blocks = pool.map(|blocks| BlockTables::new(slots, context, blocks));
        let shapes: Vec<[(DType, Vec<usize>); 2]> = (0..config.layers)
            .map(|l| match config.recurrent.as_ref().filter(|r| r.is_recurrent(l)) {
                Some(r) => {
                    [(DType::F32, r.conv_state_dims(slots).to_vec()), (DType::F32, r.delta_state_dims(slots).to_vec())]
                }
                None => {
                    // A layer that reads an earlier one's keys and values
                    // holds none of its own.
                    let layer = config.layer_attention(l);
                    let rows = match config.kv_source(l) == l {
                        true => Self::rows_of(config, l, (context, slots, ring), blocks.as_ref()),
                        false => 0,
                    };
                    let dims = vec![layer.kv_heads, rows, layer.head_dim];
                    [(dtypes.k, dims.clone()), (dtypes.v, dims)]
                }
            })
            .collect();
        let bytes = |(dtype, dims): &(DType, Vec<usize>)| {
            let row = dims.last().copied().unwrap_or(0);
            dims.iter().product::<usize>() / row.max(1) * dtype.row_bytes(row).unwrap_or(0)
        };
        let mut layers = Vec::with_capacity(config.layers);
        let mut buffers: HashMap<usize, (Buffer, usize)> = HashMap::new();
        for (d, device) in devices.iter().enumerate() {
            let total: usize = (0..config.layers)
                .filter(|&l| device_of(l) == d)
                .map(|l| bytes(&shapes[l][0]) + bytes(&shapes[l][1]))
                .sum();
            if total > 0 {
                buffers.insert(d, (device.alloc(total)?, 0));
            }
        }
        for (l, [first, second]) in shapes.iter().enumerate() {
            if let Some(source) = Some(config.kv_source(l)).filter(|&s| s != l) {
                let shared = layers.get(source).cloned();
                layers
                    .push(shared.ok_or_else(|| ModelError::Config(format!("layer {l} shares a later layer's cache")))?);
                continue;
            }
            let entry =
                buffers.get_mut(&device_of(l)).ok_or_else(|| ModelError::Config(format!("layer {l} has no device")))?;
            let (buffer, next) = (&entry.0, entry.1);
            let a = TensorRef::new(buffer, next, first.0, &first.1)?;
            let b = TensorRef::new(buffer, next + bytes(first), second.0, &second.1)?;
            entry.1 += bytes(first) + bytes(second);
            layers.push(match config.recurrent.as_ref().is_some_and(|r| r.is_recurrent(l)) {
                true => LayerCache::Recurrent(a, b),
                false => LayerCache::Attention(a, b),
            });
        }
        Ok(KvCache { layers, dtypes, context, slots, ring, blocks })
    }

    /// A zeroed cache for `slots` sequences of `context` positions on the
    /// composite `device`, each layer's keys and values split by KV heads
    /// as `shares` says.
    pub fn new_tensor_parallel(
        config: &LlamaConfig,
        (context, slots, ring): (usize, usize, Option<usize>),
        dtypes: KvTypes,
        device: &CompositeDevice,
        shares: &TensorShares,
    ) -> Result<KvCache, ModelError> {
        dtypes.position_bytes(config)?;
        if config.recurrent.is_some() {
            return Err(ModelError::Config("a hybrid model's recurrent layers are not split by tensor".into()));
        }
        let mut layers = Vec::with_capacity(config.layers);
        for l in 0..config.layers {
            let dims = [config.kv_heads, slots * rows_per_slot(config, l, context, ring), config.head_dim];
            let k = device.alloc_split(dtypes.k, &dims, shares.cache())?;
            let v = device.alloc_split(dtypes.v, &dims, shares.cache())?;
            layers.push(LayerCache::Attention(k, v));
        }
        Ok(KvCache { layers, dtypes, context, slots, ring, blocks: None })
    }
}
