//! The Llama 3 family of patterns, which differ in what a word's letters and
//! a number's digits are:
//!
//! - `llama-bpe` (Llama 3):
//!   `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//!   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
//! - `qwen2`: as `llama-bpe` with `\p{N}` (single digits).
//! - `qwen35` (Qwen 3.5 and 3.6): as `qwen2` with `[\p{L}\p{M}]+` for
//!   `\p{L}+` and ` ?[^\s\p{L}\p{M}\p{N}]+` for ` ?[^\s\p{L}\p{N}]+`, so a
//!   combining mark stays on the letters it follows.

use super::scan::{char_at, contraction_end, line_break_match, run_end};
use crate::unicode::{is_letter, is_mark, is_number, is_other};

/// Where the family's patterns differ.
#[derive(Debug, Clone, Copy)]
pub(super) struct Llama3Shape {
    /// The `n` of `\p{N}{1,n}`.
    pub max_digits: usize,
    /// Whether a word's letters are `[\p{L}\p{M}]` rather than `\p{L}`.
    pub marks_are_letters: bool,
}

impl Llama3Shape {
    pub const LLAMA3: Self = Self { max_digits: 3, marks_are_letters: false };
    pub const QWEN2: Self = Self { max_digits: 1, marks_are_letters: false };
    pub const QWEN35: Self = Self { max_digits: 1, marks_are_letters: true };

    fn is_word(self, c: char) -> bool {
        is_letter(c) || (self.marks_are_letters && is_mark(c))
    }

    fn is_symbol(self, c: char) -> bool {
        is_other(c) && !(self.marks_are_letters && is_mark(c))
    }
}

pub(super) fn llama3_match(s: &str, i: usize, shape: Llama3Shape) -> usize {
    let Some(c) = char_at(s, i) else {
        return s.len();
    };
    if let Some(end) = contraction_end(s, i) {
        return end;
    }
    let is_word = |c| shape.is_word(c);
    // `[^\r\n\p{L}\p{N}]?WORD+`
    if is_word(c) {
        return run_end(s, i, usize::MAX, is_word);
    }
    let next = char_at(s, i + c.len_utf8());
    if c != '\r' && c != '\n' && !is_letter(c) && !is_number(c) && next.is_some_and(is_word) {
        return run_end(s, i + c.len_utf8(), usize::MAX, is_word);
    }
    // `\p{N}{1,max}`
    if is_number(c) {
        return run_end(s, i, shape.max_digits, is_number);
    }
    // ` ?SYMBOL+[\r\n]*`
    let is_symbol = |c| shape.is_symbol(c);
    let start = if c == ' ' && next.is_some_and(is_symbol) { i + 1 } else { i };
    if char_at(s, start).is_some_and(is_symbol) {
        let end = run_end(s, start, usize::MAX, is_symbol);
        return run_end(s, end, usize::MAX, |c| c == '\r' || c == '\n');
    }
    line_break_match(s, i)
}

#[cfg(test)]
mod tests {
    use super::super::{words, PreTokenizer};

    #[test]
    fn llama3_groups_digits_by_three_and_keeps_newlines_apart() {
        assert_eq!(
            words(PreTokenizer::Llama3, "I'VE 1234567 x\n\n  y\tz ..\n"),
            ["I", "'VE", " ", "123", "456", "7", " x", "\n\n", " ", " y", "\tz", " ..\n"]
        );
        assert_eq!(words(PreTokenizer::Qwen2, "x 12"), ["x", " ", "1", "2"]);
        assert_eq!(words(PreTokenizer::Llama3, "x'\u{17F} x'K"), ["x", "'\u{17F}", " x", "'K"]);
    }

    #[test]
    fn qwen35_keeps_combining_marks_on_their_letters() {
        // Decomposed accents and Devanagari vowel signs (Mc) and virama (Mn).
        let text = "cafe\u{301} na\u{308}ive \u{928}\u{92E}\u{938}\u{94D}\u{924}\u{947}";
        assert_eq!(
            words(PreTokenizer::Qwen35, text),
            ["cafe\u{301}", " na\u{308}ive", " \u{928}\u{92E}\u{938}\u{94D}\u{924}\u{947}"]
        );
        // qwen2 cuts the same words at every mark.
        assert_eq!(words(PreTokenizer::Qwen2, "cafe\u{301}s"), ["cafe", "\u{301}s"]);
        // A mark with no letter before it starts a word; one after a symbol
        // is no longer part of the symbol run.
        assert_eq!(words(PreTokenizer::Qwen35, "\u{301}x !\u{301}"), ["\u{301}x", " !", "\u{301}"]);
    }

    #[test]
    fn qwen35_splits_digits_contractions_and_line_breaks_as_qwen2() {
        let text = "It'S 2024, we'LL see.\r\n\r\n  x  \n";
        assert_eq!(
            words(PreTokenizer::Qwen35, text),
            ["It", "'S", " ", "2", "0", "2", "4", ",", " we", "'LL", " see", ".\r\n\r\n", " ", " x", "  \n"]
        );
        assert_eq!(words(PreTokenizer::Qwen35, text), words(PreTokenizer::Qwen2, text));
        assert_eq!(words(PreTokenizer::Qwen35, "你好，世界！"), ["你好", "，世界", "！"]);
    }
}
