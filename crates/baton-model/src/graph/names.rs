//! The names of a step graph's inputs and state leaves, which the model
//! binds to tensors by name (the caches, the recurrent states, the
//! per-step index inputs).

/// Name of layer `l`'s attention rows leaf: a scratch of `[batch, heads ×
/// head_dim]` where the attention outputs of several sequences are put
/// together before the output projection (only in batches of several).
pub fn attention_rows_name(l: usize) -> String {
    format!("attn.rows.{l}")
}

/// Name of the input that picks the rows that give logits: each
/// sequence's last row, or every row of some ([`BatchShape::logit_rows`](crate::BatchShape::logit_rows))
/// (batches of several sequences).
pub const LOGIT_ROWS: &str = "logit_rows";

/// Name of the input that picks the rows whose hidden states a batch
/// outputs besides its logits ([`BatchShape::hidden_rows`](crate::BatchShape::hidden_rows)).
pub const HIDDEN_ROWS: &str = "hidden_rows";

/// Name of the input of each token's row in a sliding-window layer's ring
/// (its position modulo the ring's rows), when the cache has rings.
pub const RING_ROWS: &str = "ring_rows";

/// Name of the input of each token's slot (batches in slots).
pub const SLOTS: &str = "slots";

/// Name of the input of each token's row in the whole cache of a layer
/// without a ring: `slot × context + position` (batches in slots).
pub const CACHE_ROWS: &str = "cache_rows";

/// Name of the input of each token's row in the whole ring cache of a
/// sliding-window layer: `slot × ring + position mod ring` (batches in
/// slots, when the cache has rings).
pub const RING_CACHE_ROWS: &str = "ring_cache_rows";

/// Name of the input of a paged cache's block tables, `[slots, context /
/// ATTENTION_BLOCK]` (rounded up): each slot's blocks of the pool (batches
/// in slots; [`BlockTables`](crate::BlockTables)). With it, a
/// token's [`CACHE_ROWS`] entry is its row of the pool.
pub const BLOCK_TABLE: &str = "block_table";

/// Name of layer `l`'s key cache leaf.
pub fn key_cache_name(l: usize) -> String {
    format!("cache.k.{l}")
}

/// Name of layer `l`'s value cache leaf.
pub fn value_cache_name(l: usize) -> String {
    format!("cache.v.{l}")
}

/// Name of recurrent layer `l`'s convolution state leaf.
pub fn conv_state_name(l: usize) -> String {
    format!("cache.conv.{l}")
}

/// Name of recurrent layer `l`'s delta-rule state leaf.
pub fn delta_state_name(l: usize) -> String {
    format!("cache.delta.{l}")
}

/// Name of the input of each token's slot in a model with recurrent
/// layers (every step: their ops take the rows of every sequence).
pub const STATE_SLOTS: &str = "state_slots";

/// Name of the input of each token's row of the kept recurrent states (-1:
/// not kept), in a model that keeps some ([`CacheGeometry::kept_rows`](super::CacheGeometry::kept_rows)).
pub const STATE_KEEP: &str = "state_keep";

/// Name of recurrent layer `l`'s kept convolution states.
pub fn conv_kept_name(l: usize) -> String {
    format!("cache.conv_kept.{l}")
}

/// Name of recurrent layer `l`'s kept delta-rule states.
pub fn delta_kept_name(l: usize) -> String {
    format!("cache.delta_kept.{l}")
}
