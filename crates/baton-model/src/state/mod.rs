//! A sequence's state, in one place: what a model keeps of each sequence
//! between steps, indexed by slot.
//!
//! - `kv_cache.rs`: keys and values of every layer in slots of `context`
//!   positions, sliding-window layers as rings (the rows-per-slot rule,
//!   written once: `rows_per_slot`), and their element types.
//! - `blocks.rs`: a paged cache's blocks on the host: each slot's table
//!   of blocks of the pool, shared prefixes counted per holder, copy on
//!   write, the free list.
//! - `pool_size.rs`: how many blocks the pool holds: a size the user
//!   gave, or what the host's memory allows.
//! - `prefix.rs`: a slot's first positions copied to another slot (a
//!   prompt that starts as a running sequence's), saved to host memory and
//!   restored (`--cache-ram`), with the bits an evaluation would give;
//!   `prefix_bytes.rs`: such a saved prefix as bytes and back.
//!
//! - `kept.rs`: a hybrid model's recurrent states kept after each
//!   position of a verification step, one of which becomes the slot's
//!   once the accepted drafts are known.
//!
//! State that is not indexed by position (the recurrent state of hybrid
//! models, and its checkpoints) belongs here beside them, held per slot
//! and copied, saved and restored through the same operations.

mod blocks;
mod kept;
mod kv_cache;
mod pool_size;
mod prefix;
mod prefix_bytes;

pub use blocks::{BlockCopy, BlockTables, BlockUsage, PoolFull};
pub use kept::KeptRows;
pub use kv_cache::{ring_rows, KvCache, KvTypes, LayerCache};
pub use pool_size::{host_memory_available, KvPool, PoolSize};
pub use prefix::SavedPrefix;
