//! SentencePiece-style encoding (GGUF `llama`), as llama.cpp's SPM tokenizer.
//!
//! Spaces become `▁` (U+2581). The text starts as one symbol per character;
//! repeatedly, of all adjacent pairs whose concatenation is a vocabulary
//! token, the one with the best score is merged (leftmost on ties). A final
//! symbol that is not a token falls back to its UTF-8 bytes as `<0xXX>`
//! tokens, or to the unknown token when the vocabulary has no byte tokens.
//!
//! Only normal and user-defined tokens take part in merges: text never turns
//! into a control, byte or unused token (so `<0x41>` typed as text stays text).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::config::TokenType;
use crate::error::{Result, TokenizerError};
use crate::table::TokenTable;

/// The SentencePiece space marker.
pub(crate) const SPACE_MARKER: char = '\u{2581}';

/// Vocabulary views the SPM merge loop needs.
pub(crate) struct SpmModel<'a> {
    pub(crate) tokens: &'a TokenTable,
    pub(crate) types: &'a [TokenType],
    pub(crate) scores: &'a [f32],
    pub(crate) byte_ids: &'a [Option<u32>; 256],
    pub(crate) unk: Option<u32>,
}

struct Symbol {
    start: usize,
    len: usize,
    prev: usize,
    next: usize,
}

const NONE: usize = usize::MAX;

struct Bigram {
    score: f32,
    left: usize,
    right: usize,
    len: usize,
}

impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Bigram {}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Bigram {
    /// Max-heap order: higher score first, then the leftmost pair.
    fn cmp(&self, other: &Self) -> Ordering {
        self.score.total_cmp(&other.score).then(other.left.cmp(&self.left))
    }
}

impl SpmModel<'_> {
    fn mergeable(&self, text: &str) -> Option<u32> {
        let id = self.tokens.id(text)?;
        match self.types.get(id as usize) {
            Some(TokenType::Normal | TokenType::UserDefined) => Some(id),
            _ => None,
        }
    }

    /// Encodes `text` (spaces already replaced by `▁`), appending to `out`.
    pub(crate) fn encode(&self, text: &str, out: &mut Vec<u32>) -> Result<()> {
        let mut symbols: Vec<Symbol> = Vec::with_capacity(text.len());
        for (start, c) in text.char_indices() {
            let index = symbols.len();
            symbols.push(Symbol {
                start,
                len: c.len_utf8(),
                prev: if index == 0 { NONE } else { index - 1 },
                next: index + 1,
            });
        }
        let Some(last) = symbols.last_mut() else {
            return Ok(());
        };
        last.next = NONE;

        let mut heap = BinaryHeap::new();
        let try_add = |heap: &mut BinaryHeap<Bigram>, symbols: &[Symbol], left: usize, right: usize| {
            if left == NONE || right == NONE {
                return;
            }
            let start = symbols[left].start;
            let len = symbols[left].len + symbols[right].len;
            if let Some(id) = self.mergeable(&text[start..start + len]) {
                let score = self.scores.get(id as usize).copied().unwrap_or(0.0);
                heap.push(Bigram { score, left, right, len });
            }
        };
        for left in 1..symbols.len() {
            try_add(&mut heap, &symbols, left - 1, left);
        }
        while let Some(bigram) = heap.pop() {
            let (left, right) = (bigram.left, bigram.right);
            // Stale: one side was merged since this pair was queued.
            if symbols[left].len == 0 || symbols[right].len == 0 || symbols[left].len + symbols[right].len != bigram.len
            {
                continue;
            }
            symbols[left].len = bigram.len;
            symbols[right].len = 0;
            let after = symbols[right].next;
            symbols[left].next = after;
            if after != NONE {
                symbols[after].prev = left;
            }
            try_add(&mut heap, &symbols, symbols[left].prev, left);
            try_add(&mut heap, &symbols, left, after);
        }

        let mut i = 0;
        while i != NONE {
            let symbol = &symbols[i];
            let piece = &text[symbol.start..symbol.start + symbol.len];
            match self.mergeable(piece) {
                Some(id) => out.push(id),
                None => self.fallback(piece, out)?,
            }
            i = symbol.next;
        }
        Ok(())
    }

    /// Byte fallback for a piece that is no token (always one character,
    /// since merged symbols are tokens): its bytes as byte tokens, or one
    /// unknown token when the vocabulary has no byte tokens.
    fn fallback(&self, piece: &str, out: &mut Vec<u32>) -> Result<()> {
        let unencodable = || TokenizerError::Unencodable { text: piece.to_owned() };
        if self.byte_ids.iter().all(Option::is_none) {
            out.push(self.unk.ok_or_else(unencodable)?);
            return Ok(());
        }
        for &byte in piece.as_bytes() {
            let id = self.byte_ids[usize::from(byte)].or(self.unk).ok_or_else(unencodable)?;
            out.push(id);
        }
        Ok(())
    }
}
