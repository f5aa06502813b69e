//! How many blocks a paged KV cache's pool holds ([`KvPool`]): a count the
//! user gave (blocks, positions or bytes), or what the host's memory budget
//! allows.

use baton_core::graph::ATTENTION_BLOCK;

use crate::error::ModelError;

/// The share of the budget's memory the pool may take by default: the rest
/// is left to the activations, the tokenizer, the server's buffers and the
/// rest of the machine.
const BUDGET_SHARE: f64 = 0.9;

/// The size of a paged KV cache's pool ([`LoadOptions::kv_pool`](crate::LoadOptions::kv_pool)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvPool {
    /// Every slot's whole context, or fewer blocks where the host's memory
    /// would not hold them: at most 90% of the memory available when the
    /// load began (`MemAvailable`), less the model file's bytes (the
    /// weights become resident as they are read or packed) and `reserve`
    /// bytes the caller keeps for itself (the server's `--cache-ram`).
    /// Where the available memory cannot be read, every slot's context.
    Budget {
        /// Bytes of host memory kept out of the pool's budget.
        reserve: u64,
    },
    /// This many blocks of [`ATTENTION_BLOCK`] positions.
    Blocks(usize),
    /// Blocks enough for this many positions (rounded up to whole blocks).
    Positions(usize),
    /// As many blocks as fit in this many bytes (at least one block).
    Bytes(u64),
}

impl Default for KvPool {
    fn default() -> Self {
        KvPool::Budget { reserve: 0 }
    }
}

/// What a pool's size was decided from, for messages and `baton plan`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolSize {
    /// Blocks of the pool.
    pub blocks: usize,
    /// Blocks every slot's whole context would take.
    pub whole: usize,
    /// Bytes of one block (keys and values of every paged layer).
    pub block_bytes: usize,
    /// The budget's bytes when [`KvPool::Budget`] made the pool smaller
    /// than `whole`.
    pub budget: Option<u64>,
}

impl KvPool {
    /// The pool's blocks for `whole` blocks of every slot's context, of
    /// `block_bytes` each, a model file of `file_bytes`, with `available`
    /// bytes of host memory free when the load began (`None`: unknown). An
    /// explicit size below one block is an error naming it.
    pub fn size(
        self,
        whole: usize,
        block_bytes: usize,
        file_bytes: u64,
        available: Option<u64>,
    ) -> Result<PoolSize, ModelError> {
        let block_bytes = block_bytes.max(1);
        let sized = |blocks: usize, budget| Ok(PoolSize { blocks, whole, block_bytes, budget });
        match self {
            KvPool::Blocks(0) | KvPool::Positions(0) => {
                Err(ModelError::Input("a KV pool of no blocks holds no position".into()))
            }
            KvPool::Blocks(blocks) => sized(blocks, None),
            KvPool::Positions(positions) => sized(positions.div_ceil(ATTENTION_BLOCK), None),
            KvPool::Bytes(bytes) => match usize::try_from(bytes / block_bytes as u64).unwrap_or(usize::MAX) {
                0 => Err(ModelError::Input(format!(
                    "a KV pool of {bytes} bytes is less than one block of {ATTENTION_BLOCK} positions \
                     ({block_bytes} bytes with this model and cache type)"
                ))),
                blocks => sized(blocks, None),
            },
            KvPool::Budget { reserve } => {
                let Some(available) = available else { return sized(whole, None) };
                let left = available.saturating_sub(file_bytes).saturating_sub(reserve);
                let budget = (left as f64 * BUDGET_SHARE) as u64;
                let fits = usize::try_from(budget / block_bytes as u64).unwrap_or(usize::MAX);
                match fits < whole {
                    true => sized(fits.max(1), Some(budget)),
                    false => sized(whole, None),
                }
            }
        }
    }
}

/// Bytes of host memory available now (Linux's `MemAvailable`: free
/// memory and the caches the kernel would give back), `None` where it
/// cannot be read.
pub fn host_memory_available() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn explicit_sizes_count_whole_blocks() {
        let size = |pool: KvPool| pool.size(100, 1 << 20, 0, Some(u64::MAX)).map(|s| s.blocks);
        assert_eq!(size(KvPool::Blocks(7)).unwrap(), 7);
        assert_eq!(size(KvPool::Positions(64)).unwrap(), 1);
        assert_eq!(size(KvPool::Positions(65)).unwrap(), 2);
        assert_eq!(size(KvPool::Bytes(5 * MIB + 1)).unwrap(), 5);
        // A count above the whole contexts is what the user asked for.
        assert_eq!(size(KvPool::Blocks(500)).unwrap(), 500);
        for small in [KvPool::Bytes(MIB - 1), KvPool::Blocks(0), KvPool::Positions(0)] {
            assert!(matches!(size(small), Err(ModelError::Input(_))), "{small:?}");
        }
    }

    #[test]
    fn the_budget_caps_the_whole_contexts_by_the_memory_left() {
        let budget = KvPool::Budget { reserve: 100 * MIB };
        // Plenty of memory: every slot's whole context.
        let roomy = budget.size(64, MIB as usize, 200 * MIB, Some(64 * 1024 * MIB)).unwrap();
        assert_eq!((roomy.blocks, roomy.budget), (64, None));
        // 1,300 MiB available less the 200 MiB file and 100 MiB reserved:
        // 90% of 1,000 MiB.
        let tight = budget.size(4096, MIB as usize, 200 * MIB, Some(1300 * MIB)).unwrap();
        assert_eq!(tight.blocks, 900);
        assert_eq!(tight.budget, Some(900 * MIB));
        // Nothing left: one block, so that the load still says what it has.
        assert_eq!(budget.size(4096, MIB as usize, 200 * MIB, Some(MIB)).unwrap().blocks, 1);
        // Unknown memory: the whole contexts.
        assert_eq!(budget.size(4096, MIB as usize, 0, None).unwrap().blocks, 4096);
    }

    #[test]
    fn this_host_reports_its_available_memory() {
        if cfg!(target_os = "linux") {
            assert!(host_memory_available().is_some_and(|b| b > 0));
        }
    }
}
