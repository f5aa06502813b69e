//! The vocabulary held compactly: every token's text in one arena, found
//! by id through an offset table and by text through a hash table of ids.
//!
//! A 262,144-token vocabulary (Gemma 3) held as `Vec<String>` texts, a
//! `Vec<Vec<u8>>` of pieces and a `HashMap<String, u32>` costs a heap
//! allocation per token and string three times over (about 64 MiB); here
//! it is two arenas, two offset arrays and one table of `u32` ids.

use std::hash::{BuildHasher, RandomState};

use hashbrown::HashTable;

/// Byte strings by index, in one arena.
#[derive(Clone, Debug, Default)]
pub(crate) struct Strings {
    bytes: Vec<u8>,
    /// `ends[i]` is where string `i` ends (and `i + 1` starts).
    ends: Vec<usize>,
}

impl Strings {
    /// The strings of `items`, in order.
    pub(crate) fn new<T: AsRef<[u8]>>(items: impl IntoIterator<Item = T>) -> Strings {
        let mut strings = Strings::default();
        for item in items {
            strings.bytes.extend_from_slice(item.as_ref());
            strings.ends.push(strings.bytes.len());
        }
        strings.bytes.shrink_to_fit();
        strings.ends.shrink_to_fit();
        strings
    }

    /// String `index`; empty past the end.
    pub(crate) fn get(&self, index: usize) -> &[u8] {
        let start = if index == 0 { 0 } else { self.ends.get(index - 1).copied().unwrap_or(self.bytes.len()) };
        let end = self.ends.get(index).copied().unwrap_or(start);
        &self.bytes[start..end]
    }

    /// How many strings.
    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }
}

/// Token texts (UTF-8), by id and by text.
#[derive(Clone, Debug)]
pub(crate) struct TokenTable {
    texts: Strings,
    by_text: HashTable<u32>,
    hasher: RandomState,
}

impl TokenTable {
    /// The table of `tokens`, whose index is the id; for a text that
    /// appears twice, the last id wins (as in llama.cpp and HF).
    pub(crate) fn new(tokens: &[String]) -> TokenTable {
        let texts = Strings::new(tokens);
        let hasher = RandomState::new();
        let mut by_text: HashTable<u32> = HashTable::with_capacity(tokens.len());
        for (id, text) in tokens.iter().enumerate() {
            let id = id as u32;
            let hash = hasher.hash_one(text.as_bytes());
            match by_text.find_mut(hash, |&other| texts.get(other as usize) == text.as_bytes()) {
                Some(slot) => *slot = id,
                None => {
                    by_text.insert_unique(hash, id, |&other| hasher.hash_one(texts.get(other as usize)));
                }
            }
        }
        TokenTable { texts, by_text, hasher }
    }

    /// The id of the token whose text is `text`.
    pub(crate) fn id(&self, text: &str) -> Option<u32> {
        let hash = self.hasher.hash_one(text.as_bytes());
        self.by_text.find(hash, |&id| self.texts.get(id as usize) == text.as_bytes()).copied()
    }

    /// The text of token `index` (empty past the end).
    pub(crate) fn text(&self, index: usize) -> &str {
        // Every string was a whole `String`, so its bytes are UTF-8.
        std::str::from_utf8(self.texts.get(index)).unwrap_or_default()
    }

    /// How many tokens.
    pub(crate) fn len(&self) -> usize {
        self.texts.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_come_back_by_index_and_texts_by_id_and_text() {
        let tokens: Vec<String> = ["a", "", "▁hello", "b", "a", "<0x0A>"].iter().map(|s| s.to_string()).collect();
        let table = TokenTable::new(&tokens);
        assert_eq!(table.len(), 6);
        for (i, t) in tokens.iter().enumerate() {
            assert_eq!(table.text(i), t);
        }
        assert_eq!(table.text(6), "", "past the end");
        assert_eq!(table.id("a"), Some(4), "the last of two equal texts wins");
        assert_eq!(table.id(""), Some(1));
        assert_eq!(table.id("▁hello"), Some(2));
        assert_eq!(table.id("▁hell"), None);
        let strings = Strings::new([b"xy".as_slice(), b"", b"z"]);
        assert_eq!(
            (strings.get(0), strings.get(1), strings.get(2), strings.get(3)),
            (&b"xy"[..], &b""[..], &b"z"[..], &b""[..])
        );
    }
}
