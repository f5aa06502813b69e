//! SentencePiece-style BPE (GGUF `gemma4`), as llama.cpp tokenizes Gemma 4.
//!
//! The text's spaces are already `▁` (U+2581). It is split only into runs
//! of newlines and runs of everything else (llama.cpp's pattern
//! `[^\n]+|[\n]+`); a run of newlines that is itself a token is that token.
//! Any other run starts as one symbol per character and merges by rank
//! ([`MergeTable`], the same loop as byte-level BPE, over whole characters
//! instead of GPT-2 byte characters). A final symbol that is no token (a
//! character outside the vocabulary) becomes its UTF-8 bytes as `<0xXX>`
//! tokens, which such a vocabulary must all hold.

use crate::bpe::{MergeTable, NOT_A_TOKEN};
use crate::table::TokenTable;

/// Vocabulary views the SentencePiece-style BPE encoder needs.
pub(crate) struct SpmBpeModel<'a> {
    pub(crate) tokens: &'a TokenTable,
    pub(crate) table: &'a MergeTable,
    /// The `<0xXX>` token of every byte.
    pub(crate) byte_ids: &'a [u32; 256],
}

/// The maximal runs of newlines and of other characters, in order.
pub(crate) fn newline_runs(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut start = 0;
    std::iter::from_fn(move || {
        if start >= bytes.len() {
            return None;
        }
        let newline = bytes[start] == b'\n';
        let len = bytes[start..].iter().take_while(|&&b| (b == b'\n') == newline).count();
        // '\n' is ASCII, so run ends are character boundaries.
        let run = &text[start..start + len];
        start += len;
        Some(run)
    })
}

impl SpmBpeModel<'_> {
    /// Encodes `text` (spaces already replaced by `▁`), appending to `out`.
    pub(crate) fn encode(&self, text: &str, out: &mut Vec<u32>) {
        let mut spans = Vec::new();
        let mut ids = Vec::new();
        let mut merged = Vec::new();
        for run in newline_runs(text) {
            if run.starts_with('\n') {
                if let Some(id) = self.tokens.id(run) {
                    out.push(id);
                    continue;
                }
            }
            spans.clear();
            spans.extend(run.char_indices().map(|(start, c)| start..start + c.len_utf8()));
            ids.clear();
            ids.extend(spans.iter().map(|span| self.tokens.id(&run[span.clone()]).unwrap_or(NOT_A_TOKEN)));
            merged.clear();
            self.table.apply(&ids, &mut merged);
            for &(first, id) in &merged {
                if id == NOT_A_TOKEN {
                    // Never merged, so still the one character it started as.
                    out.extend(run[spans[first].clone()].bytes().map(|b| self.byte_ids[usize::from(b)]));
                } else {
                    out.push(id);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::newline_runs;

    #[test]
    fn text_splits_into_runs_of_newlines_and_of_the_rest() {
        let runs: Vec<&str> = newline_runs("a▁b\n\nc\r\n\n").collect();
        assert_eq!(runs, ["a▁b", "\n\n", "c\r", "\n\n"]);
        assert_eq!(newline_runs("").count(), 0);
        assert_eq!(newline_runs("\n").collect::<Vec<_>>(), ["\n"]);
    }
}
