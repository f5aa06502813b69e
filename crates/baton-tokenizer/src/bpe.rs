//! BPE merge rules and the merge loop, shared by byte-level BPE (GGUF
//! `gpt2`) and SentencePiece-style BPE (GGUF `gemma4`, see `spm_bpe.rs`).
//!
//! A word starts as a sequence of token ids (one per byte for byte-level
//! BPE, one per character for the SentencePiece style); the adjacent pair
//! with the lowest merge rank is merged, leftmost first on ties, until no
//! pair has a rule. Symbols live in a linked list and candidate pairs in a
//! binary heap, so a word of n symbols costs O(n log n), however long.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use crate::bytes::byte_map;
use crate::error::{Result, TokenizerError};
use crate::table::TokenTable;

/// Stands for a starting symbol that is no vocabulary token; no rule
/// names it, so it never merges.
pub(crate) const NOT_A_TOKEN: u32 = u32::MAX;

/// Merge rules keyed by the pair of token ids.
pub(crate) struct MergeTable {
    /// (left, right) -> (rank, merged token).
    merges: HashMap<(u32, u32), (u32, u32)>,
}

/// Byte-level BPE: the merge rules and the token of each byte.
pub(crate) struct BpeModel {
    pub(crate) table: MergeTable,
    /// The token of each byte's byte-level character, if in the vocabulary.
    byte_ids: [Option<u32>; 256],
}

#[derive(Clone, Copy)]
struct Symbol {
    id: u32,
    prev: usize,
    next: usize,
}

const NONE: usize = usize::MAX;

impl MergeTable {
    /// Builds the rank table; every merge must name two vocabulary tokens
    /// whose concatenation is also one.
    pub(crate) fn new(merges: &[String], tokens: &TokenTable) -> Result<Self> {
        let mut table = HashMap::with_capacity(merges.len());
        for (index, merge) in merges.iter().enumerate() {
            // Split at the first space after the first character, so that a
            // left token that is itself " " still parses.
            let first_len = merge.chars().next().map_or(0, char::len_utf8);
            let split = merge[first_len..].find(' ').map(|k| k + first_len);
            let Some(split) = split else {
                return Err(TokenizerError::MalformedMerge { index, merge: merge.clone() });
            };
            let (left, right) = (&merge[..split], &merge[split + 1..]);
            if left.is_empty() || right.is_empty() {
                return Err(TokenizerError::MalformedMerge { index, merge: merge.clone() });
            }
            let lookup = |text: &str| {
                tokens.id(text).ok_or_else(|| TokenizerError::MergeTokenMissing {
                    index,
                    merge: merge.clone(),
                    token: text.to_owned(),
                })
            };
            let pair = (lookup(left)?, lookup(right)?);
            let merged = lookup(&format!("{left}{right}"))?;
            let rank = u32::try_from(index).unwrap_or(u32::MAX);
            // The first (best) rule for a pair wins.
            table.entry(pair).or_insert((rank, merged));
        }
        Ok(Self { merges: table })
    }

    /// Merges the word whose starting symbols are `ids` (a symbol that is
    /// no token is [`NOT_A_TOKEN`]) and appends each final symbol to `out`
    /// as (index of its first starting symbol, token id).
    pub(crate) fn apply(&self, ids: &[u32], out: &mut Vec<(usize, u32)>) {
        let mut symbols: Vec<Symbol> = ids
            .iter()
            .enumerate()
            .map(|(i, &id)| Symbol {
                id,
                prev: if i == 0 { NONE } else { i - 1 },
                next: if i + 1 < ids.len() { i + 1 } else { NONE },
            })
            .collect();
        if symbols.len() > 1 {
            self.merge(&mut symbols);
        }
        let mut i = if symbols.is_empty() { NONE } else { 0 };
        while i != NONE {
            out.push((i, symbols[i].id));
            i = symbols[i].next;
        }
    }

    fn merge(&self, symbols: &mut [Symbol]) {
        // Heap of (rank, left position, left id, right id), smallest first.
        let mut heap = BinaryHeap::new();
        let push = |heap: &mut BinaryHeap<_>, symbols: &[Symbol], left: usize| {
            let right = symbols[left].next;
            if right == NONE {
                return;
            }
            let pair = (symbols[left].id, symbols[right].id);
            if let Some(&(rank, _)) = self.merges.get(&pair) {
                heap.push(Reverse((rank, left, pair.0, pair.1)));
            }
        };
        for left in 0..symbols.len() - 1 {
            push(&mut heap, symbols, left);
        }
        while let Some(Reverse((_, left, left_id, right_id))) = heap.pop() {
            let right = symbols[left].next;
            // Stale entries: a side was merged since it was queued. A
            // merged-away symbol has no `next`, and a symbol's id fixes its
            // length, so equal ids at the same start mean the same symbols.
            if right == NONE || symbols[left].id != left_id || symbols[right].id != right_id {
                continue;
            }
            let Some(&(_, merged)) = self.merges.get(&(left_id, right_id)) else {
                continue;
            };
            let after = symbols[right].next;
            symbols[left].id = merged;
            symbols[left].next = after;
            if after != NONE {
                symbols[after].prev = left;
            }
            symbols[right].prev = NONE;
            symbols[right].next = NONE;
            let before = symbols[left].prev;
            if before != NONE {
                push(&mut heap, symbols, before);
            }
            push(&mut heap, symbols, left);
        }
    }
}

impl BpeModel {
    /// The merge rules of `merges` and the byte-level character tokens.
    pub(crate) fn new(merges: &[String], tokens: &TokenTable) -> Result<Self> {
        let map = byte_map();
        let mut byte_ids = [None; 256];
        for (byte, slot) in byte_ids.iter_mut().enumerate() {
            let c = map.char_of(byte as u8);
            *slot = tokens.id(c.encode_utf8(&mut [0u8; 4]));
        }
        Ok(Self { table: MergeTable::new(merges, tokens)?, byte_ids })
    }

    /// Encodes one pre-tokenized word, appending its ids to `out`.
    /// `unk` stands for bytes without a byte token.
    pub(crate) fn encode_word(&self, word: &[u8], unk: Option<u32>, out: &mut Vec<u32>) -> Result<()> {
        let mut ids = Vec::with_capacity(word.len());
        for &byte in word {
            ids.push(match (self.byte_ids[usize::from(byte)], unk) {
                (Some(id), _) | (None, Some(id)) => id,
                (None, None) => return Err(TokenizerError::Unencodable { text: format!("byte 0x{byte:02X}") }),
            });
        }
        let mut merged = Vec::with_capacity(ids.len());
        self.table.apply(&ids, &mut merged);
        out.extend(merged.into_iter().map(|(_, id)| id));
        Ok(())
    }
}
