//! Drafting by prompt lookup: the last few tokens of the text so far are
//! looked for earlier in it (prompt and output), and the tokens that
//! followed the latest earlier occurrence are proposed as the next ones.
//! What code edits, quoting and structured answers repeat, drafted without
//! a draft model.

/// The longest n-gram a drafter looks up (each length keeps its own
/// acceptance estimate; llama.cpp's default is 3).
pub const MAX_NGRAM: usize = 64;

/// Finds drafts in a sequence's own tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NgramDrafter {
    /// The longest n-gram looked up (tried first).
    pub max_n: usize,
    /// The shortest n-gram looked up (tried last); at least 1.
    pub min_n: usize,
}

/// A draft: the proposed tokens and the length of the n-gram whose earlier
/// occurrence gave them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Draft {
    /// The proposed next tokens, in order.
    pub tokens: Vec<u32>,
    /// How many trailing tokens matched (0 when nothing was found).
    pub matched: usize,
}

impl Default for NgramDrafter {
    fn default() -> Self {
        NgramDrafter { max_n: 3, min_n: 1 }
    }
}

impl NgramDrafter {
    /// Up to `max` tokens proposed to follow `history` (prompt and output
    /// so far, the last token included): for n from `max_n` down to
    /// `min_n`, the latest earlier occurrence of `history`'s last n tokens
    /// that is followed by at least one token gives the tokens after it.
    /// Empty when no n-gram recurs or `max` is 0.
    pub fn draft(&self, history: &[u32], max: usize) -> Draft {
        if max == 0 {
            return Draft::default();
        }
        let min_n = self.min_n.max(1);
        for n in (min_n..=self.max_n).rev() {
            if history.len() <= n {
                continue;
            }
            let tail = &history[history.len() - n..];
            // Occurrences ending before the last token, latest first: the
            // text nearest the end is the likeliest to repeat next.
            let found = (0..history.len() - n).rev().find(|&start| &history[start..start + n] == tail);
            if let Some(start) = found {
                let from = start + n;
                let end = (from + max).min(history.len());
                return Draft { tokens: history[from..end].to_vec(), matched: n };
            }
        }
        Draft::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proposes_what_followed_the_latest_earlier_occurrence() {
        let drafter = NgramDrafter { max_n: 3, min_n: 1 };
        // "1 2 3 4 5 ... 1 2 3" proposes "4 5".
        let history = [1, 2, 3, 4, 5, 9, 1, 2, 3];
        assert_eq!(drafter.draft(&history, 2), Draft { tokens: vec![4, 5], matched: 3 });
        // The latest occurrence wins: "7 8" then "7 9", ending in "7".
        let history = [7, 8, 0, 7, 9, 0, 7];
        assert_eq!(drafter.draft(&history, 1), Draft { tokens: vec![9], matched: 2 });
    }

    #[test]
    fn falls_back_to_shorter_ngrams_and_stops_at_the_text_end() {
        let drafter = NgramDrafter { max_n: 3, min_n: 1 };
        // Only the last token recurs.
        let history = [5, 6, 7, 8, 6];
        assert_eq!(drafter.draft(&history, 8), Draft { tokens: vec![7, 8, 6], matched: 1 });
        // A repeated token proposes itself again (the latest occurrence is
        // right before the last token).
        assert_eq!(drafter.draft(&[4, 4, 4], 3), Draft { tokens: vec![4], matched: 2 });
    }

    #[test]
    fn proposes_nothing_without_a_recurring_ngram_or_room() {
        let drafter = NgramDrafter { max_n: 3, min_n: 2 };
        // The last token recurs, but min_n asks for two.
        assert_eq!(drafter.draft(&[1, 2, 3, 2], 4), Draft::default());
        assert_eq!(drafter.draft(&[], 4), Draft::default());
        assert_eq!(drafter.draft(&[1], 4), Draft::default());
        assert_eq!(NgramDrafter::default().draft(&[1, 2, 1, 2], 0), Draft::default());
        // min_n 0 reads as 1.
        let loose = NgramDrafter { max_n: 1, min_n: 0 };
        assert_eq!(loose.draft(&[3, 1, 3], 2), Draft { tokens: vec![1, 3], matched: 1 });
    }
}
