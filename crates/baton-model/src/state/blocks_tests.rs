//! Model-based tests of the block tables: random writes, shares and
//! rewinds over a simulated pool, against a plain model of each sequence's
//! positions.

use super::*;

/// A simulated pool: one value per row, written through the tables.
struct Sim {
    tables: BlockTables,
    pool: Vec<u64>,
    /// What each slot must read at each of its positions.
    model: Vec<Vec<u64>>,
    next: u64,
}

impl Sim {
    fn new(slots: usize, context: usize, blocks: usize) -> Sim {
        Sim {
            tables: BlockTables::new(slots, context, blocks),
            pool: vec![0; blocks * BLOCK],
            model: vec![Vec::new(); slots],
            next: 1,
        }
    }

    /// Slot `slot` evaluates `n` positions from `past`.
    fn write(&mut self, slot: usize, past: usize, n: usize) -> Result<(), PoolFull> {
        let before = self.tables.clone();
        let copies = match self.tables.prepare(slot, past, past + n) {
            Ok(copies) => copies,
            Err(e) => {
                assert_eq!(format!("{:?}", self.tables), format!("{before:?}"), "a refused step changed nothing");
                return Err(e);
            }
        };
        for BlockCopy { from, to } in copies {
            let (from, to) = (from as usize * BLOCK, to as usize * BLOCK);
            self.pool.copy_within(from..from + BLOCK, to);
        }
        self.model[slot].truncate(past);
        for p in past..past + n {
            let row = self.tables.row(slot, p).expect("a row for every written position");
            self.pool[row] = self.next;
            self.model[slot].push(self.next);
            self.next += 1;
        }
        Ok(())
    }

    fn share(&mut self, from: usize, to: usize, len: usize) {
        self.tables.share(from, to, len);
        if from != to {
            self.model[to] = self.model[from][..len].to_vec();
        }
    }

    /// Every slot reads what it wrote or was given; the counts match the
    /// tables; free blocks are exactly those nobody holds.
    fn check(&self) {
        for (slot, values) in self.model.iter().enumerate() {
            for (p, &want) in values.iter().enumerate() {
                let row = self.tables.row(slot, p).expect("a held position");
                assert_eq!(self.pool[row], want, "slot {slot} position {p}");
            }
            assert!(self.tables.table(slot).len() >= values.len().div_ceil(BLOCK));
        }
        let mut holders = vec![0u32; self.tables.blocks()];
        for slot in 0..self.model.len() {
            for &b in self.tables.table(slot) {
                holders[b as usize] += 1;
            }
        }
        assert_eq!(holders, self.tables.refs, "each block's count is its holders");
        let mut free = self.tables.free.clone();
        free.sort_unstable();
        let unheld: Vec<u32> = (0..holders.len() as u32).filter(|&b| holders[b as usize] == 0).collect();
        assert_eq!(free, unheld, "the free list is the blocks nobody holds, once each");
        let usage = self.tables.usage();
        assert_eq!(usage.used + usage.free, usage.blocks);
    }
}

/// A deterministic pseudo-random stream.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }
}

#[test]
fn random_writes_shares_and_rewinds_read_what_each_sequence_wrote() {
    const SLOTS: usize = 5;
    const CONTEXT: usize = 5 * BLOCK;
    for (seed, blocks) in [(1u64, SLOTS * 5), (7, 9), (42, 14)] {
        let mut rng = Rng(seed * 0x9E37_79B9_7F4A_7C15 + 1);
        let mut sim = Sim::new(SLOTS, CONTEXT, blocks);
        let (mut refused, mut shared) = (0, 0);
        for _ in 0..3000 {
            let slot = rng.below(SLOTS);
            let len = sim.model[slot].len();
            match rng.below(4) {
                // Go on from the end, or from somewhere before it.
                0 | 1 => {
                    let past = if rng.below(2) == 0 { len } else { rng.below(len + 1) };
                    let n = 1 + rng.below((CONTEXT - past).clamp(1, 2 * BLOCK));
                    if past + n <= CONTEXT && sim.write(slot, past, n).is_err() {
                        refused += 1;
                    }
                }
                2 => {
                    let to = rng.below(SLOTS);
                    sim.share(slot, to, rng.below(len + 1));
                }
                _ => {
                    sim.tables.truncate(slot, 0);
                    sim.model[slot].clear();
                }
            }
            shared = shared.max(sim.tables.usage().shared);
            sim.check();
        }
        assert!(shared > 0, "seed {seed}: some block was shared");
        if blocks == SLOTS * 5 {
            assert_eq!(refused, 0, "a pool of every slot's whole context never runs out");
        } else {
            assert!(refused > 0, "seed {seed}: a pool of {blocks} blocks ran out sometimes");
        }
    }
}

#[test]
fn a_shared_prefix_is_held_once_and_a_write_into_its_last_block_copies_that_block_only() {
    let mut sim = Sim::new(3, 8 * BLOCK, 24);
    sim.write(0, 0, 3 * BLOCK + 10).expect("room");
    sim.share(0, 1, 3 * BLOCK + 10);
    sim.share(0, 2, 3 * BLOCK + 10);
    let usage = sim.tables.usage();
    assert_eq!((usage.used, usage.shared, usage.held), (4, 4, 12));
    // Slot 1 goes on inside the shared last block: that block is copied.
    let copies = sim.tables.prepare(1, 3 * BLOCK + 10, 3 * BLOCK + 11).expect("room");
    assert_eq!(copies.len(), 1);
    assert_eq!(copies[0].from, sim.tables.table(0)[3]);
    // Slot 2 goes on at a block boundary of what it shares: nothing copied.
    assert_eq!(sim.tables.prepare(2, 2 * BLOCK, 2 * BLOCK + 5), Ok(vec![]));
    let full = PoolFull { blocks: 24, free: 19, needed: 24 };
    assert_eq!(sim.tables.prepare(0, 0, 24 * BLOCK), Err(full));
}

#[test]
fn the_table_entries_cover_every_slot_and_pad_with_block_zero() {
    let mut tables = BlockTables::new(2, 3 * BLOCK, 6);
    tables.prepare(1, 0, BLOCK + 1).expect("room");
    let mut entries = Vec::new();
    tables.write_entries(&mut entries);
    assert_eq!(entries.len(), 2 * tables.per_slot());
    assert_eq!(entries, [0, 0, 0, 0, 1, 0]);
    assert_eq!(tables.row(1, 2 * BLOCK), None, "a position past its blocks has no row");
    assert_eq!(tables.row(1, BLOCK + 3), Some(BLOCK + 3));
    assert_eq!(tables.row(0, 0), None, "an empty slot holds no row");
}
