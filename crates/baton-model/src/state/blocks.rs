//! The blocks of a paged KV cache, on the host: which block of the pool
//! holds each sequence's positions, and how many sequences hold each block.
//!
//! The attention layers' keys and values are one pool of blocks of
//! [`BLOCK`] positions (`[kv_heads, blocks × BLOCK, head_dim]` per layer,
//! every layer's block `b` at the same rows), and slot `s` (a sequence) holds
//! the blocks its table lists: position `p` is row `table[p / BLOCK] ·
//! BLOCK + p mod BLOCK` of every layer. A prefix copied from one slot to
//! another is its blocks shared, each block counted once per holder, and a
//! write into a block another slot still holds first moves the writer to a
//! copy of it (copy on write), so sharing never changes what a sequence
//! reads. A block nobody holds goes back to the free list (last freed,
//! first reused: the pool's memory becomes resident only as blocks are
//! first used, and stays no larger than the most ever held at once).

use baton_core::graph::ATTENTION_BLOCK as BLOCK;

pub use crate::error::PoolFull;

/// A block to copy before a step writes into it: `from`'s rows into `to`
/// (every attention layer's keys and values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockCopy {
    /// The shared block.
    pub from: u32,
    /// The writer's own block.
    pub to: u32,
}

/// Blocks in use, shared and free ([`BlockTables::usage`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockUsage {
    /// Blocks of the pool.
    pub blocks: usize,
    /// Held by at least one sequence.
    pub used: usize,
    /// Held by more than one.
    pub shared: usize,
    /// Held by none.
    pub free: usize,
    /// Blocks the sequences' tables list, counting a shared one once per
    /// holder (what slots of their own would hold).
    pub held: usize,
    /// Slots holding at least one block.
    pub holders: usize,
}

/// Every slot's table of blocks and the pool's counts.
#[derive(Clone, Debug)]
pub struct BlockTables {
    /// Holders of each block.
    refs: Vec<u32>,
    /// Blocks nobody holds; the last freed is taken first.
    free: Vec<u32>,
    /// Per slot, its blocks in order of position.
    tables: Vec<Vec<u32>>,
    /// Table entries per slot (blocks of the longest sequence).
    per_slot: usize,
}

impl BlockTables {
    /// Tables for `slots` sequences of up to `context` positions over a
    /// pool of `blocks` blocks, all free.
    pub fn new(slots: usize, context: usize, blocks: usize) -> BlockTables {
        BlockTables {
            refs: vec![0; blocks],
            free: (0..blocks as u32).rev().collect(),
            tables: vec![Vec::new(); slots],
            per_slot: context.div_ceil(BLOCK),
        }
    }

    /// Table entries per slot: `context / BLOCK` rounded up.
    pub fn per_slot(&self) -> usize {
        self.per_slot
    }

    /// Blocks of the pool.
    pub fn blocks(&self) -> usize {
        self.refs.len()
    }

    /// Slot `slot`'s blocks, in order of position.
    pub fn table(&self, slot: usize) -> &[u32] {
        self.tables.get(slot).map_or(&[], Vec::as_slice)
    }

    /// The pool row of slot `slot`'s position `p` (a block it holds).
    pub fn row(&self, slot: usize, p: usize) -> Option<usize> {
        let block = *self.tables.get(slot)?.get(p / BLOCK)?;
        Some(block as usize * BLOCK + p % BLOCK)
    }

    /// Every slot's table as the attention op reads it (`[slots,
    /// per_slot]`), entries a slot does not hold pointing at block 0 (never
    /// read: a row sees only positions before its own, which its slot
    /// holds).
    pub fn write_entries(&self, out: &mut Vec<i32>) {
        for table in &self.tables {
            out.extend(table.iter().map(|&b| b as i32));
            out.extend(std::iter::repeat_n(0, self.per_slot - table.len()));
        }
    }

    /// Counts of the pool's blocks.
    pub fn usage(&self) -> BlockUsage {
        let used = self.refs.iter().filter(|&&r| r > 0).count();
        BlockUsage {
            blocks: self.refs.len(),
            used,
            shared: self.refs.iter().filter(|&&r| r > 1).count(),
            free: self.free.len(),
            held: self.tables.iter().map(Vec::len).sum(),
            holders: self.tables.iter().filter(|t| !t.is_empty()).count(),
        }
    }

    /// Makes slot `slot` ready for a step writing positions `past..end`:
    /// keeps the blocks of its positions before `past`, gives back the
    /// others, takes blocks for the new positions, and moves it to a copy
    /// of the one block it keeps and writes into if another slot holds it
    /// too. Returns those copies (to queue before the step). Nothing
    /// changes if the pool cannot give what the step needs.
    pub fn prepare(&mut self, slot: usize, past: usize, end: usize) -> Result<Vec<BlockCopy>, PoolFull> {
        let keep = past.div_ceil(BLOCK).min(self.table(slot).len());
        let want = end.div_ceil(BLOCK).max(keep);
        // The block that holds `past` when it is kept and shared.
        let shared = (!past.is_multiple_of(BLOCK) && keep == past.div_ceil(BLOCK) && end > past)
            .then(|| self.tables[slot][keep - 1])
            .filter(|&b| self.refs[b as usize] > 1);
        // Blocks given back first count as free for this step.
        let given: usize = self.tables[slot][keep..].iter().filter(|&&b| self.refs[b as usize] == 1).count();
        let needed = want - keep + usize::from(shared.is_some());
        if needed > self.free.len() + given {
            return Err(PoolFull { blocks: self.refs.len(), free: self.free.len() + given, needed });
        }
        self.truncate(slot, keep);
        let mut copies = Vec::new();
        if let Some(from) = shared {
            let to = self.take();
            self.refs[from as usize] -= 1;
            self.tables[slot][keep - 1] = to;
            copies.push(BlockCopy { from, to });
        }
        while self.tables[slot].len() < want {
            let block = self.take();
            self.tables[slot].push(block);
        }
        Ok(copies)
    }

    /// Slot `to` gives back its blocks and holds slot `from`'s blocks of
    /// positions `0..len` (shared: nothing is copied until one of them
    /// writes into a block both hold).
    pub fn share(&mut self, from: usize, to: usize, len: usize) {
        if from == to {
            return;
        }
        self.truncate(to, 0);
        let blocks: Vec<u32> = self.table(from).iter().take(len.div_ceil(BLOCK)).copied().collect();
        for &b in &blocks {
            self.refs[b as usize] += 1;
        }
        self.tables[to] = blocks;
    }

    /// Slot `slot` keeps its first `keep` blocks and gives back the rest.
    pub fn truncate(&mut self, slot: usize, keep: usize) {
        let Some(table) = self.tables.get_mut(slot) else { return };
        for b in table.drain(keep.min(table.len())..).rev() {
            self.refs[b as usize] -= 1;
            if self.refs[b as usize] == 0 {
                self.free.push(b);
            }
        }
    }

    /// A free block, now held once (the caller checked one is free).
    fn take(&mut self) -> u32 {
        let block = self.free.pop().expect("a free block (counted before)");
        self.refs[block as usize] = 1;
        block
    }
}

#[cfg(test)]
#[path = "blocks_tests.rs"]
mod tests;
